//! The store, clock and entropy handles of one simulated process.

use super::state::Shared;
use core::cell::RefCell;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use lease_core::store::TransportErrorKind;
use lease_core::{Clock, Entropy, Mono, Now, Store, StoreOp, StoreReply};
use std::fmt;
use std::time::Duration;

/// A [`Store`] for one simulated process (see the module docs).
#[derive(Clone)]
pub struct SimStore {
    pub(super) sh: Shared,
    pub(super) pid: usize,
}

impl fmt::Debug for SimStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SimStore(pid {})", self.pid)
    }
}

struct CallFuture {
    pub(super) sh: Shared,
    pub(super) pid: usize,
    pub(super) op: Option<StoreOp>,
    pub(super) call: Option<u64>,
    pub(super) deadline: Mono,
    pub(super) timer: Option<u64>,
}

impl Future for CallFuture {
    type Output = StoreReply;
    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<StoreReply> {
        let sh = self.sh.clone();
        let mut w = sh.borrow_mut();
        let pid = self.pid;
        let call = match self.call {
            Some(c) => c,
            None => {
                let op = self
                    .op
                    .take()
                    .expect("a call future is polled after it sent");
                let timeout = w.request_timeout(pid);
                self.deadline = w.proc_now(pid).mono + timeout;
                let c = w.send(pid, op);
                self.call = Some(c);
                c
            }
        };
        if let Some(reply) = w.calls.get_mut(&call).and_then(|s| s.reply.take()) {
            w.calls.remove(&call);
            return Poll::Ready(reply);
        }
        if w.proc_now(pid).mono >= self.deadline {
            w.calls.remove(&call);
            return Poll::Ready(StoreReply::transport(
                TransportErrorKind::Timeout,
                "no reply within the transport's timeout",
            ));
        }
        let rearm = match self.timer {
            None => true,
            Some(t) => w.timers.get(&t).is_none_or(|&(_, fired)| fired),
        };
        if rearm {
            if let Some(t) = self.timer {
                w.timers.remove(&t);
            }
            let deadline = self.deadline;
            self.timer = Some(w.add_timer(pid, deadline));
        }
        Poll::Pending
    }
}

impl Drop for CallFuture {
    fn drop(&mut self) {
        let mut w = self.sh.borrow_mut();
        if let Some(c) = self.call {
            w.calls.remove(&c);
        }
        if let Some(t) = self.timer {
            w.timers.remove(&t);
        }
    }
}

impl Store for SimStore {
    fn min_write_interval(&self) -> Duration {
        self.sh.borrow().cfg.spacing
    }

    fn call(&self, op: StoreOp) -> impl Future<Output = StoreReply> {
        CallFuture {
            sh: self.sh.clone(),
            pid: self.pid,
            op: Some(op),
            call: None,
            deadline: Mono(0),
            timer: None,
        }
    }
}

/// A [`Clock`] for one simulated process, on its node's clocks.
#[derive(Clone)]
pub struct SimClock {
    pub(super) sh: Shared,
    pub(super) pid: usize,
}

impl fmt::Debug for SimClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SimClock(pid {})", self.pid)
    }
}

struct SleepFuture {
    pub(super) sh: Shared,
    pub(super) pid: usize,
    pub(super) at: Mono,
    pub(super) timer: Option<u64>,
}

impl Future for SleepFuture {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        let sh = self.sh.clone();
        let mut w = sh.borrow_mut();
        if w.proc_now(self.pid).mono >= self.at {
            if let Some(t) = self.timer.take() {
                w.timers.remove(&t);
            }
            return Poll::Ready(());
        }
        let rearm = match self.timer {
            None => true,
            Some(t) => w.timers.get(&t).is_none_or(|&(_, fired)| fired),
        };
        if rearm {
            if let Some(t) = self.timer {
                w.timers.remove(&t);
            }
            let (pid, at) = (self.pid, self.at);
            self.timer = Some(w.add_timer(pid, at));
        }
        Poll::Pending
    }
}

impl Drop for SleepFuture {
    fn drop(&mut self) {
        if let Some(t) = self.timer {
            self.sh.borrow_mut().timers.remove(&t);
        }
    }
}

impl Clock for SimClock {
    fn now(&self) -> Now {
        self.sh.borrow().proc_now(self.pid)
    }

    fn sleep_until(&self, at: Mono) -> impl Future<Output = ()> {
        SleepFuture {
            sh: self.sh.clone(),
            pid: self.pid,
            at,
            timer: None,
        }
    }
}

thread_local! {
    /// The entropy of the process being polled (the executor moves it in
    /// and out around each poll), for the clients' `fn() -> Entropy`.
    pub(super) static CURRENT: RefCell<Option<Entropy>> = const { RefCell::new(None) };
}

/// Fresh entropy for the process being polled: what the OS's randomness is
/// to a real process. Deterministic: each process's generator is seeded
/// from the run's seed.
pub fn sim_entropy() -> Entropy {
    CURRENT.with(|c| {
        c.borrow_mut()
            .as_mut()
            .map_or_else(|| Entropy::from_seed(0), Entropy::fork)
    })
}
