//! Running machines: a runtime-agnostic async driver over two small traits.
//!
//! An adapter supplies a [`Store`] (perform a [`StoreOp`]) and a [`Clock`]
//! (read the time, sleep until an instant) and nothing more; [`drive`] runs
//! any [`Machine`] against them. For HTTP stores, [`HttpStore`] combines a
//! [`Dialect`], an optional [`Signer`] and an [`HttpTransport`], so a new
//! transport is a few dozen lines. No executor, no spawning: the driver is a
//! plain future that polls store calls, a timer and an optional stop signal.

use crate::http::{Dialect, Signer};
use crate::machine::{Event, Machine, Output};
use crate::store::{ReplyKind, StoreOp, StoreReply, TransportErrorKind};
use crate::time::{Mono, Now};
use core::fmt;
use core::future::{poll_fn, Future};
use core::pin::pin;
use core::task::Poll;
use std::time::Duration;

/// Performs store calls. Must not retry on its own: every retry decision is
/// the machine's.
pub trait Store {
    /// Performs `op` and classifies the answer.
    fn call(&self, op: StoreOp) -> impl Future<Output = StoreReply>;

    /// The shortest time the store allows between writes to one object
    /// (GCS: one second): leases on it space their writes so. Zero when
    /// it sets no such limit.
    fn min_write_interval(&self) -> Duration {
        Duration::ZERO
    }
}

impl<S: Store + ?Sized> Store for &S {
    fn call(&self, op: StoreOp) -> impl Future<Output = StoreReply> {
        (**self).call(op)
    }

    fn min_write_interval(&self) -> Duration {
        (**self).min_write_interval()
    }
}

/// The adapter's clocks.
pub trait Clock {
    /// Current local monotonic and wall-clock time.
    fn now(&self) -> Now;
    /// Completes once local monotonic time reaches `at`.
    fn sleep_until(&self, at: Mono) -> impl Future<Output = ()>;
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now(&self) -> Now {
        (**self).now()
    }
    fn sleep_until(&self, at: Mono) -> impl Future<Output = ()> {
        (**self).sleep_until(at)
    }
}

/// Deadlines this far out mean "no timer" (a finished machine waits forever).
const NO_TIMER: Mono = Mono(u64::MAX / 2);

/// Runs `machine` to completion, passing each event to `on_event`.
pub async fn drive<M: Machine>(
    machine: &mut M,
    store: &impl Store,
    clock: &impl Clock,
    on_event: impl FnMut(Event),
) -> M::Outcome {
    drive_until(machine, store, clock, on_event, core::future::pending()).await
}

/// Like [`drive`], but calls [`Machine::stop`] once `stop` completes (an
/// elector then resigns) and keeps driving until the machine finishes.
pub async fn drive_until<M: Machine>(
    machine: &mut M,
    store: &impl Store,
    clock: &impl Clock,
    mut on_event: impl FnMut(Event),
    stop: impl Future<Output = ()>,
) -> M::Outcome {
    let mut stop = pin!(stop);
    let mut stopped = false;
    // The store calls under way, by the ids the machine gave them. Their
    // type is the store's own future (not a boxed `dyn Future`), so the
    // driver is `Send` whenever the store's calls, the clock's sleeps, the
    // machine and the callbacks are.
    let mut in_flight = Vec::new();
    loop {
        let wake_at = match machine.poll(clock.now()) {
            Output::Call(id, op) => {
                in_flight.push((id, Box::pin(store.call(op))));
                continue;
            }
            Output::Event(e) => {
                on_event(e);
                continue;
            }
            Output::Done(outcome) => return outcome,
            Output::Wait(at) => at,
        };
        enum Woke {
            Reply(usize, StoreReply),
            Stop,
            Timer,
        }
        let mut sleep = (wake_at < NO_TIMER).then(|| Box::pin(clock.sleep_until(wake_at)));
        let woke = poll_fn(|cx| {
            if !stopped && stop.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Woke::Stop);
            }
            for (i, (_, call)) in in_flight.iter_mut().enumerate() {
                if let Poll::Ready(reply) = call.as_mut().poll(cx) {
                    return Poll::Ready(Woke::Reply(i, reply));
                }
            }
            match sleep.as_mut().map(|s| s.as_mut().poll(cx)) {
                Some(Poll::Ready(())) => Poll::Ready(Woke::Timer),
                _ => Poll::Pending,
            }
        })
        .await;
        match woke {
            Woke::Reply(i, reply) => {
                let (id, _) = in_flight.swap_remove(i);
                machine.handle_reply(clock.now(), id, reply);
            }
            Woke::Stop => {
                stopped = true;
                machine.stop(clock.now());
            }
            Woke::Timer => {}
        }
    }
}

/// A transport failure: no HTTP response was received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransportError {
    /// What went wrong.
    pub kind: TransportErrorKind,
    /// Details for humans (must not contain credentials).
    pub message: String,
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.kind, self.message)
    }
}

impl std::error::Error for TransportError {}

/// Sends one HTTP request and returns the response, with no retries and
/// with a timeout of its own.
pub trait HttpTransport {
    /// Sends `request`.
    fn send(
        &self,
        request: http::Request<Vec<u8>>,
    ) -> impl Future<Output = Result<http::Response<Vec<u8>>, TransportError>>;
}

/// A [`Store`] over HTTP: render with a dialect, sign, send, classify.
pub struct HttpStore<D, T, C> {
    dialect: D,
    transport: T,
    clock: C,
    signer: Option<Box<dyn Signer + Send + Sync>>,
}

impl<D, T, C> fmt::Debug for HttpStore<D, T, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpStore")
            .field("signed", &self.signer.is_some())
            .finish_non_exhaustive()
    }
}

impl<D: Dialect, T: HttpTransport, C: Clock> HttpStore<D, T, C> {
    /// An unsigned store; `clock` supplies the signing time once a signer
    /// is added.
    pub fn new(dialect: D, transport: T, clock: C) -> Self {
        HttpStore {
            dialect,
            transport,
            clock,
            signer: None,
        }
    }

    /// Signs every request with `signer`.
    pub fn with_signer(mut self, signer: impl Signer + Send + Sync + 'static) -> Self {
        self.signer = Some(Box::new(signer));
        self
    }

    /// The request that `op` becomes, signed when a signer is set (for
    /// logs, demos and tests; [`Store::call`] sends exactly this).
    pub fn request(&self, op: &StoreOp) -> Result<http::Request<Vec<u8>>, ReplyKind> {
        let mut request = self.dialect.render(op).map_err(|e| ReplyKind::Invalid {
            reason: e.to_string(),
        })?;
        if let Some(signer) = &self.signer {
            signer
                .sign(&mut request, self.clock.now().wall)
                .map_err(|e| ReplyKind::Invalid {
                    reason: e.to_string(),
                })?;
        }
        Ok(request)
    }

    /// The dialect.
    pub fn dialect(&self) -> &D {
        &self.dialect
    }
}

impl<D: Dialect, T: HttpTransport, C: Clock> Store for HttpStore<D, T, C> {
    fn min_write_interval(&self) -> Duration {
        self.dialect.min_write_interval()
    }

    async fn call(&self, op: StoreOp) -> StoreReply {
        let request = match self.request(&op) {
            Ok(r) => r,
            Err(kind) => return StoreReply::new(kind),
        };
        match self.transport.send(request).await {
            Ok(response) => self.dialect.parse(&op, &response),
            Err(e) => StoreReply::transport(e.kind, e.message),
        }
    }
}
