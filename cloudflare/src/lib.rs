#![forbid(unsafe_code)]
#![warn(missing_docs)]
//! The Cloudflare Workers adapter of `lease-core` (crate `worker`).
//!
//! Two stores: [`r2::R2Store`], the core's store directly on an R2 bucket
//! binding, and signed `fetch()` to S3 or R2's S3 endpoint
//! ([`fetch::FetchTransport`] under the core's SigV4 signer). The
//! environment picks one ([`settings`]). [`lease::WorkerLease`] guards a
//! cron job (one run per tick, never two at once, the fencing token
//! passed in), and answers a status endpoint and manual acquire/release.
//! [`auth`] decides who may call such routes: only the holder of a Worker
//! secret may change anything, and without the secret they are disabled.
//! Time comes from `Date.now()`, which in a Worker moves only across I/O
//! ([`clock`]).
//!
//! ```ignore
//! use lease_cloudflare::lease::WorkerLease;
//! use lease_core::Run;
//! use worker::*;
//!
//! #[event(scheduled)]
//! async fn scheduled(_event: ScheduledEvent, env: Env, _ctx: ScheduleContext) {
//!     let Ok(lease) = WorkerLease::from_env(&env) else { return };
//!     let _ = lease
//!         .run(Run::new(), |token| async move {
//!             // ... the job, passing `token` to whatever it writes ...
//!             Ok::<_, String>(())
//!         })
//!         .await;
//! }
//! ```

pub mod auth;
pub mod clock;
pub mod fetch;
pub mod lease;
pub mod r2;
pub mod settings;
