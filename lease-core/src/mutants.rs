//! Broken variants of fixes, compiled only into a test build.
//!
//! A checker proves it can fail by catching a variant of the product with
//! one fix undone. Those variants live here, not in the product's
//! settings: this module exists only when the crate is built with
//! `--cfg lease_mutants` (`make test-mutants`, in its own target
//! directory), and everywhere else the hooks (`mutant!(Name)` in the
//! machines) are the constant `false`. A test selects one variant for the
//! thread it runs on with [`set`].

use core::cell::Cell;

/// A fix undone (see each variant's doc for the rule it breaks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mutant {
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
    /// A release whose write, sent at or after the lease's local deadline,
    /// got no clear reply and finds another holder says `AlreadyLost`
    /// (claims nothing it sent changed the store) instead of
    /// `ReleaseUnknown`.
    LateReleaseAlreadyLost,
    /// Epochs releases and breaks are reported as soon as their create is
    /// answered, without the LIST that shows them the newest: one that
    /// filled a deleted slot below the live epoch says `Released` or
    /// `BreakOutcome`.
    UnconfirmedEpochWrites,
    /// The singleton claims the lease as first acquired, and only after
    /// an expiry: a renewal that landed unseen late in a long job, or a
    /// release that failed, leaves a record the next run waits behind.
    ClaimOfFirstLease,
    /// A new acquisition drops the claims of earlier runs (singleton,
    /// elector): its lease does not count their creates as strays, so a
    /// late one that lands after the new lease is released keeps the next
    /// run out for a ttl.
    ForgetClaimsOnAcquire,
    /// An epochs client takes any object listed at the lease key for its
    /// marker, without looking at its size: a cas or mutex lease there
    /// goes unseen.
    MarkerUnread,
    /// A run for a tick does not look for the tick in the record it reads
    /// or takes over: a duplicate delivery of a completed tick runs again.
    IgnoreCompletedTicks,
    /// A slot's run ([`Run::slot`](crate::client::run::Run::slot)) takes
    /// its slot from the local wall clock instead of the store's `Date`:
    /// hosts whose clocks disagree run different slots, or the same slot
    /// twice.
    SlotByLocalClock,
    /// A slot's run ignores [`Slots::late_after`](crate::tick::Slots::late_after):
    /// a start later into its slot than allowed runs the stale slot.
    IgnoreLateAfter,
    /// A new record does not carry on the completed ticks of the one it
    /// replaces: a takeover forgets them, and a duplicate runs again.
    DropRunsOnTakeover,
    /// A release that recorded a tick, got no clear reply while the lease
    /// was valid and finds another holder says `Released`, and the run
    /// says its tick recorded, without looking whether the holder after it
    /// carried the tick on.
    TrustUnclearTickRelease,
    /// A waiting client's conditional re-read
    /// ([`crate::client::Revalidating`]) that found the lease changed is
    /// answered from the copy of the version read before, as if unchanged.
    ChangedReadFromCopy,
    /// A resigned [`Leadership`](crate::client::leadership::Leadership)
    /// keeps saying it leads until the campaign's `Released` event: while
    /// the release's reply is slow, another node takes the lease and the
    /// resigned handle still says yes.
    YesUntilReleased,
    /// [`Leadership::lost`](crate::client::leadership::Leadership::lost)
    /// follows whichever term is current when it wakes, not the one it was
    /// created in: created in one term and polled in the next, it stays
    /// pending and the first term's work goes on.
    LostFollowsCurrentTerm,
    /// [`Leadership::health`](crate::client::leadership::Leadership::health)
    /// never reports a renewal overdue.
    NeverOverdue,
    /// A mutex release that finds a stray of its acquisition's earlier
    /// attempt (another session of its own, sent before its lock, which
    /// the lock marks `strays`) takes it for another holder's lock and
    /// says `AlreadyLost` naming it.
    StraysOfOtherSessionsForeign,
    /// Epochs cleanup deletes every epoch below the newest, the one right
    /// below included: after an operator's break (`n + 1`) and a takeover
    /// (`n + 2`), the holder of `n` releases into the emptied slot and
    /// says `Released`.
    EpochCleanupEmptiesTheSlotBelow,
    /// A takeover of a simple client's record sends its write at once:
    /// two takeovers within one second of the store's `Date` draw the
    /// same floor, and the tokens go down.
    ForeignTokenFromDateAlone,
    /// An operator's break of a simple client's record keeps its token as
    /// it is (any number, or 0 when it wrote none) in a record of ours,
    /// whose token the next acquisition trusts: tokens go down (found by
    /// the simulation's simple clients, seed 305636045934).
    BreakKeepsForeignToken,
    /// A simple client's record is free at once, its `expires_at` ignored:
    /// the respect of simple clients' leases undone (two holders at once).
    ForeignRecordsFree,
    /// A release whose write may have landed, finding a simple client's
    /// record, judges by the ticks that record carries, as it does ours:
    /// none, so `AlreadyLost`, though its write may have been what let the
    /// simple client in (found by the simulation, seed 616883774471).
    SimpleRecordCarriesTicks,
    /// A write refused 429 by a store's per-object write limit spends a
    /// retry even when the version read back shows that another writer's
    /// write provoked it: contenders under that limit give up after three
    /// rounds (found by the simulation, seed 682157553976).
    ThrottleAlwaysSpends,
    /// A run with a time limit ([`Run::within`](crate::client::Run::within))
    /// gives its operations their whole `op_timeout`: an acquisition past
    /// the job's stop time, a release (a mutex's waiting out its strays)
    /// past the run's end, and the run returns after its time.
    RunOpsPastTimeLimit,
    /// A run that waits for the lease ([`Run::wait`](crate::client::Run::wait))
    /// within a time limit waits its whole wait, past the time its job
    /// would have: it returns after its time, and a lease it wins late is
    /// given back unrun.
    UncappedWait,
    /// A run of a smaller pool ([`Run::pool`](crate::client::Run::pool))
    /// deletes the free seats above its size (a scale-down that tidies
    /// up): when the pool grows back, a seat's tokens start again from 1,
    /// below the tokens its earlier holders fenced with.
    DeleteSeatsOnScaleDown,
    /// A run in a pool reads one seat a round, the one it draws, and is
    /// busy when that one is: it misses free seats.
    PoolReadsOneSeat,
    /// A key owned under a session is judged by its own record's expiry,
    /// as a lease of its own, without reading the session: taken over
    /// while the session that owns it is still renewed.
    OwnedIgnoresSession,
    /// A session answers for a key it owns after the session's term is
    /// over locally (its deadline passed, or another term begun): a key
    /// trusted after its session lapsed.
    OwnedOutlivesSession,
    /// A shard member gives a shard the fleet moved away back at once,
    /// with its `Revoking` event, not after the user drained it (or the
    /// drain's bound): the next owner starts while the work goes on.
    GiveBackBeforeDrain,
    /// A fleet's coordinator counts every member listed, live or not: the
    /// shards it assigns to a dead member stay unowned.
    CoordinatorCountsDeadMembers,
    /// A fleet's balance gives one member two shards more than another.
    UnevenShares,
    /// A `Leadership` handing over keeps saying it leads until its release
    /// is confirmed, not from its `HandingOver`: yes while the successor
    /// already leads.
    HandoverKeepsYes,
    /// No reply at all (a timeout) makes the local wall clock the store's
    /// anchor, as a reply the store made without a date does: the next write is stamped from a
    /// clock that may be far off, and a release stamped from one far
    /// ahead keeps its own holder out for as long.
    DatelessReplySetsClock,
    /// A record is written with all its completed ticks however large it
    /// grows: past the 8 KiB every client reads, the key is stuck.
    RecordNotFitted,
    /// A record too large even with its ticks' results as digests is
    /// written so, its oldest ticks not left out: stuck as above.
    OldTicksKept,
}

impl Mutant {
    /// The mutants that each undo one fix found by the product
    /// simulation ("finding N": the numbered table of
    /// `docs/verification.md`).
    pub const FINDINGS: [Mutant; 7] = [
        Mutant::TrustLateWin,
        Mutant::NoSettle,
        Mutant::UncappedRetryAfter,
        Mutant::BlindEpochRelease,
        Mutant::IgnoreStrays,
        Mutant::NonceOnly,
        Mutant::NoProtocolCheck,
    ];
}

thread_local! {
    static ACTIVE: Cell<Option<Mutant>> = const { Cell::new(None) };
}

/// Makes `mutant` the variant this thread's machines run (`None`: the
/// product as it is).
pub fn set(mutant: Option<Mutant>) {
    ACTIVE.with(|a| a.set(mutant));
}

/// Whether `mutant` is the variant this thread runs.
pub fn active(mutant: Mutant) -> bool {
    ACTIVE.with(|a| a.get() == Some(mutant))
}
