//! The recorder's buffer and the machine layer that fills it.

use super::{json, Start, Traced};
use crate::protocol::machine::{CallId, Machine, Output};
use crate::store::StoreReply;
use crate::time::{Mono, Now};
use serde_json::{json as j, Value};
use std::collections::{BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// The trace format's version (the header's `lease_trace`).
pub const FORMAT: u64 = 1;

/// How many lines a [`Recorder::default`] keeps: about 4 MB, and over ten
/// hours of a `lease run` renewing every 10 s.
pub const DEFAULT_CAPACITY: usize = 20_000;

/// How many cut runs the recorder lets pile up before it forgets those
/// with no line left.
const CUT_RUNS_KEPT: usize = 256;

/// A bounded flight recorder (see the [module docs](super)). Clones share
/// one buffer; give one to a client with
/// [`Leases::record_to`](crate::client::Leases::record_to), and write it
/// out with [`to_jsonl`](Self::to_jsonl) when something went wrong (a
/// lost lease, an error) or when asked.
///
/// The buffer keeps the newest [`capacity`](Self::new) lines. A run whose
/// first line (its `start`) was dropped is marked cut: a replay shows
/// its lines and judges them but cannot build its machine again.
#[derive(Clone)]
pub struct Recorder {
    inner: Arc<Mutex<Buffer>>,
}

struct Buffer {
    capacity: usize,
    /// Run (0: a note), whether it is the run's start, the line.
    lines: VecDeque<(u64, bool, String)>,
    next_run: u64,
    /// Runs whose start line has been dropped.
    cut: BTreeSet<u64>,
    dropped: u64,
}

impl core::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let b = self.lock();
        f.debug_struct("Recorder")
            .field("capacity", &b.capacity)
            .field("lines", &b.lines.len())
            .field("dropped", &b.dropped)
            .finish()
    }
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::new(DEFAULT_CAPACITY)
    }
}

impl Recorder {
    /// A recorder that keeps the newest `capacity` lines (at least 16).
    pub fn new(capacity: usize) -> Recorder {
        Recorder {
            inner: Arc::new(Mutex::new(Buffer {
                capacity: capacity.max(16),
                lines: VecDeque::new(),
                next_run: 1,
                cut: BTreeSet::new(),
                dropped: 0,
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Buffer> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn push(&self, run: u64, line: Value) {
        self.push_line(run, false, line)
    }

    fn push_line(&self, run: u64, start: bool, line: Value) {
        let mut b = self.lock();
        b.lines.push_back((run, start, line.to_string()));
        while b.lines.len() > b.capacity {
            if let Some((run, start, _)) = b.lines.pop_front() {
                if start {
                    b.cut.insert(run);
                }
                b.dropped += 1;
            }
        }
        // Forget the cut runs none of whose lines is kept any more, now
        // and then (a recorder may live for months of runs).
        if b.cut.len() > CUT_RUNS_KEPT {
            let Buffer { lines, cut, .. } = &mut *b;
            let kept: BTreeSet<u64> = lines.iter().map(|(run, _, _)| *run).collect();
            cut.retain(|run| kept.contains(run));
        }
    }

    /// Starts a run: its number, and its `start` line.
    pub(crate) fn begin(&self, start: &Start) -> u64 {
        let run = {
            let mut b = self.lock();
            let run = b.next_run;
            b.next_run += 1;
            run
        };
        self.push_line(run, true, j!({"run": run, "start": json::start(start)}));
        run
    }

    /// Notes something the caller did at local time `at`, outside any
    /// machine, that a replay judges: `work-start` when work that needs
    /// the lease starts, `work-killed` just after every process of it was
    /// sent KILL (none runs after that, however late the caller learns it
    /// is gone), `work-end` when it has ended (every process of it gone).
    /// A replay checks that work ended (at the earlier of the last two) by
    /// the deadline of the lease it ran under.
    pub fn note(&self, what: &str, at: Mono) {
        self.push(0, j!({"note": what, "at": at.0}));
    }

    /// Lines kept now.
    pub fn len(&self) -> usize {
        self.lock().lines.len()
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The trace: a header line, then the lines kept, oldest first (the
    /// format is in `docs/operations.md`).
    pub fn to_jsonl(&self) -> String {
        let b = self.lock();
        let kept: BTreeSet<u64> = b.lines.iter().map(|(run, _, _)| *run).collect();
        let cut: Vec<u64> = b.cut.intersection(&kept).copied().collect();
        let header = j!({"lease_trace": FORMAT, "dropped_lines": b.dropped, "cut_runs": cut});
        let mut out = header.to_string();
        out.push('\n');
        for (_, _, line) in &b.lines {
            out.push_str(line);
            out.push('\n');
        }
        out
    }
}

/// A machine whose every input and output goes to a [`Recorder`]: the
/// local times it is polled, stopped and handed replies at, the replies
/// (scrubbed of credentials), and what it answered.
#[derive(Debug)]
pub struct Recorded<M> {
    inner: M,
    recorder: Recorder,
    run: u64,
}

impl<M: Machine> Recorded<M> {
    /// Records `machine`, built from `start`, to `recorder`.
    pub fn new(machine: M, recorder: &Recorder, start: &Start) -> Recorded<M> {
        Recorded {
            run: recorder.begin(start),
            recorder: recorder.clone(),
            inner: machine,
        }
    }

    /// The machine recorded.
    pub fn inner_mut(&mut self) -> &mut M {
        &mut self.inner
    }
}

fn at(now: Now) -> Value {
    j!([now.mono.0, now.wall.0])
}

impl<M: Machine> Machine for Recorded<M>
where
    M::Outcome: Traced,
{
    type Outcome = M::Outcome;

    fn poll(&mut self, now: Now) -> Output<M::Outcome> {
        let out = self.inner.poll(now);
        self.recorder.push(
            self.run,
            j!({"run": self.run, "poll": at(now), "out": json::output(&out)}),
        );
        out
    }

    fn handle_reply(&mut self, now: Now, id: CallId, reply: StoreReply) {
        self.recorder.push(
            self.run,
            j!({"run": self.run, "reply": at(now), "call": id.0, "is": json::reply(&reply)}),
        );
        self.inner.handle_reply(now, id, reply)
    }

    fn stop(&mut self, now: Now) {
        self.recorder
            .push(self.run, j!({"run": self.run, "stop": at(now)}));
        self.inner.stop(now)
    }

    fn hand_over(&mut self, now: Now, to: &str) {
        self.recorder
            .push(self.run, j!({"run": self.run, "stop": at(now), "to": to}));
        self.inner.hand_over(now, to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recorder that outlives many runs forgets the cut ones with no
    /// line left, and still names those with lines kept.
    #[test]
    fn cut_runs_with_no_line_left_are_forgotten() {
        let recorder = Recorder::new(16);
        for run in 1..=10_000u64 {
            recorder.push_line(run, true, j!({"run": run, "start": {}}));
            recorder.push(run, j!({"run": run, "stop": [run, run]}));
            recorder.push(run, j!({"run": run, "stop": [run, run]}));
        }
        let b = recorder.lock();
        assert!(b.cut.len() <= CUT_RUNS_KEPT + 1, "{}", b.cut.len());
        drop(b);
        let text = recorder.to_jsonl();
        let header: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        // 16 lines of three-line runs: the oldest run kept lost its start.
        assert_eq!(header["cut_runs"], j!([9995]), "{text}");
        assert_eq!(header["dropped_lines"], j!(30_000 - 16));
    }
}
