//! Integration-test support for the workspace.
//!
//! [`servers`] starts real S3-compatible servers (moto, s3rver) on
//! `127.0.0.1`, each on a free port, owned by a value that stops the process
//! by its own PID when dropped. The servers come from `make setup` (a Python
//! venv at `.venv` and `tests/node_modules`); nothing is downloaded when the
//! tests run.
//!
//! [`lab`] is the fleet lab: real processes (`lease run` with the
//! `lab-job` binary, the `lab-service` binary) against one real store
//! behind a fault proxy, with process faults, and a checker over what the
//! jobs wrote.

#![warn(missing_docs)]

pub mod lab;
pub mod servers;
