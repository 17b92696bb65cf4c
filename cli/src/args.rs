//! The `lease` command line, parsed: flags over the environment, turned
//! into the store's settings and the lease's configuration. The binary
//! (`src/bin/lease.rs`) runs what this module parses; the parser lives in
//! the library so that it can be tested and fuzzed without a store, a
//! runtime or a process (`fuzz/`, target `cli_flags`).
//!
//! Parsing is total: any arguments give a [`Cli`] or a clap error (usage,
//! exit 2; `--help` and `--version`, exit 0), and a parsed [`Cli`] gives
//! settings and a configuration or a [`CliError`] naming the flag or
//! variable to fix.

use clap::{Args, Parser, Subcommand, ValueEnum};
use lease_core::client::default_grace;
use lease_core::plan::Plan;
use lease_core::protocol::{BUCKET_RACERS, BUCKET_ROUNDS};
use lease_core::wire::Provider;
use lease_core::{ConfigError, LeaseConfig, Protocol, Settings, SettingsError, StoreSettings};
use std::ffi::OsString;
use std::fmt;
use std::time::Duration;

/// Exit codes (documented in `--help`, the README and docs/guide.md).
pub mod code {
    /// Done.
    pub const OK: u8 = 0;
    /// An error: settings, credentials, the store.
    pub const ERROR: u8 = 1;
    /// The command line cannot be used (clap's, and a flag's value that
    /// only the run can read: a cron expression, a tick id).
    pub const USAGE: u8 = 2;
    /// Another holder is live.
    pub const BUSY: u8 = 3;
    /// The lease is not ours any more, or changed since the etag given.
    pub const LOST: u8 = 4;
    /// The capability probe failed a check the protocol needs.
    pub const UNSAFE_STORE: u8 = 5;
    /// `replay`: the trace did not replay identically, or broke a rule.
    pub const BROKEN: u8 = 6;
    /// `run --cron/--every/--tick`: the tick already ran to completion
    /// (CMD did not run again).
    pub const ALREADY_RAN: u8 = 7;
    /// `run --late-after`: this start is too late into its slot (CMD did
    /// not run, nothing was written).
    pub const TOO_LATE: u8 = 8;
    /// `run` could not start CMD.
    pub const CANNOT_RUN: u8 = 127;
}

const AFTER_HELP: &str = "\
Settings come from flags or the environment: LEASE_PROVIDER, LEASE_BUCKET,
LEASE_KEY, LEASE_ENDPOINT (or AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL),
AWS_REGION, LEASE_ACCOUNT, LEASE_PATH_STYLE, LEASE_PROTOCOL, LEASE_TTL,
LEASE_HOLDER, LEASE_CLOCK_OFFSET_MS (tests: shift this process's wall
clock), and the credentials AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
AWS_SESSION_TOKEN (S3, and GCS HMAC keys) or AZURE_STORAGE_ACCOUNT with
AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN (Azure).

Exit codes: 0 done; 1 error (settings, credentials, store); 2 usage;
3 busy (another holder is live); 4 lost (the lease is not ours any more,
or changed since the etag given); 5 unsafe store (the capability probe
failed a check the protocol needs); 6 a trace `replay` found diverging or
breaking a rule; 7 already ran (`run` for a tick: the tick ran to
completion); 8 too late (`run --late-after`: CMD did not run). `run` exits
with CMD's status (128 + signal if a signal ended it), or the busy / lost /
already-ran codes, which --busy-exit, --lost-exit and --already-ran-exit can
change.

