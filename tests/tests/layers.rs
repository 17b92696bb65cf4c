//! The layers are true: no import cycle in any crate of the workspace, and
//! no import in `lease-core` that runs up the layer table of its `lib.rs`
//! (`lease_tests::layers` says how the source is read).

use std::path::Path;

#[test]
fn no_cycle_and_no_upward_import() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let findings = lease_tests::layers::check_workspace(root);
    let lines = findings.describe(root);
    println!(
        "layers: {} files, {} imports between files, {} findings",
        findings.files,
        findings.edges,
        lines.len()
    );
    assert!(findings.files > 100, "too few files read: {findings:?}");
    assert!(
        lines.is_empty(),
        "the layers are not true:\n{}",
        lines.join("\n")
    );
}
