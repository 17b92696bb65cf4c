//! The sans-IO protocol machines: each computes the store calls an operation
//! needs and interprets their replies, and never performs I/O or reads a
//! clock. Drive one with [`crate::client::drive`], or by hand through the
//! [`Machine`] trait.
//!
//! - [the machine interface](#the-machine-interface), and [what
//!   operations take and give](#leases-outcomes-errors-and-events)
//!   (leases, outcomes, errors, events);
//! - [one-shot operations](#one-shot-operations) ([`LeaseOp`]) on any of
//!   the three protocols, [the CAS lease](#the-cas-lease), [epoch
//!   objects](#epoch-objects) and [the create-delete
//!   mutex](#the-create-delete-mutex), whose decisions the lease engine
//!   runs (records stamped, writes tracked, wins given back);
//! - [leader election](#leader-election) ([`Elector`]): campaigning and
//!   holding, built on one-shot operations;
//! - [fenced writes](#fenced-writes) ([`FenceOp`]): writes to a protected
//!   object, fenced by the token;
//! - [the capability probe](#the-capability-probe) ([`Probe`]): whether a
//!   store enforces the conditions a protocol needs; [its shared
//!   verdict](#the-shared-verdict) ([`SharedProbe`]), kept in the bucket
//!   for the whole fleet; [the bucket's races](#the-buckets-races)
//!   ([`BucketProbe`]);
//! - [the fleet view](#the-fleet-view) ([`Listing`]): every lease under a
//!   prefix; [leaderless time](#leaderless-time) ([`Watch`]) measured from
//!   listings;
//! - [trying again](#trying-again) ([`next_try`]): when a contender that
//!   found the lease busy tries again, and how long a released lease stays
//!   busy to its releaser under fair waiting.
//!
//! Every machine makes its store calls through one call discipline
//! (private module `calls`: ids, reply timeout, the operation's deadline,
//! retries and backoff, store write spacing, settle-by-read), and every
//! protocol judges time the same way (private module `validity`):
//! a write stamps an expiry on the store's clock and is trusted locally
//! until a deadline short of it (`docs/protocols.md`).
//!
//! # The machine interface
//!
//! The shape every protocol machine shares (what they report is in
//! [what operations take and give](#leases-outcomes-errors-and-events)).
//!
//! A machine is driven by three calls, in the manner of quinn-proto and
//! str0m: [`poll`](Machine::poll) (what next?), [`handle_reply`](Machine::handle_reply)
//! (a store call finished) and [`stop`](Machine::stop) (the caller wants out).
//! Time is an argument of each. After every input the driver polls until it
//! gets [`Output::Wait`] or [`Output::Done`]; calling `poll` early or often is
//! harmless. A machine never blocks, reads a clock, draws randomness or does
//! I/O, so the same inputs always give the same outputs.
//!
//! # Leases, outcomes, errors and events
//!
//! What the protocols take and answer: a held [`Lease`] and the [`Claim`]
//! of a record of ours that may be live, each operation's outcome
//! ([`AcquireOutcome`], [`Busy`], [`RenewOutcome`], [`ReleaseOutcome`],
//! [`BreakOutcome`], an [`Observation`] of the key), why a lease was lost
//! ([`LostReason`]), the one error type ([`LeaseError`]) and an elector's
//! [`Event`]s. The machines that produce them are in [the machine interface](#the-machine-interface).
//!
//! # One-shot operations
//!
//! One-shot lease operations: acquire, renew, release, inspect, break.
//!
//! [`LeaseOp`] runs the protocol the configuration names: the
//! [CAS lease](#the-cas-lease), [epoch objects](#epoch-objects) or the
//! [create/delete mutex](#the-create-delete-mutex), each a set of decisions the shared
//! call engine runs (ids, timeouts, backoff, write spacing, settle-by-read).
//!
//! # The CAS lease
//!
//! The CAS lease, the default protocol: one object updated with `If-Match`.
//! [`LeaseOp`] runs it when the configuration names
//! [`Protocol::Cas`](crate::config::Protocol::Cas). Its branches:
//!
//! - **acquire**: GET; missing → PUT `If-None-Match: *`; held and live →
//!   [`Busy`] with no PUT spent; released or expired →
//!   PUT `If-Match` with `token + 1`, a new session and nonce.
//! - **ambiguous writes** (412 after a retried request, 409, 5xx, a lost or
//!   timed-out reply): re-read. Our nonce in the record means our write
//!   landed; the same etag as before means it did not and may be retried;
//!   anything else means someone else won.
//! - **throttling** (429/503): bounded exponential backoff with jitter,
//!   honouring `Retry-After`.
//! - **renew**: PUT `If-Match` our etag; lost unless confirmed before the
//!   local deadline, which is a timer and fires even when no reply comes.
//! - **release**: PUT `If-Match` with `released = true` and the same token
//!   (never DELETE: that would reset the fencing token).
//! - **break**: an operator's release on the etag they saw, keeping the token.
//! - **protocols**: a record of another protocol at the key (an epochs
//!   client's marker, a mutex lock) is refused with `ProtocolMismatch`,
//!   found by the GET or by the read after a refused create; no request is
//!   spent on the check itself (`docs/design.md` §7).
//!
//! Every retry is decided here, bounded by `max_attempts`, and visible to
//! the caller as store calls. The decisions live in `CasSteps`; the call
//! engine shared with the other protocols (ids, timeouts, backoff, the
//! deadline timer, stamping each write) runs them.
//!
//! # Epoch objects
//!
//! The epoch-objects protocol (`docs/design.md` §7), for stores that can create an
//! object only if it is absent but cannot compare an etag on PUT.
//!
//! Each leadership epoch is its own object, `<key>/<epoch:020>.json`,
//! written once with `If-None-Match: *`, so two contenders for the same
//! epoch cannot both win. The newest epoch is the one that counts; it is
//! found by listing `<key>/` (zero-padded names sort numerically) and read
//! for its expiry. The epoch number is the fencing token.
//!
//! - **acquire**: LIST (every page) + GET newest; released or expired by the
//!   store's clock → create epoch `n + 1`. No epoch yet → create epoch 1.
//!   Live → [`Busy`]. A create refused or unanswered is settled by
//!   reading its epoch; another's record there decides nothing unless it
//!   is the newest listed (it may be a late create below the live epoch):
//!   the acquire lists again. Once created, LIST again: the new epoch
//!   counts only if it is the newest (see below). Then older epochs are
//!   deleted but the one right below it (at most 4 per operation, one try
//!   each, failures ignored; normally there are one or two). An acquire that ends in an
//!   error before that LIST confirmed its create gives it back as a
//!   released epoch `n + 2`, never by deleting it (see
//!   `gives_back_creates_by_delete`).
//! - **renew**: create epoch `n + 1` for the same session, LIST to confirm
//!   it is the newest, delete epoch `n - 1` (epoch `n` stays, below the
//!   newest). Only create-if-absent is atomic on
//!   these stores, so a renewal is a new epoch: the token grows with every
//!   renewal. A contender that created `n + 1` first wins and the renewal
//!   reports the lease lost.
//!
//! **Why the second LIST.** Cleanup deletes old epochs, so create-if-absent
//! alone cannot tell "epoch 5 was never created" from "epoch 5 was created
//! and deleted after epoch 9 existed". A node that read epoch 4 long ago
//! (a pause, a slow network) could create epoch 5 while epoch 9 is live.
//! The newest epoch is never deleted, so the largest listed number only
//! grows; a create that is the newest in a listing made after it cannot
//! have skipped a live epoch. The simulator found the double holder this
//! prevents.
//! - **release**: create epoch `n + 1` as a released record of our
//!   session (`If-None-Match: *`). It is conditional by nature: if a
//!   contender took over after our lease expired, epoch `n + 1` is theirs,
//!   the create fails and the release reports
//!   [`AlreadyLost`](crate::ReleaseOutcome::AlreadyLost). And it closes the slot a late
//!   renewal of ours would fill: a renewal create of `n + 1` still in the
//!   network when we release can no longer land. If `n + 1` turns out to
//!   be a renewal of ours that landed unseen, the release moves on to
//!   `n + 2`. Like an acquisition, the release counts only once a LIST
//!   made after it shows its epoch as the newest: a create that filled the
//!   slot of an epoch deleted by cleanup (a late delivery) lies below the
//!   live epoch and changed nothing; it is deleted and the newest decides.
//!   Cleanup keeps the epoch right below the newest, so the slot `n + 1`
//!   stays filled while `n + 2` is the newest: an operator's break
//!   (`n + 1`) and a takeover (`n + 2`) refuse the release's create, which
//!   says `AlreadyLost`; a release that lands at `n + 1` below a newest
//!   `n + 2` was the newest when it landed (the next holder came in
//!   through it): `Released`. Landed further below, it cannot tell whether
//!   it filled a slot cleanup had emptied: `ReleaseUnknown`.
//! - **protocols**: the listing is of every key starting with `<key>`, so
//!   an object at `<key>` itself shows up in it. Our marker
//!   ([`EPOCHS_MARKER`](crate::record::EPOCHS_MARKER), known by its size)
//!   is expected there; anything else is a lease object of the cas or
//!   mutex protocol, read once to name it, and the acquire refuses with
//!   [`LeaseError::ProtocolMismatch`]. An acquisition that finds no marker
//!   creates it (`If-None-Match: *`) before it counts: that create, or
//!   the cas or mutex client's at the same key, is refused, so one
//!   protocol gets the key, and the others find it in the GET they make
//!   anyway (`docs/design.md` §7). A refused or unanswered create of the
//!   marker is settled by reading the key. The listing after a create
//!   checks the same.
//! - **break**: create epoch `n + 1` as a released record, if epoch `n` is
//!   still the version the operator saw; confirmed by a LIST as the
//!   release is, so an operator is never told `BreakOutcome` for a record below
//!   the live epoch.
//!
//! Ambiguous writes are settled as in the CAS lease: by reading the epoch
//! object back and looking for our nonce. Deleting every epoch object resets
//! the token to 1, like deleting the CAS lease object.
//!
//! # The create-delete mutex
//!
//! The create/delete mutex (`docs/design.md` §7): the lock exists while someone
//! holds it.
//!
//! - **acquire**: GET. Missing → PUT `If-None-Match: *`. Held and younger
//!   than its ttl (by the store's clock) → [`Busy`].
//!   Stale → `DELETE If-Match: <etag seen>`, then create. The conditional
//!   delete is what makes breaking safe: of two contenders breaking the same
//!   stale lock, one deletes it and the other's delete fails, and neither
//!   can delete the lock the winner then creates.
//! - **release**: `DELETE If-Match: <our etag>`: a lock someone broke and
//!   took is left alone.
//! - **renew**: impossible. A holder has one ttl from its create, after
//!   which others may break the lock; an [`Elector`]
//!   gives it back when its time is up and campaigns again.
//!
//! **No fencing token.** Nothing survives a release, so the next holder
//! cannot continue a counter. The token written is the store's time at the
//! acquisition in milliseconds of its `Date` (whole seconds), or one more
//! than a broken predecessor's: it grows across acquisitions in different
//! seconds, but two in the same second can share it. Use the CAS lease or
//! epochs when a protected resource must check tokens.
//!
//! **Late creates.** A create whose reply never came may still land after
//! the holder released (it was held in the network, or the store applied
//! it late), and would leave a lock nobody holds. Its record expires at
//! the stamp it was sent with, at most one ttl after it was sent; so a
//! release of a lease whose acquisition left such a create behind
//! ([`Lease::strays_until`](crate::protocol::outcome::Lease::strays_until)) deletes
//! the lock, waits until that create could no longer be live, reads the
//! key once more and deletes a record of its session found there, and only
//! then reports [`Released`](crate::ReleaseOutcome::Released). A release made from
//! another process (the `lease` CLI's `release --etag`, resumed with
//! [`Lease::resume`](crate::protocol::outcome::Lease::resume)) cannot know of those
//! creates, so the acquisition says so in the lock itself: the winning
//! create carries `strays: true` when an earlier one went unanswered (and
//! is rewritten so marked, one more PUT, when a later one is), and the
//! resumed lease waits until that record's expiry has passed (the strays
//! were sent before it, so they stamped no later expiry). The trade-off: such a release takes
//! up to a ttl (the lock is free meanwhile, unless the late create lands);
//! a release with no ambiguous create behind it costs one DELETE as
//! before.
//!
//! **Protocols.** A record of another protocol at the key (a cas lease, or
//! the marker an epochs client keeps there) is refused with
//! [`LeaseError::ProtocolMismatch`]: the acquire's GET finds it, or its
//! create is refused and the read that follows does. No request is spent
//! on the check itself (`docs/design.md` §7).
//!
//! Needs: create-if-absent and a `DELETE If-Match` the store honours (the
//! capability probe checks both).
//!
//! # Leader election
//!
//! Leader election: a long-lived machine that campaigns, renews, observes
//! and resigns, reporting [`Event`]s.
//!
//! The [`Elector`] runs one [`LeaseOp`] at a time: acquire while
//! campaigning (every `poll_every` while someone else leads), renew every
//! `renew_every` while leading, release when asked to stop. Its local
//! deadline is a timer: [`Event::Lost`] is emitted when it passes without a
//! confirmed renewal, whether or not any reply ever arrives. A [`Holder`]
//! keeps an already acquired lease alive and finishes when it is lost (the
//! singleton pattern), instead of campaigning again.
//!
//! ## The order of events
//!
//! - Becoming leader: [`Event::Acquired`], then
//!   [`Event::LeaderChanged`]`(Some(us))`. Work may start at `Acquired`.
//! - While leading: [`Event::Renewed`] after each confirmed renewal;
//!   [`Event::AtRisk`] once when a renewal is still unconfirmed
//!   `renew_every` before the deadline.
//! - Losing: [`Event::Lost`] (at the deadline at the latest), then
//!   [`Event::LeaderChanged`]`(None)`: nobody is known to lead. Work must
//!   stop at `Lost`.
//! - Resigning: [`Event::Released`], then `LeaderChanged(None)`.
//! - Handing over ([`Machine::hand_over`]):
//!   `Renewed` (the announcement), more `Renewed`s, then
//!   [`Event::HandingOver`] (no longer leading), then `Released`.
//! - Another node leads: `LeaderChanged(Some(them))` when a campaign read
//!   sees them (on its next poll, not at the instant they acquired).
//! - [`Event::Error`]: an attempt failed and the campaign retries. An error
//!   no retry can fix (no bucket, unusable settings, a store that cannot
//!   host leases, or credentials denied before this elector ever held the
//!   lease) ends the elector with [`ElectorExit::Failed`] instead.
//!
//! `Lost` and `Released` always come before the `LeaderChanged` that
//! follows from them, and a node never sees `Acquired` while it believes
//! another's lease is live.
//!
//! With a protocol that cannot renew (the [mutex](#the-create-delete-mutex)), a term
//! lasts one ttl: at the local deadline the elector reports
//! [`Event::Lost`], gives the lock back, and campaigns again after one
//! `poll_every`.
//!
//! # Fenced writes
//!
//! Fenced writes: a holder's write to a protected object that a stale
//! holder cannot make (`docs/design.md` §5).
//!
//! S3 cannot compare a token inside a PUT, but compare-and-swap can: the
//! protected object carries the token of the last holder that wrote it, on
//! the first line of its body (`{"fence_token":N,"nonce":"…"}`, then the
//! payload). [`FenceOp`] reads it, refuses if the stored token is greater
//! than ours, and writes with `If-Match` on the etag it read (or
//! `If-None-Match: *` when the object does not exist yet). A stale holder's
//! write therefore fails on the token check or on the precondition; a
//! precondition failure re-reads and decides again. Ambiguous outcomes are
//! resolved by the nonce, as for leases.
//!
//! [`FenceOp::append`] makes the protected object a journal instead: each
//! write appends one line, `<nonce> <line>`, to the payload it read, under
//! the same token rule. The nonce at the head of every line lets a retried
//! append recognise its own line even after other holders appended behind
//! it, so a line is never appended twice and a landed append is never
//! reported refused. [`Fenced::entries`] reads the lines back.
//!
//! # The capability probe
//!
//! The capability probe (`docs/design.md` §8): does this store really enforce the
//! conditions the protocols rely on?
//!
//! [`Probe`] runs every [`Check`] on a scratch key next to the lease key
//! (`<key>.probe/<random id>`), deletes what it created, and reports a
//! [`ProbeReport`]: one row per check with what the store answered. A store
//! that silently ignores `If-None-Match` or `If-Match` would hand the lease
//! to two holders; [`ProbeReport::supports`] turns a failed safety-critical
//! check into [`LeaseError::UnsafeStore`] naming it, and [`Checked`] runs a
//! lease operation only after the probe passed for its protocol.
//!
//! The calls, in order (K the scratch key, L = `K.listed` a second scratch
//! key, M = `K.missing` a key that never exists):
//!
//! | # | call | passes when |
//! |---|---|---|
//! | 1 | PUT K `If-None-Match: *` | written (and an etag comes back) |
//! | 2 | PUT K `If-None-Match: *` again | refused (412, or 409 the dialect maps to it) |
//! | 3 | PUT K `If-Match: <etag 1>` | written |
//! | 4 | PUT K `If-Match: <etag 1>` again (now stale) | refused |
//! | 5 | PUT M `If-Match: <etag 1>` | refused (412 or 404) |
//! | 6 | GET M | missing: the refused write created nothing |
//! | 7 | PUT L `If-None-Match: *` | (sets up the listing checks) |
//! | 8 | LIST prefix K, one key per page (`max-keys` 1), sent as 7's reply arrives | K on page 1, with a continuation token |
//! | 9 | LIST page 2 (the token from 8) | L, and the listing ends |
//! | 10 | DELETE K `If-Match: <stale etag>` | refused |
//! | 11 | DELETE K `If-Match: <current etag>` | deleted |
//! | 12 | DELETE L | (cleanup) |
//!
//! **The listing checks.** Epochs finds the newest epoch, and counts a create
//! of its own, only by a LIST made after the create; cas and mutex check
//! after each win, by a LIST of `<key>/`, that no epochs client uses the key.
//! Both are sound only if a listing made after a write's reply arrived shows
//! that write ([`Check::ListAfterWrite`]: 8 and 9, read back to back as the
//! protocols read their pages, right after 7) and if a listing that spans
//! pages is read correctly by following its continuation tokens
//! ([`Check::ListPages`]: two keys, one per page). A store that ignores
//! `max-keys` answers both keys on one page; paging is then not exercised
//! and the check passes, saying so. A listing that goes on past
//! [`MAX_LIST_PAGES`] pages, or hands out the same token twice, fails it.
//! Listing after a delete is not checked: a deleted key that a lagging
//! listing still shows is harmless to the protocols (epochs only ever deletes
//! epochs below the newest, so such a ghost is an older epoch; its read
//! answers missing and the listing is made again; a ghost epoch makes cas and
//! mutex refuse the key, the safe side). One probe is evidence, not proof: a
//! store whose listings lag only sometimes may pass it.
//!
//! Then, if K, L or M still exist, unconditional DELETEs. A probe that ends
//! in an error (out of retries or time, access denied) deletes them too,
//! and every key a write was sent to (a lost reply may hide a create):
//! the checks stop `3 × request_timeout` (at most half of `op_timeout`)
//! before the probe's deadline to leave that time, each DELETE is made
//! once, and a `GaveUp` names the keys that may remain. Every reply's `Date`
//! header is noted (without one the protocols fall back on the local clock
//! and `max_skew`). Throttling and 5xx are retried with backoff like any
//! operation; 401/403 and a missing bucket end the probe with that error.
//! The check is about the store's semantics, so it runs with the etag
//! quoting the dialect is configured with; run it once per quoting to learn
//! which forms the store accepts.
//!
//! # The shared verdict
//!
//! The capability probe's verdict, shared by every client of a key: a
//! fleet probes once, not once per process or per cold start
//! (`docs/protocols.md`, "The shared verdict").
//!
//! The probe ([`protocol::probe`](#the-capability-probe)) costs about twelve requests. A
//! client that probed keeps the verdict in memory, but a fleet of short
//! processes (`lease run` from cron, Lambda cold starts, Worker isolates)
//! would probe on every start, and on a slow or throttled store the probes
//! crowd out the leases they guard. So the verdict is kept in the bucket,
//! next to the lease, at [`verdict_key`] (`<key>.probe/verdict.json`),
//! where the probe's scratch objects already live (no new permission),
//! and [`SharedProbe`] reads it before it would probe:
//!
//! ```json
//! {"lease_probe":1,"version":"0.1.0","state":"passed","at_ms":1795000000000,
//!  "safe":["cas","epochs","mutex"],"refused":[]}
//! ```
//!
//! | the record says | the client |
//! |---|---|
//! | `passed`, this library version, younger than [`VERDICT_TRUSTED_FOR`] by the store's clock, the protocol safe | trusts it: one GET, no probe |
//! | `passed`, the protocol refused, younger than [`REFUSAL_TRUSTED_FOR`] | ends with [`LeaseError::UnsafeStore`] and the recorded detail |
//! | `probing` until a time not passed | waits, reading it again every [`VERDICT_POLL`] |
//! | `unfinished`, `retry_at_ms` not passed | waits for it when its time allows, else ends with [`LeaseError::GaveUp`] saying when the next probe is due |
//! | nothing, or anything else (older, another version, another format, a due retry) | claims the probe, probes, writes the verdict |
//!
//! - **One prober at a time.** The claim is a conditional write of a
//!   `probing` record (`If-Match` on the version read, `If-None-Match: *`
//!   when there was none) good for [`PROBE_BUDGET`] and [`PROBE_CLAIM_MARGIN`];
//!   a client whose claim is refused reads again and finds the winner's.
//!   A fleet that starts at once on an empty bucket probes once.
//! - **The probe's own budget** ([`probe_config`]): at least
//!   [`PROBE_BUDGET`] and [`PROBE_ATTEMPTS`] retries, not the lease's
//!   `op_timeout` (often its ttl, a few seconds).
//! - **A finished probe** writes `passed` with the protocols it found
//!   safe and refused, dated by the store's clock at the read before the
//!   claim (so the verdict ages from before it was earned).
//! - **A probe that could not finish** (out of time or retries: the store
//!   is slow, throttling or failing) writes `unfinished` with a
//!   `retry_at_ms` [`probe_backoff`] later, doubling with each failure in a row:
//!   the fleet does not probe again before it, however often its processes
//!   restart. Written only over our own claim (`If-Match`).
//!
//! Every time is the store's (`Date` of the reply read; the local clock
//! without one). Trust: anyone who can write the verdict can write the
//! lease itself; the verdict adds no new way to break a lease. The verdict
//! is evidence that the store behaved at one time; a store that changes
//! its behaviour within [`VERDICT_TRUSTED_FOR`] goes unnoticed until its replies
//! say so, as with any cached probe.
//!
//! # The bucket's races
//!
//! What the bucket does around the protocol (`lease probe`, beside the
//! capability checks of [`protocol::probe`](#the-capability-probe)):
//!
//! | # | calls | what it tells |
//! |---|---|---|
//! | 1 | PUT `K.plain` with no condition | whether the bucket refuses an unconditional write to the lease prefix (a bucket policy can require `If-None-Match` / `If-Match`: `lease policy`); a misconfigured client could otherwise overwrite a lease |
//! | 2 | [`BUCKET_RACERS`] PUTs `K.race<r>` `If-None-Match: *`, all sent at once | exactly one is written and the others refused: conditional creates hold under concurrency, not only one after another |
//! | 3 | [`BUCKET_RACERS`] PUTs `K.race<r>` `If-Match: <the winner's etag>`, all sent at once | exactly one is written: conditional replaces hold under concurrency |
//! | 4 | DELETEs of what 1 to 3 wrote (`If-Match` on the etag written last) | cleanup |
//!
//! Rows 2 and 3 are one round; [`BUCKET_ROUNDS`] rounds by default, each on a key
//! of its own (`lease probe --concurrency N --rounds R` sets both,
//! [`BucketProbe::with_race`]). One round can pass by luck on a store that
//! checks a condition and writes in two steps (the April 2026 multi-provider
//! tests found such stores among hosted providers and S3-compatible
//! servers): the rounds make a lucky pass unlikely, and a single round
//! with two winners refuses the store.
//!
//! (K is `<key>.probe/<random id>`.) Every write's reply also tells whether
//! the bucket keeps versions: a version id on it (S3's
//! `x-amz-version-id`, Azure's `x-ms-version-id`) means each renewal leaves
//! a noncurrent version behind ([`StoreReply::version_id`](crate::store::StoreReply::version_id)).
//!
//! Each call is made once, with the lease's request timeout: a call with
//! no clear answer (a timeout, a 5xx, throttling) makes its row unclear
//! rather than failed, and a create with no answer may still land after
//! the cleanup: its key is then listed as possibly left behind. A store
//! that answers writes without version ids may still keep versions (GCS
//! always answers with a generation): `versioned` then says `false` and
//! the caller knows better. A denial of the race's creates or of the reads is
//! an error like any.
//!
//! # The fleet view
//!
//! The fleet view (`lease ls PREFIX`): every lease under a prefix, read
//! from the store, whatever protocol or client wrote it.
//!
//! [`Listing`] lists the prefix (every page), then reads each lease once:
//!
//! - an object `<key>/<20 digits>.json` is an epoch of the epochs lease at
//!   `<key>`: the newest one is read, and the marker at `<key>` is not
//!   listed apart;
//! - any other object is read, and listed when it decodes as a lease
//!   record: ours (cas, mutex, an epochs marker with no epochs yet), a
//!   simple client's `{"expires_at": …}` ([`LeaseRecord::is_foreign`](crate::record::LeaseRecord::is_foreign)), or
//!   another tool's lock ([`LeaseRecord::foreign`](crate::record::LeaseRecord::foreign): Litestream's
//!   `lock.json`, Terraform's and OpenTofu's `.tflock`);
//! - a mutex lock given back is not listed: the mutex deletes its object;
//! - an object that is not a lease record is counted in
//!   [`ListReport::others`], and the capability probe's scratch objects
//!   (`….probe/…`) are skipped.
//!
//! Reads only: nothing is written. Each call has the lease's timeouts and
//! retry budget (a throttled or failed call is retried with backoff); each
//! page and each read is an operation of its own for the deadline, so a
//! prefix with many leases is not cut short. An epoch read after the
//! listing may be gone (a renewal made the next one and deleted it): the
//! lease's epochs are listed again and the newest read, up to
//! [`EPOCH_LIST_TRIES`] times. Any other object deleted between the listing and
//! its read is left out, and one that cannot be read (403, a key the
//! dialect refuses) is counted in [`ListReport::others`]. A listing longer
//! than [`LISTING_MAX_PAGES`] pages, or one that hands out a continuation token
//! twice, ends in an error.
//!
//! # Trying again
//!
//! When a contender that found the lease busy tries again
//! ([`Leases::acquire_within`](crate::client::Leases::acquire_within), the
//! CLI's `--wait`).
//!
//! A waiter cannot know when the holder will give the lease back early, so
//! it re-reads; how often decides both how soon a free lease is taken and
//! what waiting costs (a GET each time, and, on a store that serialises
//! requests to a key, time taken from everyone else's requests). The rule:
//!
//! - the first retry comes after about [`FIRST_RETRY`] (equal jitter: between
//!   half of it and all of it), each later one after twice the last, up to
//!   the lease's `poll_every` (ttl / 3 by default): many contenders spread
//!   out instead of polling in step, and a long wait costs a few reads per
//!   ttl;
//! - never later than the holder's published expiry (by the store's clock
//!   at the read, plus the store date's resolution and a jitter of up to
//!   [`FIRST_RETRY`]): a lease that lapses is taken within about a date
//!   resolution of its expiry, whatever the backoff has grown to;
//! - under fair waiting ([`LeaseConfig::fair`](crate::config::LeaseConfig::fair)) the cap is [`FAIR_POLL`],
//!   and a holder that gave the lease back finds it busy for
//!   [`COURTESY`], so the waiters, not the releaser coming straight back,
//!   take it: which waiter is a draw, so none is kept out for long;
//! - never sooner than the store's write spacing (`min_write_interval`, one
//!   second on GCS): the retry may write.
//!
//! Pure: the caller supplies the attempt number, what the busy read said
//! and a source of randomness, so the simulation replays it.
//!
//! # Leaderless time
//!
//! Leaderless time, measured from the outside (`lease ls --watch`): an
//! observer lists a prefix again and again ([`protocol::list`](#the-fleet-view)) and
//! feeds each [`ListReport`] to a [`Watch`], which tells when each key
//! lost its holder, when it got one again, and for how long it had none.
//!
//! A key is **held** when a listing shows it live (not released, not
//! expired by the store's clock at the read, [`Listed::free`]); it is
//! **leaderless** from the first listing that shows it free or gone until
//! the first that shows it held again. The time is the observer's own
//! (each listing's local time), so a gap shorter than the interval between
//! listings may go unseen, and a measured gap is at most one interval
//! longer or shorter than the true one: list more often for finer figures.
//! A key is watched from the first listing that shows it.