Examples:
  # Run a cron job on one machine at a time (a distributed flock):
  lease --bucket locks --key cron/backup run --ttl 60s -- /usr/local/bin/backup
  # The same crontab line on many hosts, once per nightly slot:
  lease --bucket locks --key cron/nightly run --cron '0 3 * * *' -- ./nightly.sh
  # Who holds it?
  lease --bucket locks --key cron/backup inspect --json
  # Take it by hand, then give it back with the etag acquire printed:
  lease --bucket locks --key deploy acquire --ttl 10m --json
  lease --bucket locks --key deploy release --etag 9b2cf535f27731c974343645a3985328
  # Failover, requests and cost of 20 leases on R2 with one standby each (no request made):
  lease plan --provider r2 --ttl 30s --leases 20 --contenders 1
  # Does this store enforce conditional writes?
  lease --endpoint http://127.0.0.1:9000 --bucket locks --key probe-here probe";

// The items clap derives from carry no doc comments of their own: on these
// they would become help text (`about`), and the help must stay as it is.
#[allow(missing_docs)]
#[derive(Parser, Debug)]
#[command(
    name = "lease",
    version,
    about = "Leases, locks and leader election on object storage (S3, R2, GCS, Azure Blob)",
    after_help = AFTER_HELP
)]
pub struct Cli {
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub lease: LeaseArgs,
    /// Print JSON (on stdout; for `run`, on stderr, which CMD does not share)
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[allow(missing_docs)]
#[derive(Args, Debug)]
pub struct StoreArgs {
    /// Provider preset: aws, r2, minio, tigris, gcs, azure, generic
    /// (default: aws, or generic with --endpoint)
    #[arg(long, global = true, env = "LEASE_PROVIDER")]
    pub provider: Option<String>,
    /// Account: R2's account id (LEASE_ACCOUNT), Azure's storage account
    /// (AZURE_STORAGE_ACCOUNT)
    #[arg(long, global = true)]
    pub account: Option<String>,
    /// S3-compatible endpoint, e.g. http://127.0.0.1:9000 (default: AWS S3 in --region)
    #[arg(long, global = true, env = "LEASE_ENDPOINT")]
    pub endpoint: Option<String>,
    /// Bucket holding the lease
    #[arg(long, global = true, env = "LEASE_BUCKET")]
    pub bucket: Option<String>,
    /// Region (signing, and the AWS endpoint)
    #[arg(long, global = true, env = "AWS_REGION")]
    pub region: Option<String>,
    /// Path-style addressing: endpoint/bucket/key (default: on with --endpoint)
    #[arg(long, global = true, env = "LEASE_PATH_STYLE")]
    pub path_style: Option<bool>,
    /// How If-Match etags are written
    #[arg(long, global = true, value_enum, env = "LEASE_ETAG_QUOTING")]
    pub etag_quoting: Option<Quoting>,
    /// Send unsigned requests (local emulators only)
    #[arg(long, global = true)]
    pub unsigned: bool,
    /// Access key id
    #[arg(long, global = true, env = "AWS_ACCESS_KEY_ID", hide_env_values = true)]
    pub access_key_id: Option<String>,
    /// Secret access key (prefer the environment: flags show in `ps`)
    #[arg(
        long,
        global = true,
        env = "AWS_SECRET_ACCESS_KEY",
        hide_env_values = true
    )]
    pub secret_access_key: Option<String>,
    /// Session token of temporary credentials
    #[arg(long, global = true, env = "AWS_SESSION_TOKEN", hide_env_values = true)]
    pub session_token: Option<String>,
}

#[allow(missing_docs)]
#[derive(Args, Debug)]
pub struct LeaseArgs {
    /// Object key of the lease (epochs: the prefix of the epoch objects) [env: LEASE_KEY]
    #[arg(long, global = true)]
    pub key: Option<String>,
    /// Protocol: cas (default), epochs (stores without If-Match), mutex (create/delete, no renewal) [env: LEASE_PROTOCOL]
    #[arg(long, global = true, value_enum)]
    pub protocol: Option<ProtocolArg>,
    /// Lease time to live, e.g. 30s, 5m, 1500ms (default 60s) [env: LEASE_TTL]
    #[arg(long, global = true, value_parser = parse_duration)]
    pub ttl: Option<Duration>,
    /// Holder name written into the lease (default: host name, pid and a random suffix) [env: LEASE_HOLDER]
    #[arg(long, global = true)]
    pub holder: Option<String>,
    /// Skip the capability probe before acquire and run (it costs about 12 requests) [env: LEASE_PROBE=off]
    #[arg(long, global = true)]
    pub no_probe: bool,
    /// Fair waiting: a lease this holder released is left to waiting contenders for 1 s, and --wait re-reads at least every second
    #[arg(long, global = true)]
    pub fair: bool,
}

