//! Where the workspace and the tools `make setup` installs are.

use std::path::{Path, PathBuf};

/// The workspace root: the parent of this crate's directory
/// (`CARGO_MANIFEST_DIR` at build time), which holds `Makefile`, `.venv`
/// and `tests/`.
pub fn workspace_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| manifest_dir.to_path_buf())
}

/// The Python venv with moto: `<workspace>/.venv`.
///
/// Fails with a message that says to run `make setup` when
/// `.venv/bin/moto_server` or `.venv/bin/python` is missing.
pub fn venv_dir() -> Result<PathBuf, String> {
    let venv = workspace_root().join(".venv");
    for tool in ["bin/python", "bin/moto_server"] {
        let path = venv.join(tool);
        if !path.is_file() {
            return Err(format!(
                "{} is missing: run `make setup` first (in {}); it creates .venv with moto[server]",
                path.display(),
                workspace_root().display()
            ));
        }
    }
    Ok(venv)
}

/// The npm packages of the tests: `<workspace>/tests/node_modules`.
///
/// Fails with a message that says to run `make setup` when
/// `tests/node_modules/.bin/s3rver` is missing.
pub fn node_modules_dir() -> Result<PathBuf, String> {
    let dir = workspace_root().join("tests").join("node_modules");
    let s3rver = dir.join(".bin").join("s3rver");
    if !s3rver.exists() {
        return Err(format!(
            "{} is missing: run `make setup` first (in {}); it runs `npm ci` in tests/",
            s3rver.display(),
            workspace_root().display()
        ));
    }
    Ok(dir)
}
