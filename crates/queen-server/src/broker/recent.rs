//! Partitions written to lately, per queue: where a wildcard pop looks first.
//!
//! A queue may have 10 000 partitions of which a handful hold messages; the
//! database walk that finds them (`queen.pop_queue`, the floor) passes over
//! drained partitions. Every push this broker commits, and every
//! `MESSAGE_AVAILABLE` hint a peer sends, puts its partition at the front of
//! the queue's short list here; a wildcard pop hands the list to
//! `queen.pop_queue`, which tries those partitions first (when they have
//! messages past the group's cursor and no live lease) and walks only if they
//! do not fill the pop. One pop in [`FLOOR_EVERY`] skips the list, so
//! partitions that fell off it (or were written through a replica whose hints
//! were lost) keep being served while the list stays busy.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

/// Partitions remembered per queue.
const PER_QUEUE: usize = 32;
/// Queues remembered; past this the list starts over (it is only a hint).
const MAX_QUEUES: usize = 10_000;
/// Every this many wildcard pops, one goes straight to the walk.
const FLOOR_EVERY: u64 = 4;

/// Recently written partitions of each queue, newest first.
#[derive(Debug, Default)]
pub struct RecentPartitions {
    queues: Mutex<HashMap<String, VecDeque<String>>>,
    pops: AtomicU64,
}

impl RecentPartitions {
    /// `partition` of `queue` just received messages.
    pub fn record(&self, queue: &str, partition: &str) {
        let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        // a push to a known queue allocates nothing unless its partition is new
        if !queues.contains_key(queue) {
            if queues.len() >= MAX_QUEUES {
                queues.clear();
            }
            queues.insert(queue.to_owned(), VecDeque::new());
        }
        let Some(list) = queues.get_mut(queue) else {
            return;
        };
        if list.front().is_some_and(|p| p == partition) {
            return;
        }
        if let Some(at) = list.iter().position(|p| p == partition) {
            list.remove(at);
        } else if list.len() >= PER_QUEUE {
            list.pop_back();
        }
        list.push_front(partition.to_owned());
    }

    /// The list a wildcard pop on `queue` should try first: empty for one pop
    /// in [`FLOOR_EVERY`], so the database walk keeps its share.
    pub fn hints_for_pop(&self, queue: &str) -> Vec<String> {
        if self.pops.fetch_add(1, Ordering::Relaxed) % FLOOR_EVERY == FLOOR_EVERY - 1 {
            return Vec::new();
        }
        self.snapshot(queue)
    }

    fn snapshot(&self, queue: &str) -> Vec<String> {
        let queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        queues
            .get(queue)
            .map(|l| l.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// A deleted queue's list goes with it.
    pub fn forget(&self, queue: &str) {
        let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        queues.remove(queue);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_first_without_repeats_and_bounded() {
        let r = RecentPartitions::default();
        for p in ["a", "b", "a", "c"] {
            r.record("q", p);
        }
        assert_eq!(r.snapshot("q"), ["c", "a", "b"]);
        for i in 0..100 {
            r.record("q", &format!("p{i}"));
        }
        let list = r.snapshot("q");
        assert_eq!(list.len(), PER_QUEUE);
        assert_eq!(list[0], "p99");
        assert!(r.snapshot("other").is_empty());
        r.forget("q");
        assert!(r.snapshot("q").is_empty());
    }

    #[test]
    fn one_pop_in_four_goes_to_the_walk() {
        let r = RecentPartitions::default();
        r.record("q", "a");
        let empty = (0..8).filter(|_| r.hints_for_pop("q").is_empty()).count();
        assert_eq!(empty, 2);
    }
}
