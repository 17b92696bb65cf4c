//! Logging for Lambda functions: `tracing` events to stdout, as Lambda's
//! advanced logging controls expect, without `EnvFilter`.
//!
//! [`init`] reads the same variables as `lambda_runtime`'s
//! `init_default_subscriber`: `AWS_LAMBDA_LOG_LEVEL`, else `RUST_LOG`, else
//! `INFO`; JSON lines when `AWS_LAMBDA_LOG_FORMAT` is `JSON`. The difference
//! is that the level is one level for everything (`debug`, `warn`...), not
//! an `EnvFilter` directive list: `EnvFilter` brings a regex engine, about
//! 0.5 MB of a 3 MB function. A directive list it cannot read as a level
//! leaves the level at `INFO`.

use tracing::level_filters::LevelFilter;

/// The level from `AWS_LAMBDA_LOG_LEVEL` or `RUST_LOG` (in that order),
/// `INFO` when neither is set or readable as a level.
pub fn level(lookup: impl Fn(&str) -> Option<String>) -> LevelFilter {
    lookup("AWS_LAMBDA_LOG_LEVEL")
        .or_else(|| lookup("RUST_LOG"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(LevelFilter::INFO)
}

/// Installs the subscriber (once; later calls do nothing).
pub fn init() {
    let get = |name: &str| std::env::var(name).ok();
    let json = get("AWS_LAMBDA_LOG_FORMAT").is_some_and(|f| f.eq_ignore_ascii_case("json"));
    let fmt = tracing_subscriber::fmt()
        .with_max_level(level(get))
        .with_target(false)
        .without_time()
        .with_ansi(false);
    let _ = if json {
        fmt.json().try_init()
    } else {
        fmt.try_init()
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    use lease_core::settings::lookup_in as lookup;

    #[test]
    fn lambda_level_first_then_rust_log_then_info() {
        assert_eq!(level(lookup(&[])), LevelFilter::INFO);
        assert_eq!(level(lookup(&[("RUST_LOG", "debug")])), LevelFilter::DEBUG);
        assert_eq!(
            level(lookup(&[
                ("RUST_LOG", "debug"),
                ("AWS_LAMBDA_LOG_LEVEL", "WARN")
            ])),
            LevelFilter::WARN
        );
        // A directive list is not a level: INFO.
        assert_eq!(
            level(lookup(&[("RUST_LOG", "lease=trace,hyper=off")])),
            LevelFilter::INFO
        );
    }
}
