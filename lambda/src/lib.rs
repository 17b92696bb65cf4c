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

/// An environment lookup over fixed pairs, for the tests of settings read
/// through a lookup function.
#[cfg(test)]
pub(crate) fn lookup_in<'a>(vars: &'a [(&str, &str)]) -> impl Fn(&str) -> Option<String> + 'a {
    |name| {
        vars.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.to_string())
    }
}

/// The README's Rust examples, compiled (and the core's run) as doctests
/// of this crate, which has every dependency they use but the Worker's.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeExamples;
