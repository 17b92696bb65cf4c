//! Real S3-compatible servers for integration tests.
//!
//! Every server listens on `127.0.0.1` on a port that was free when it
//! started, writes its output to a log file in a private temporary
//! directory, and is owned by one value: dropping the value (when a test
//! ends, passed or panicked) sends `SIGTERM` to the server's own PID, then
//! `SIGKILL` after a short grace, reaps it and removes the directory.
//! Nothing is ever stopped by name. When the drop happens during a panic,
//! the end of the server's log is printed first, so a failing test shows
//! what the server said.
//!
//! | server | start | conditional PUT | signatures |
//! |---|---|---|---|
//! | [`Moto`] (moto 5.2.5) | [`Moto::start`] | `If-None-Match: *` on an existing key: 412; `If-Match` honoured (requests need an `Authorization` header, see [`Moto`]) | not checked by default; [`MotoOptions::auth`] turns checking on |
//! | [`S3rver`] (s3rver 3.7.1) | [`S3rver::start`] | **ignored**: every PUT wins | SigV4 accepted unchecked from key id `S3RVER` |
//! | [`Azurite`] (azurite 3.35.0) | [`Azurite::start`] | Azure Blob: `If-None-Match: *` on an existing blob 409 `BlobAlreadyExists`; `If-Match` 412; atomic | SharedKey or SAS, always checked |
//!
//! They are installed by `make setup` (moto into `.venv`, s3rver and
//! Azurite into `tests/node_modules`); [`venv_dir`] and [`node_modules_dir`] fail with
//! "run `make setup` first" when they are missing.
//!
//! ```no_run
//! use lease_tests::servers::{http_request, Moto, MotoOptions};
//!
//! let moto = Moto::start(MotoOptions::default()).unwrap();
//! moto.create_bucket("locks").unwrap();
//! let put = |body: &[u8]| {
//!     http_request(
//!         &moto.endpoint(),
//!         "PUT",
//!         "/locks/leader",
//!         &[
//!             ("Authorization", Moto::UNCHECKED_AUTHORIZATION),
//!             ("Content-Type", "application/octet-stream"),
//!             ("If-None-Match", "*"),
//!         ],
//!         body,
//!     )
//!     .unwrap()
//!     .status
//! };
//! assert_eq!(put(b"a"), 200);
//! assert_eq!(put(b"b"), 412);
//! // `moto` dropped here: the server process is stopped by its PID.
//! ```

mod azurite;
mod http;
mod identity;
mod lambda;
mod moto;
mod paths;
mod process;
mod s3rver;

pub use azurite::Azurite;
pub use http::{http_request, HttpResponse};
pub use identity::{iso8601, Asked, IdentityStandIn, Issued};
pub use lambda::CargoLambda;
pub use moto::{Moto, MotoCredentials, MotoOptions};
pub use paths::{node_modules_dir, venv_dir, workspace_root};
pub use process::{
    free_port, process_exists, send_signal, spawn_on_free_port, wait_for_port, ServerProcess,
    START_TIMEOUT, STOP_GRACE,
};
pub use s3rver::S3rver;
