//! Broken variants of the protocol, for verification and the demo only.
//!
//! This module, and the `variant` field of
//! [`LeaseConfig`](crate::config::LeaseConfig) that selects one, exist only
//! with the cargo feature `unsafe-variants` (the simulator, the `lease-sim`
//! crate, turns it on; the browser demo turns it on for its naive client). In any
//! other build the machines' checks for a variant are the constant `false`,
//! so no product build can run a broken rule by a setting.
//!
//! Each variant shows a failure the safe protocol prevents: the simulation
//! tests prove their checkers catch every one (`docs/verification.md`).
//! The variants that undo a fix found by the product simulation are listed
//! in [`Variant::FINDINGS`]; "finding N" below is the numbered table of
//! `docs/verification.md`.

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
    /// Reports a lease confirmed after its local deadline as acquired, and
    /// `Leases::run` and the holding start work on it (finding 1: a job with no valid lease).
    TrustLateWin,
    /// Gives up on a write of unknown outcome once the retry budget is
    /// spent, without re-reading to settle it and without handing it on as
    /// a claim (finding 2: a client kept out by its own record).
    NoSettle,
    /// Waits out any `Retry-After`, with no overall deadline for the
    /// operation (finding 3: one 429 stalls an operation for hours).
    UncappedRetryAfter,
    /// Epochs release overwrites the epoch object with a plain PUT instead
    /// of creating the next one, and reports it without the confirming
    /// LIST (finding 4: `Released` after a takeover).
    BlindEpochRelease,
    /// A mutex release reports `Released` at once, without waiting out the
    /// late creates its acquisition left behind (finding 5: a ghost lock).
    IgnoreStrays,
    /// Recognises its own writes by nonce alone (finding 6: two clients
    /// seeded alike both win).
    NonceOnly,
    /// Skips the check for another protocol's records at the key after a
    /// create (finding 7: two holders under two protocols).
    NoProtocolCheck,
}

impl Variant {
    /// Every variant, [`Variant::Safe`] first (a flight recorder's trace
    /// names them by their `Debug` names).
    pub const ALL: [Variant; 13] = [
        Variant::Safe,
        Variant::NaiveClock,
        Variant::TrustReplies,
        Variant::NoMargins,
        Variant::BlindFence,
        Variant::Naive,
        Variant::TrustLateWin,
        Variant::NoSettle,
        Variant::UncappedRetryAfter,
        Variant::BlindEpochRelease,
        Variant::IgnoreStrays,
        Variant::NonceOnly,
        Variant::NoProtocolCheck,
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

    /// Takes a lease confirmed after its deadline as held.
    pub fn trusts_late_wins(self) -> bool {
        matches!(self, Variant::TrustLateWin)
    }

    /// Ends on a write of unknown outcome without settling it.
    pub fn leaves_writes_unsettled(self) -> bool {
        matches!(self, Variant::NoSettle)
    }

    /// Operations have no overall deadline; `Retry-After` is uncapped.
    pub fn uncapped_retry_after(self) -> bool {
        matches!(self, Variant::UncappedRetryAfter)
    }

    /// Epochs release is an unconditional overwrite.
    pub fn blind_epoch_release(self) -> bool {
        matches!(self, Variant::BlindEpochRelease)
    }

    /// Mutex release ignores late creates.
    pub fn ignores_strays(self) -> bool {
        matches!(self, Variant::IgnoreStrays)
    }

    /// Own writes are recognised by nonce alone.
    pub fn nonce_only(self) -> bool {
        matches!(self, Variant::NonceOnly)
    }

    /// No check for another protocol at the key.
    pub fn skips_protocol_check(self) -> bool {
        matches!(self, Variant::NoProtocolCheck)
    }

    /// The variants that each undo one fix found by the product
    /// simulation (see each variant's doc).
    pub const FINDINGS: [Variant; 7] = [
        Variant::TrustLateWin,
        Variant::NoSettle,
        Variant::UncappedRetryAfter,
        Variant::BlindEpochRelease,
        Variant::IgnoreStrays,
        Variant::NonceOnly,
        Variant::NoProtocolCheck,
    ];
}
