#![forbid(unsafe_code)]
#![warn(missing_docs)]
//! The Lambda wrapper of `lease-core`: the singleton for `lambda_runtime`
//! ([`singleton`]: one run per tick, never two at once) on the native
//! adapter (`lease-native`), and logging as Lambda expects it
//! ([`logging`]). The example function `scheduled-singleton`
//! (`src/bin/scheduled-singleton.rs`) is built on them. Feature `runtime`
//! (default) brings the singleton and the function; without it only the
//! logging levels remain.

pub mod logging;
#[cfg(feature = "runtime")]
pub mod singleton;

/// The README's Rust examples, compiled (and the core's run) as doctests
/// of this crate, which has every dependency they use but the Worker's.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeExamples;

/// docs/guide.md's Rust examples, compiled (and the core's run) likewise.
#[cfg(doctest)]
#[doc = include_str!("../../docs/guide.md")]
pub struct GuideExamples;
