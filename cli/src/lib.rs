#![forbid(unsafe_code)]
#![warn(missing_docs)]
//! The `lease` command-line tool: its parser ([`args`]), the probe's
//! verdict kept between invocations ([`probe_cache`]) and, on Unix, the
//! job control of `lease run` ([`job`]). The binary is `src/bin/lease.rs`
//! (`cargo install --path cli`). Feature `runtime` (default) brings the
//! binary and the job control; without it only the parser remains.

pub mod args;
#[cfg(all(feature = "runtime", unix))]
pub mod job;
pub mod probe_cache;

pub use args::{code, run_grace, Cli, CliError, Command};
