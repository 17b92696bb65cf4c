//! The broken clients the browser demo teaches with: a lock that trusts
//! wall clocks, one that trusts unclear replies, one without margins, an
//! unfenced write, and all of those at once.
//!
//! This module, and the `variant` field of
//! [`LeaseConfig`](crate::config::LeaseConfig) that selects one, exist only
//! with the cargo feature `unsafe-variants` (the browser demo turns it on
//! for its naive client; the simulator, the `lease-sim` crate, to show its
//! checkers catch them). In any other build the machines' checks for a
//! variant are the constant `false`, so no product build can run a broken
//! rule by a setting.
//!
//! Each variant shows a failure the safe protocol prevents: the simulation
//! tests prove their checkers catch every one (`docs/verification.md`).
//! A fix undone for a test (the simulation's findings among them) is not a
//! variant but a mutant of a test build (`lease_core::mutants`, built
//! only with `--cfg lease_mutants`).

/// Which rules the machines follow (set in [`LeaseConfig::variant`](crate::config::LeaseConfig)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Variant {
    /// The protocol as documented.
    #[default]
    Safe,
    /// Trusts local wall clocks: stamps `expires_at` from its own wall
    /// clock, holds the lease until then with no margin, and judges others'
    /// expiry by its own wall clock.
    NaiveClock,
    /// Takes a 5xx or a lost reply on a write as success instead of
    /// re-reading for its nonce.
    TrustReplies,
    /// Holds the lease for the full ttl from the first send, with no date
    /// resolution or drift margin.
    NoMargins,
    /// Fenced writes check the token but then write without `If-Match`, so
    /// a stale holder can overwrite a newer holder's data.
    BlindFence,
    /// The shortcuts a hand-rolled lock tends to take all at once: trusts
    /// wall clocks ([`Variant::NaiveClock`]), takes an unclear reply as
    /// success without checking its nonce ([`Variant::TrustReplies`]), and
    /// writes to the protected resource with a plain PUT: no token check,
    /// no `If-Match`. The browser demo's "naive".
    Naive,
}

impl Variant {
    /// Every variant, [`Variant::Safe`] first (a flight recorder's trace
    /// names them by their `Debug` names).
    pub const ALL: [Variant; 6] = [
        Variant::Safe,
        Variant::NaiveClock,
        Variant::TrustReplies,
        Variant::NoMargins,
        Variant::BlindFence,
        Variant::Naive,
    ];

    /// Judges expiry and stamps `expires_at` by the local wall clock.
    pub fn trusts_wall_clock(self) -> bool {
        matches!(self, Variant::NaiveClock | Variant::Naive)
    }

    /// Takes a 5xx or a lost reply on a write as success.
    pub fn trusts_replies(self) -> bool {
        matches!(self, Variant::TrustReplies | Variant::Naive)
    }

    /// Leaves out the date resolution and drift margins.
    pub fn no_margins(self) -> bool {
        matches!(self, Variant::NoMargins)
    }

    /// Fenced writes go out without `If-Match`.
    pub fn blind_fence(self) -> bool {
        matches!(self, Variant::BlindFence | Variant::Naive)
    }

    /// Fenced writes do not even read the token first: a plain PUT.
    pub fn unfenced_writes(self) -> bool {
        matches!(self, Variant::Naive)
    }
}