// `--etag-quoting`.
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Quoting {
    Quoted,
    Unquoted,
}

// `--protocol`.
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ProtocolArg {
    Cas,
    Epochs,
    Mutex,
}

#[allow(missing_docs)]
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Show the lease: holder, token, expiry, etag
    Inspect,
    /// Take the lease if it is free (exit 3 when busy); prints the etag to renew or release with
    Acquire {
        /// While another holder's lease is live, keep trying this long (`30s`, `5m`) before exit 3
        #[arg(long, value_parser = parse_duration)]
        wait: Option<Duration>,
    },
    /// Extend a lease you hold, named by the etag of your last write
    Renew {
        /// Etag printed by acquire or the last renew
        #[arg(long)]
        etag: String,
    },
    /// Give back a lease you hold, named by the etag of your last write
    Release {
        /// Etag printed by acquire or the last renew
        #[arg(long)]
        etag: String,
    },
    /// Force-release the version of the lease you inspected (operators only)
    Break {
        /// Etag shown by inspect: nothing happens if the lease changed since
        #[arg(long)]
        etag: String,
        /// For an unreadable object: the token the next holder continues above
        #[arg(long)]
        token_floor: Option<u64>,
    },
    /// Check that the store enforces the conditions each protocol needs, one request at a time and under concurrency (exit 5 if the chosen protocol is unsafe or a race had two winners); the verdict is kept for the fleet
    Probe {
        /// Writes sent at once in each race (creates of one key, then replaces of its version)
        #[arg(long, default_value_t = BUCKET_RACERS as u16, value_parser = clap::value_parser!(u16).range(2..=64))]
        concurrency: u16,
        /// Rounds of races, each on a key of its own; a single round with two winners refuses the store
        #[arg(long, default_value_t = BUCKET_ROUNDS, value_parser = clap::value_parser!(u32).range(1..=100))]
        rounds: u32,
        /// Only the checks that read (no write permission needed: an auditor's or a dashboard's credentials): Date, 304, listing, versions, and the fleet's kept verdict; says what it could not check
        #[arg(long)]
        read_only: bool,
    },
    /// Print an S3 bucket policy that refuses unconditional writes under the lease key's prefix (--key, e.g. `locks/`), to apply yourself
    Policy {
        /// Also refuse deletes without If-Match (cas and mutex; epochs deletes superseded epochs without it). The probe's cleanup of its scratch objects is then refused and leaves them
        #[arg(long)]
        deletes: bool,
    },
    /// List every lease under PREFIX: holder, token, time left, protocol (simple clients' records shown as such)
    Ls {
        /// Key prefix, e.g. `jobs/` (default: --key)
        prefix: Option<String>,
        /// List again every DURATION (`1s`) and print each key's changes: held, LEADERLESS, held again after N ms (leaderless time measured from the outside); --json prints one JSON object a line
        #[arg(long, value_parser = parse_duration)]
        watch: Option<Duration>,
        /// With --watch: stop after DURATION and print each key's leaderless time, longest stretch and handoffs
        #[arg(long = "for", value_parser = parse_duration, requires = "watch")]
        for_: Option<Duration>,
    },
    /// Plan a lease before adopting it: the failover bound, requests and their cost a month at list prices, the noncurrent versions a versioned bucket keeps, and any limit the settings break (exit 1 then), for --provider, --ttl and --protocol; makes no request and needs no bucket or credentials
    Plan {
        /// How often the leader renews, e.g. 10s (default ttl / 3)
        #[arg(long, value_parser = parse_duration)]
        renew_every: Option<Duration>,
        /// How many leases
        #[arg(long, default_value_t = 1)]
        leases: u64,
        /// Contenders waiting for each lease (standbys that campaign)
        #[arg(long, default_value_t = 0)]
        contenders: u64,
    },
    /// Run a flight-recorder trace (`run --trace`) again and check it: the same outputs, and no safety rule broken (exit 6 otherwise); needs no store
    Replay {
        /// The trace file
        trace: std::path::PathBuf,
    },
    /// Hold the lease while CMD runs; CMD is stopped (TERM, then KILL) before the lease's deadline if renewal fails; with --cron, --every or --tick, once per tick
    #[command(group(clap::ArgGroup::new("schedule").args(["cron", "every"])))]
    Run {
        /// After TERM, how long CMD has before KILL (both land before the lease's deadline; must fit the ttl) [default: 10s, or the most the ttl allows]
        #[arg(long, value_parser = parse_duration)]
        grace: Option<Duration>,
        /// While another holder's lease is live, keep trying this long before giving up with --busy-exit (not with a tick: one busy elsewhere is running there)
        #[arg(long, value_parser = parse_duration, conflicts_with_all = ["cron", "every", "tick"])]
        wait: Option<Duration>,
        /// Run CMD in any free seat of a pool of this many at --key (seats KEY/seat-0 to KEY/seat-(N-1), 1 to 1000): at most N such commands run at once across hosts, each with its seat's token; CMD sees the seat in LEASE_SEAT and its key in LEASE_KEY (--busy-exit when every seat is taken; with --wait, wait for one)
        #[arg(long, value_name = "N", conflicts_with_all = ["cron", "every", "tick"],
            value_parser = clap::value_parser!(u32).range(1..=i64::from(lease_core::client::MAX_SEATS)))]
        seats: Option<u32>,
        /// Run once per slot of this cron schedule (five fields, UTC, or cron(...)): the slot that contains the start by the store's clock, so hosts whose clocks differ agree; a slot already run exits --already-ran-exit without running CMD
        #[arg(long, value_name = "EXPR", conflicts_with_all = ["every", "tick"])]
        cron: Option<String>,
        /// Run once per slot of this interval (slots count from the UNIX epoch, by the store's clock), as --cron
        #[arg(long, value_name = "DURATION", value_parser = parse_duration, conflicts_with = "tick")]
        every: Option<Duration>,
        /// Run once for this tick id (1 to 128 bytes of text), as the Lambda and the Worker do for theirs
        #[arg(long, value_name = "ID")]
        tick: Option<String>,
        /// The schedule's name in its slots' ids, `slot:NAME@<slot start>`: the same name as a Lambda's or a Worker's `LEASE_TICK=slot:NAME` shares their record
        #[arg(
            long,
            value_name = "NAME",
            default_value = "run",
            requires = "schedule"
        )]
        slot_name: String,
        /// With --cron or --every: a start later than this into its slot (by the store's clock) does not run it (exit 8, nothing written) [default: any start within the slot runs it]
        #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "schedule")]
        late_after: Option<Duration>,
        /// Exit code when the tick already ran (CMD did not run again)
        #[arg(long, default_value_t = code::ALREADY_RAN)]
        already_ran_exit: u8,
        /// Exit code when another holder is live
        #[arg(long, default_value_t = code::BUSY)]
        busy_exit: u8,
        /// Exit code when the lease was lost and CMD stopped
        #[arg(long, default_value_t = code::LOST)]
        lost_exit: u8,
        /// Serve /metrics (Prometheus) and /healthz on this address while holding, e.g. 127.0.0.1:9464
        #[arg(long)]
        metrics_addr: Option<std::net::SocketAddr>,
        /// Keep a flight recorder and write it to this file when the lease is lost, on an error, or on SIGUSR1 (read it with `lease replay`)
        #[arg(long, env = "LEASE_TRACE")]
        trace: Option<std::path::PathBuf>,
        /// The command and its arguments
        #[arg(required = true, last = true)]
        cmd: Vec<String>,
    },
}

