//! The flight recorder: every input of the machines a client ran, kept so
//! that an incident replays exactly (feature `trace`; the format is in
//! `docs/operations.md`).
//!
//! The machines are deterministic: what they do follows from how they were
//! built (the configuration, the randomness they were given, the lease or
//! claims handed to them) and what they were fed (the local times of each
//! poll, each store reply with its date, each stop). A [`Recorder`] given
//! to a client ([`Leases::record_to`](crate::client::Leases::record_to))
//! keeps all of that for the operations that hold a lease (acquire, renew,
//! release, hold, lead), with each output the machine gave, in a bounded
//! buffer of JSON lines. A [`Recorded`] machine is the layer that writes
//! them.
//!
//! [`replay`] builds each run's machine again, feeds it the same inputs
//! and compares every output, then judges the whole trace by rules that
//! need no trust in the code that wrote it: fencing tokens increase, every
//! local deadline lies within the expiry the store was given (judged from
//! the written records and the replies' dates alone), and work noted as
//! running ended by its deadline.
//!
//! What a trace holds is what the machines see, which is below signing:
//! lease keys, holder names, records, etags, dates and the server's error
//! codes and messages; never a credential, a signature or an
//! `Authorization` header. Server messages and transport errors are
//! scrubbed of anything shaped like an access key id or a signed URL's
//! credential parameters before they are kept.
//!
//! Without the feature only [`Start`] and [`Traced`] exist (the client's
//! call sites name what they run with them), and nothing is recorded.

use crate::config::LeaseConfig;
use crate::entropy::Entropy;
use crate::protocol::elector::{ElectorExit, HolderExit};
use crate::protocol::machine::{
    AcquireOutcome, Claim, Lease, LeaseError, ReleaseOutcome, RenewOutcome,
};
use crate::time::Mono;
use core::fmt::Debug;

#[cfg(feature = "trace")]
mod json;
#[cfg(feature = "trace")]
mod recorder;
#[cfg(feature = "trace")]
pub mod replay;
#[cfg(feature = "trace")]
pub use recorder::{Recorded, Recorder};

/// What a recorded run was asked to do, with everything its machine was
/// built from.
#[derive(Clone, Debug)]
pub enum Start {
    /// [`LeaseOp::acquire`](crate::protocol::lease::LeaseOp::acquire) with
    /// the claims handed to it.
    Acquire {
        /// The lease's configuration.
        cfg: LeaseConfig,
        /// The randomness it was given.
        entropy: Entropy,
        /// Records of ours it may take over.
        claims: Vec<Claim>,
    },
    /// [`LeaseOp::renew`](crate::protocol::lease::LeaseOp::renew).
    Renew {
        /// The lease's configuration.
        cfg: LeaseConfig,
        /// The randomness it was given.
        entropy: Entropy,
        /// The lease renewed.
        lease: Lease,
    },
    /// [`LeaseOp::release`](crate::protocol::lease::LeaseOp::release).
    Release {
        /// The lease's configuration.
        cfg: LeaseConfig,
        /// The randomness it was given.
        entropy: Entropy,
        /// The lease released.
        lease: Lease,
    },
    /// A [`Holder`](crate::protocol::elector::Holder): renewals while work
    /// runs, then the release.
    Hold {
        /// The lease's configuration.
        cfg: LeaseConfig,
        /// The randomness it was given.
        entropy: Entropy,
        /// The lease held.
        lease: Lease,
    },
    /// An [`Elector`](crate::protocol::elector::Elector): a campaign.
    Elect {
        /// The lease's configuration.
        cfg: LeaseConfig,
        /// The randomness it was given.
        entropy: Entropy,
    },
}

impl Start {
    /// The operation's name in a trace: `acquire`, `renew`, `release`,
    /// `hold` or `elect`.
    pub fn op(&self) -> &'static str {
        match self {
            Start::Acquire { .. } => "acquire",
            Start::Renew { .. } => "renew",
            Start::Release { .. } => "release",
            Start::Hold { .. } => "hold",
            Start::Elect { .. } => "elect",
        }
    }

    /// The configuration the run's machine was built with.
    pub fn config(&self) -> &LeaseConfig {
        match self {
            Start::Acquire { cfg, .. }
            | Start::Renew { cfg, .. }
            | Start::Release { cfg, .. }
            | Start::Hold { cfg, .. }
            | Start::Elect { cfg, .. } => cfg,
        }
    }
}

/// An outcome a recorded machine finishes with: how a trace shows it.
pub trait Traced: Debug {
    /// The lease this outcome holds (its token and local deadline), for the
    /// rules a replay checks.
    fn held(&self) -> Option<(u64, Mono)> {
        None
    }
}

impl Traced for Result<AcquireOutcome, LeaseError> {
    fn held(&self) -> Option<(u64, Mono)> {
        match self {
            Ok(AcquireOutcome::Acquired(l)) => Some((l.token, l.valid_until)),
            _ => None,
        }
    }
}

impl Traced for Result<RenewOutcome, LeaseError> {
    fn held(&self) -> Option<(u64, Mono)> {
        match self {
            Ok(RenewOutcome::Renewed(l)) => Some((l.token, l.valid_until)),
            _ => None,
        }
    }
}

impl Traced for Result<ReleaseOutcome, LeaseError> {}
impl Traced for HolderExit {}
impl Traced for ElectorExit {}