pub(crate) mod bucket;
mod calls;
pub(crate) mod cas;
pub(crate) mod elector;
mod engine;
pub(crate) mod epochs;
pub(crate) mod fence;
pub(crate) mod lease;
pub(crate) mod list;
pub(crate) mod machine;
pub(crate) mod mutex;
pub(crate) mod outcome;
pub(crate) mod probe;
pub(crate) mod validity;
pub(crate) mod verdict;
pub(crate) mod wait;
pub(crate) mod watch;

pub use bucket::{
    BucketProbe, BucketReport, Race, RaceKind, RaceRound, Unconditional, BUCKET_RACERS,
    BUCKET_ROUNDS,
};
pub use elector::{Elector, ElectorExit, HoldLimit, Holder, HolderExit};
pub use fence::{FenceOp, FenceOutcome, Fenced};
pub use lease::{Acquire, Break, Inspect, LeaseOp, Release, Renew};
pub use list::{ListReport, Listed, Listing, SessionSeen, EPOCH_LIST_TRIES, LISTING_MAX_PAGES};
pub use machine::{CallId, Machine, Output};
pub use outcome::{
    status_json, summarize, AcquireOutcome, BreakOutcome, BreakRequest, Busy, Claim, Event, Leader,
    Lease, LeaseError, LostReason, NotHeld, Observation, ReleaseOutcome, RenewOutcome,
};
pub use probe::{Check, CheckResult, Checked, Probe, ProbeReport, MAX_LIST_PAGES};
pub use verdict::{
    judge, most_check_time, probe_backoff, probe_config, probe_time, verdict_key, OneCall,
    ReadOnlyReport, Reading, Refusal, Shared, SharedProbe, Verdict, CONCURRENT_WRITES,
    MAX_PROBE_TIME, PROBE_ATTEMPTS, PROBE_BUDGET, PROBE_CLAIM_MARGIN, PROBE_FIRST_BACKOFF,
    PROBE_MAX_BACKOFF, REFUSAL_TRUSTED_FOR, VERDICT_POLL, VERDICT_TRUSTED_FOR,
};
pub use wait::{
    next_try, COURTESY, FAIR_POLL, FIRST_RETRY, HANDOFF_GRACE, HANDOFF_POLL, HANDOFF_TO,
};
pub use watch::{KeyWatch, Watch, WatchEvent};
