//! Integration-test support for the workspace.
//!
//! [`servers`] starts real S3-compatible servers (moto, s3rver) on
//! `127.0.0.1`, each on a free port, owned by a value that stops the process
//! by its own PID when dropped. The servers come from `make setup` (a Python
//! venv at `.venv` and `tests/node_modules`); nothing is downloaded when the
//! tests run.
//!
//! [`gcs`] is a stand-in for Google Cloud Storage's XML API (no emulator
//! honours its generation preconditions), in process on a virtual clock.
//!
//! [`lab`] is the fleet lab: real processes (`lease run` with the
//! `lab-job` binary, the `lab-service` binary, `lab-shard` members of a
//! shard fleet) against one real store behind a fault proxy, with process
//! faults, and a checker over what the jobs wrote.
//!
//! [`layers`] reads the workspace's import graph from the source and finds
//! its cycles and the imports that run up `lease-core`'s layers.

#![warn(missing_docs)]

pub mod gcs;
pub mod lab;
pub mod layers;
pub mod servers;
