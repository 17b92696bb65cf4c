//! What a recorded run was asked to do ([`Start`]) and what a run's
//! result shows of itself in a trace ([`Traced`]): the names the client's
//! call sites use, with or without the recorder.

use crate::config::LeaseConfig;
use crate::entropy::Entropy;
use crate::protocol::elector::{ElectorExit, HoldLimit, HolderExit};
use crate::protocol::outcome::{
    AcquireOutcome, Claim, Lease, LeaseError, ReleaseOutcome, RenewOutcome,
};
use crate::time::Mono;
use core::fmt::Debug;

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
        /// A run's time limit, if it had one.
        limit: Option<HoldLimit>,
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
