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
//! call sites name what they run with them), and nothing is recorded. The
//! client runs every machine through one tap (`tap.rs`), which records it
//! when a recorder is set and is the machine itself without the feature:
//! the client's code has no branch for either.

#[cfg(feature = "trace")]
mod json;
#[cfg(feature = "trace")]
mod recorder;
#[cfg(feature = "trace")]
pub mod replay;
mod start;
mod tap;

#[cfg(feature = "trace")]
pub use recorder::{Recorded, Recorder};
pub use start::{Start, Traced};
pub(crate) use tap::{Tap, Taps};
