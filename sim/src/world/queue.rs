//! The event queue both simulators run on: events at real times (ms from
//! the start), taken in order of time and, at one instant, in the order
//! they were scheduled, so a run is the same every time it is replayed.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// Events of type `E`, each at a real time.
#[derive(Debug)]
pub struct Queue<E> {
    heap: BinaryHeap<Reverse<Scheduled<E>>>,
    seq: u64,
}

#[derive(Debug)]
struct Scheduled<E> {
    at: u64,
    seq: u64,
    ev: E,
}

impl<E> PartialEq for Scheduled<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl<E> Eq for Scheduled<E> {}
impl<E> PartialOrd for Scheduled<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Scheduled<E> {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

impl<E> Default for Queue<E> {
    fn default() -> Self {
        Queue {
            heap: BinaryHeap::new(),
            seq: 0,
        }
    }
}

impl<E> Queue<E> {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Schedules `ev` at real time `at`, after everything already
    /// scheduled at `at`.
    pub fn push(&mut self, at: u64, ev: E) {
        self.seq += 1;
        self.heap.push(Reverse(Scheduled {
            at,
            seq: self.seq,
            ev,
        }));
    }

    /// When the next event happens, if any is pending.
    pub fn next_at(&self) -> Option<u64> {
        self.heap.peek().map(|Reverse(s)| s.at)
    }

    /// Takes the next event and its time.
    pub fn pop(&mut self) -> Option<(u64, E)> {
        self.heap.pop().map(|Reverse(s)| (s.at, s.ev))
    }

    /// Takes the next event if it happens at or before `until`.
    pub fn pop_until(&mut self, until: u64) -> Option<(u64, E)> {
        match self.next_at() {
            Some(at) if at <= until => self.pop(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_come_in_order_of_time_then_of_scheduling() {
        let mut q = Queue::new();
        q.push(20, "c");
        q.push(10, "a");
        q.push(20, "d");
        q.push(10, "b");
        assert_eq!(q.next_at(), Some(10));
        assert_eq!(q.pop_until(9), None);
        let order: Vec<_> = std::iter::from_fn(|| q.pop_until(20)).collect();
        assert_eq!(order, [(10, "a"), (10, "b"), (20, "c"), (20, "d")]);
        assert_eq!(q.pop(), None);
    }
}
