//! Integration-test support for the workspace.
//!
//! [`servers`] starts real S3-compatible servers (moto, s3rver) on
//! `127.0.0.1`, each on a free port, owned by a value that stops the process
//! by its own PID when dropped. The servers come from `make setup` (a Python
//! venv at `.venv` and `tests/node_modules`); nothing is downloaded when the
//! tests run.

#![warn(missing_docs)]

pub mod servers;
