//! Where a client meets its flight recorder: the [`Taps`] every client
//! keeps, and the [`Tap`] it runs each machine through. Without the
//! `trace` feature a tap is the machine itself and the client keeps no
//! recorder; the client's code is the same either way.

#[cfg(feature = "trace")]
use super::{Recorded, Recorder};
use super::{Start, Traced};
use crate::protocol::machine::{CallId, Machine, Output};
use crate::store::StoreReply;
use crate::time::Now;

/// A client's recorder, if one is set (`Leases::record_to`, feature
/// `trace`).
#[derive(Default)]
pub(crate) struct Taps {
    #[cfg(feature = "trace")]
    recorder: std::sync::Mutex<Option<Recorder>>,
}

#[cfg(feature = "trace")]
impl Taps {
    /// Records every machine tapped from now on to `recorder`.
    pub(crate) fn set(&self, recorder: Recorder) {
        *self.lock() = Some(recorder);
    }

    /// The recorder set.
    pub(crate) fn get(&self) -> Option<Recorder> {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Recorder>> {
        self.recorder
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Taps {
    /// The machine `build` makes of `parts`, recorded as the [`Start`]
    /// `start` makes of them when a recorder is set (the parts are cloned
    /// only then).
    pub(crate) fn tap<P: Clone, M: Machine>(
        &self,
        parts: P,
        build: impl FnOnce(P) -> M,
        start: impl FnOnce(P) -> Start,
    ) -> Tap<M>
    where
        M::Outcome: Traced,
    {
        #[cfg(feature = "trace")]
        if let Some(recorder) = self.get() {
            let start = start(parts.clone());
            return Tap::Recorded(Recorded::new(build(parts), &recorder, &start));
        }
        let _ = start;
        Tap::Plain(build(parts))
    }
}

/// A machine as a client runs it: recorded, or as it is.
pub(crate) enum Tap<M> {
    /// Not recorded.
    Plain(M),
    /// Recorded to the client's recorder.
    #[cfg(feature = "trace")]
    Recorded(Recorded<M>),
}

impl<M: Machine> Tap<M> {
    /// The machine tapped.
    pub(crate) fn inner_mut(&mut self) -> &mut M {
        match self {
            Tap::Plain(m) => m,
            #[cfg(feature = "trace")]
            Tap::Recorded(r) => r.inner_mut(),
        }
    }
}

impl<M: Machine> Machine for Tap<M>
where
    M::Outcome: Traced,
{
    type Outcome = M::Outcome;

    fn poll(&mut self, now: Now) -> Output<M::Outcome> {
        match self {
            Tap::Plain(m) => m.poll(now),
            #[cfg(feature = "trace")]
            Tap::Recorded(r) => r.poll(now),
        }
    }

    fn handle_reply(&mut self, now: Now, id: CallId, reply: StoreReply) {
        match self {
            Tap::Plain(m) => m.handle_reply(now, id, reply),
            #[cfg(feature = "trace")]
            Tap::Recorded(r) => r.handle_reply(now, id, reply),
        }
    }

    fn stop(&mut self, now: Now) {
        match self {
            Tap::Plain(m) => m.stop(now),
            #[cfg(feature = "trace")]
            Tap::Recorded(r) => r.stop(now),
        }
    }

    fn hand_over(&mut self, now: Now, to: &str) {
        match self {
            Tap::Plain(m) => m.hand_over(now, to),
            #[cfg(feature = "trace")]
            Tap::Recorded(r) => r.hand_over(now, to),
        }
    }
}
