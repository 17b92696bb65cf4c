#![forbid(unsafe_code)]
#![warn(missing_docs)]
//! The native adapter of `lease-core`: a [`reqwest`] transport with no
//! retries and set timeouts ([`transport`]), the process clocks on tokio
//! ([`clock`]), and S3 settings from the standard AWS environment
//! ([`settings`]) and the singleton wrapper for `lambda_runtime`
//! ([`singleton`]), over the core's holding loop and singleton. The `lease` command-line tool
//! (`src/bin/lease.rs`, its parser in [`cli`]) and the example function
//! `scheduled-singleton` (`src/bin/scheduled-singleton.rs`) are built on
//! them. Feature `runtime` (default) brings the transport, the clocks, the
//! singleton and the binaries; without it only the parsers remain.

pub mod cli;
#[cfg(feature = "runtime")]
pub mod clock;
#[cfg(all(feature = "runtime", unix))]
pub mod job;
pub mod logging;
pub mod settings;
#[cfg(feature = "runtime")]
pub mod singleton;
#[cfg(feature = "runtime")]
pub mod transport;

/// A seed for [`lease_core::entropy::Entropy`] from the operating system.
pub fn os_entropy() -> lease_core::entropy::Entropy {
    let mut seed = [0u8; 16];
    // Without OS randomness, fall back on the time and pid: ids must only
    // be unlikely to collide, not secret.
    if getrandom::fill(&mut seed).is_err() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        seed = (now ^ (u128::from(std::process::id()) << 64)).to_le_bytes();
    }
    lease_core::entropy::Entropy::from_seed(u128::from_le_bytes(seed))
}

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