/// A duration flag (`30s`, `5m`, `1500ms`), as the core reads `LEASE_TTL`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    lease_core::time::parse_duration(s)
        .ok_or_else(|| format!("`{s}` is not a duration like 30s, 5m or 1500ms"))
}

/// Why parsed flags give no usable settings or configuration.
#[derive(Clone, Debug, PartialEq)]
pub enum CliError {
    /// A store or lease setting is missing or invalid (the message names
    /// the variable; its flag has the same name in kebab case).
    Settings(SettingsError),
    /// The settings cannot work together (the message names the number).
    Config(ConfigError),
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Settings(e) => e.fmt(f),
            CliError::Config(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for CliError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CliError::Settings(e) => Some(e),
            CliError::Config(e) => Some(e),
        }
    }
}

impl Cli {
    /// Parses `args` (the first is the program name) as the binary does,
    /// reading the environment for the flags that fall back on a variable.
    pub fn parse_from<I, T>(args: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        Cli::try_parse_from(args)
    }

    /// Where the lease lives: each store flag given, else the variable
    /// `env` returns for it (the process environment in the binary).
    pub fn store_settings(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<StoreSettings, SettingsError> {
        let args = &self.store;
        let lookup = |var: &str| -> Option<String> {
            let flag = match var {
                "LEASE_PROVIDER" => args.provider.clone(),
                "LEASE_ACCOUNT" | "AZURE_STORAGE_ACCOUNT" => args.account.clone(),
                "LEASE_ENDPOINT" => args.endpoint.clone(),
                "LEASE_BUCKET" => args.bucket.clone(),
                "AWS_REGION" => args.region.clone(),
                "LEASE_PATH_STYLE" => args.path_style.map(|b| b.to_string()),
                "LEASE_ETAG_QUOTING" => args.etag_quoting.map(|q| format!("{q:?}").to_lowercase()),
                "LEASE_UNSIGNED" => args.unsigned.then(|| "true".to_string()),
                "AWS_ACCESS_KEY_ID" => args.access_key_id.clone(),
                "AWS_SECRET_ACCESS_KEY" => args.secret_access_key.clone(),
                "AWS_SESSION_TOKEN" => args.session_token.clone(),
                _ => None,
            };
            flag.or_else(|| env(var))
        };
        // With no key given, the platform's credentials (the native
        // adapter's `cloud-credentials`): a profile, SSO, container or
        // instance credentials, Google's or Azure's.
        StoreSettings::from_lookup_or_ambient(lookup)
    }

    /// The lease's key and the client's settings: each lease flag given,
    /// else the variable `env` returns for it, else the defaults every
    /// adapter shares ([`Settings::from_lookup`]); the
    /// holder is `default_holder()` when neither names one.
    pub fn lease_settings(
        &self,
        env: impl Fn(&str) -> Option<String>,
        default_holder: impl FnOnce() -> String,
    ) -> Result<(String, Settings), CliError> {
        let args = &self.lease;
        let lookup = |var: &str| -> Option<String> {
            let flag = match var {
                // `ls PREFIX`: the prefix, else --key.
                "LEASE_KEY" => match &self.command {
                    Command::Ls {
                        prefix: Some(prefix),
                        ..
                    } => Some(prefix.clone()),
                    _ => args.key.clone(),
                },
                "LEASE_TTL" => args.ttl.map(|d| format!("{}ms", d.as_millis())),
                "LEASE_PROTOCOL" => args.protocol.map(|p| protocol(p).name().to_string()),
                "LEASE_HOLDER" => args.holder.clone(),
                "LEASE_PROBE" => args.no_probe.then(|| "off".to_string()),
                _ => None,
            };
            flag.or_else(|| env(var))
        };
        let key = lookup("LEASE_KEY").ok_or(CliError::Settings(SettingsError::Missing {
            variable: "LEASE_KEY",
            what: "object key of the lease (--key)",
        }))?;
        let settings = Settings::from_lookup(lookup, default_holder).map_err(CliError::Settings)?;
        Ok((key, settings))
    }

    /// The lease's configuration ([`lease_settings`](Self::lease_settings)
    /// and `--fair`); validated. The store's own limits are applied by the
    /// client built on it ([`Leases::with_config`](lease_core::Leases::with_config)).
    pub fn lease_config(
        &self,
        env: impl Fn(&str) -> Option<String>,
        default_holder: impl FnOnce() -> String,
    ) -> Result<LeaseConfig, CliError> {
        let (key, lease) = self.lease_settings(env, default_holder)?;
        let cfg = lease.fair(self.lease.fair).config(key);
        cfg.validate().map_err(CliError::Config)?;
        Ok(cfg)
    }
}

impl Cli {
    /// `lease plan`'s figures (see [`lease_core::plan`]) for the provider,
    /// ttl and protocol given by flag, else by the environment, else `aws`
    /// (`generic` with an endpoint), 60 s and `cas`; `renew_every` replaces
    /// the default ttl / 3. Needs no bucket, key or credentials. Settings
    /// that cannot work are not an error here: the plan reports them.
    pub fn plan(
        &self,
        env: impl Fn(&str) -> Option<String>,
        renew_every: Option<Duration>,
        leases: u64,
        contenders: u64,
    ) -> Result<Plan, CliError> {
        let invalid =
            |variable, reason| CliError::Settings(SettingsError::Invalid { variable, reason });
        let provider = match &self.store.provider {
            Some(name) => Provider::parse(name).ok_or_else(|| {
                invalid(
                    "LEASE_PROVIDER",
                    format!("`{name}` is not one of aws, r2, minio, tigris, gcs, azure, generic"),
                )
            })?,
            None if self.store.endpoint.is_some() => Provider::Generic,
            None => Provider::Aws,
        };
        let ttl = match (self.lease.ttl, env("LEASE_TTL")) {
            (Some(ttl), _) => ttl,
            (None, Some(v)) => lease_core::time::parse_duration(&v).ok_or_else(|| {
                invalid(
                    "LEASE_TTL",
                    format!("`{v}` is not a duration like 60s, 5m or 1500ms"),
                )
            })?,
            (None, None) => lease_core::DEFAULT_TTL,
        };
        let protocol = match (self.lease.protocol, env("LEASE_PROTOCOL")) {
            (Some(p), _) => protocol(p),
            (None, Some(p)) => Protocol::parse(&p).ok_or_else(|| {
                invalid(
                    "LEASE_PROTOCOL",
                    format!("`{p}` is not one of cas, epochs, mutex"),
                )
            })?,
            (None, None) => Protocol::Cas,
        };
        let mut cfg = LeaseConfig::new("plan", "plan", ttl);
        cfg.protocol = protocol;
        cfg.fair = self.lease.fair;
        if let Some(every) = renew_every {
            cfg.renew_every = every;
        }
        Ok(Plan::new(&cfg, provider, leases, contenders))
    }
}

fn protocol(arg: ProtocolArg) -> Protocol {
    match arg {
        ProtocolArg::Cas => Protocol::Cas,
        ProtocolArg::Epochs => Protocol::Epochs,
        ProtocolArg::Mutex => Protocol::Mutex,
    }
}

/// `run`'s grace period: the one asked for, else 10 s or the most the ttl
/// allows, whichever is shorter.
pub fn run_grace(requested: Option<Duration>, cfg: &LeaseConfig) -> Duration {
    requested.unwrap_or_else(|| default_grace(cfg))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    use lease_core::settings::lookup_in as env;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn flags_win_over_the_environment_and_the_key_is_required() {
        let cli = Cli::parse_from([
            "lease",
            "--bucket",
            "from-flag",
            "--unsigned",
            "--ttl",
            "45s",
            "inspect",
        ])
        .unwrap();
        let settings = cli
            .store_settings(env(&[
                ("LEASE_BUCKET", "from-env"),
                ("LEASE_ENDPOINT", "http://127.0.0.1:9000"),
            ]))
            .unwrap();
        assert_eq!(settings.bucket, "from-flag");
        assert_eq!(settings.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        assert_eq!(
            cli.lease_config(env(&[]), || "h".into())
                .unwrap_err()
                .to_string(),
            "LEASE_KEY is not set: it is the object key of the lease (--key)"
        );
        let cli = Cli::parse_from(["lease", "--key", "k", "--ttl", "45s", "inspect"]).unwrap();
        let vars = env(&[("LEASE_TTL", "5s"), ("LEASE_KEY", "other")]);
        let cfg = cli.lease_config(vars, || "h".into()).unwrap();
        assert_eq!((cfg.key.as_str(), cfg.holder.as_str()), ("k", "h"));
        assert_eq!(cfg.ttl, Duration::from_secs(45));
        assert_eq!(run_grace(None, &cfg), Duration::from_secs(10));
        // The environment, then the defaults every adapter shares.
        let cli = Cli::parse_from(["lease", "inspect"]).unwrap();
        let vars = env(&[("LEASE_KEY", "k"), ("LEASE_PROTOCOL", "epochs")]);
        let cfg = cli.lease_config(vars, || "h".into()).unwrap();
        assert_eq!(cfg.ttl, lease_core::DEFAULT_TTL);
        assert_eq!(cfg.protocol, Protocol::Epochs);
    }

    #[test]
    fn a_ttl_beyond_100_years_is_a_config_error() {
        // Found by fuzzing the settings: such a ttl passed and the first
        // acquire panicked adding durations.
        let cli = Cli::parse_from([
            "lease",
            "--key",
            "k",
            "--ttl",
            "12618374452099416064s",
            "acquire",
        ])
        .unwrap();
        let err = cli.lease_config(env(&[]), || "h".into()).unwrap_err();
        assert!(
            matches!(
                &err,
                CliError::Settings(SettingsError::Invalid { variable: "LEASE_TTL", reason })
                    if reason.contains("ttl")
            ),
            "{err}"
        );
    }

    #[test]
    fn plan_needs_no_bucket_and_reads_flags_then_the_environment() {
        let cli = Cli::parse_from(["lease", "plan", "--leases", "2"]).unwrap();
        let plan = cli.plan(env(&[]), None, 2, 0).unwrap();
        assert_eq!(
            (plan.provider, plan.protocol, plan.ttl),
            (Provider::Aws, Protocol::Cas, lease_core::DEFAULT_TTL)
        );
        let vars = env(&[("LEASE_TTL", "30s"), ("LEASE_PROTOCOL", "epochs")]);
        let plan = cli.plan(vars, Some(Duration::from_secs(5)), 1, 0).unwrap();
        assert_eq!(
            (plan.protocol, plan.ttl, plan.renew_every),
            (
                Protocol::Epochs,
                Duration::from_secs(30),
                Duration::from_secs(5)
            )
        );
        let cli = Cli::parse_from(["lease", "--provider", "dropbox", "plan"]).unwrap();
        assert!(cli
            .plan(env(&[]), None, 1, 0)
            .unwrap_err()
            .to_string()
            .contains("LEASE_PROVIDER"));
    }

    #[test]
    fn usage_errors_exit_2() {
        for args in [
            &["lease", "--ttl", "soon", "inspect"][..],
            &["lease", "run"],
            &["lease", "break"],
        ] {
            assert_eq!(
                Cli::parse_from(args).unwrap_err().exit_code(),
                2,
                "{args:?}"
            );
        }
    }
}
