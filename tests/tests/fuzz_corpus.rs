//! The fuzzers' kept inputs, replayed on stable Rust (part of `make test`):
//! every file under `fuzz/corpus/<target>/` (the minimised corpus) and
//! `fuzz/regressions/<target>/` (each input that once crashed a target)
//! through the very function the fuzz target runs, `fuzz/harness/mod.rs`,
//! included here. A panic is a failure, named by target and file; so is a
//! target without a kept corpus, or a target that is not listed here.

#[path = "../../fuzz/harness/mod.rs"]
mod harness;

use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

/// The files in `dir`, sorted; none when it does not exist.
fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("readable directory").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

fn target(name: &str) -> harness::Body {
    harness::TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no fuzz target {name} in fuzz/harness/mod.rs"))
        .1
}

/// Runs every kept input of `name`; returns how many ran.
fn replay(name: &str) -> usize {
    let run = target(name);
    let corpus = files(&fuzz_dir().join("corpus").join(name));
    assert!(
        !corpus.is_empty(),
        "fuzz/corpus/{name}/ is missing or empty: run `make fuzz FUZZ_TARGETS={name}` and keep its minimised corpus"
    );
    let regressions = files(&fuzz_dir().join("regressions").join(name));
    for path in corpus.iter().chain(&regressions) {
        let data = std::fs::read(path).expect("readable input");
        if std::panic::catch_unwind(|| run(&data)).is_err() {
            panic!(
                "fuzz target {name} panics on {} (replay: cd fuzz && cargo +nightly fuzz run {name} {})",
                path.display(),
                path.strip_prefix(fuzz_dir()).unwrap_or(path).display()
            );
        }
    }
    corpus.len() + regressions.len()
}

macro_rules! replays {
    ($($name:ident),* $(,)?) => {
        const REPLAYED: &[&str] = &[$(stringify!($name)),*];
        $(
            #[test]
            fn $name() {
                assert!(replay(stringify!($name)) > 0);
            }
        )*
    };
}

replays!(
    record,
    s3_reply,
    gcs_reply,
    azure_reply,
    listing,
    http_dates,
    etag,
    settings_env,
    cli_flags,
    lease_ops,
);

/// Each target the harness lists is replayed here and has a fuzz target
/// file, and each fuzz target file is a harness target.
#[test]
fn every_fuzz_target_is_replayed() {
    let listed: Vec<&str> = harness::TARGETS.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        listed, REPLAYED,
        "tests/tests/fuzz_corpus.rs replays every target"
    );
    let mut files: Vec<String> = files(&fuzz_dir().join("fuzz_targets"))
        .iter()
        .filter_map(|p| Some(p.file_stem()?.to_str()?.to_string()))
        .collect();
    files.sort();
    let mut listed: Vec<String> = listed.iter().map(|n| n.to_string()).collect();
    listed.sort();
    assert_eq!(files, listed, "fuzz/fuzz_targets/ and the harness agree");
}

/// One input through one target, with every store call a `lease_ops`
/// input makes printed: `FUZZ_TARGET=lease_ops FUZZ_INPUT=path FUZZ_TRACE=1
/// cargo test -p lease-tests --test fuzz_corpus replay_one -- --ignored
/// --nocapture`. For looking into a finding on stable.
#[test]
#[ignore = "needs FUZZ_TARGET and FUZZ_INPUT"]
fn replay_one() {
    let name = std::env::var("FUZZ_TARGET").expect("FUZZ_TARGET names a target");
    let path = std::env::var("FUZZ_INPUT").expect("FUZZ_INPUT names an input file");
    target(&name)(&std::fs::read(path).expect("readable input"));
}
