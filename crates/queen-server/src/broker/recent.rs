//! Partitions written to lately, per queue, and which of them each consumer
//! group has drained: where a wildcard pop looks first.
//!
//! A queue may have 10 000 partitions of which a handful hold messages; the
//! database walk that finds them (`queen.pop_queue`, the floor) passes over
//! drained partitions. Every push this broker commits, and every
//! `MESSAGE_AVAILABLE` hint a peer sends, records its partition here with a
//! fresh write number. A wildcard pop hands `queen.pop_queue` the group's
//! candidates (written since the group last found them drained), oldest write
//! first, so the lanes that waited longest are served first; the database
//! tries those before walking and reports the hinted partitions it found
//! drained, which drop out of the group's candidates until they are written
//! again. Everything here is a hint: the walk stays the floor for partitions
//! the list misses (lost hints, restarts, lease expiries): one pop per
//! `FLOOR_INTERVAL` and group goes straight to it, and pops whose hints do
//! not fill them walk too, for as long as the group's walks find work. A
//! partition a walk found work in joins the list as if written, so a backlog
//! the list missed is served from hints once the walks have seen it; and a
//! walk that found such work has the broker look up the queue's other
//! partitions with work for the group (`DISCOVER_LIMIT` of them, at most once
//! per `FLOOR_INTERVAL`), which join the list the same way: after a restart
//! with a backlog over thousands of partitions, each walk would otherwise find
//! the one partition its pop then drains.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::store::Claim;

/// Partitions remembered per queue (the least recently written go first).
const PER_QUEUE: usize = 4_096;
/// Partitions remembered over all queues; past this the lists start over.
const MAX_TOTAL: usize = 100_000;
/// Consumer groups tracked per queue; past this their drained marks start over.
const MAX_GROUPS: usize = 256;
/// Candidates handed to one pop.
const HINTS_PER_POP: usize = 32;
/// Each group's pops go straight to the walk once per this interval.
const FLOOR_INTERVAL: Duration = Duration::from_millis(500);
/// Partitions one lookup of a queue's partitions with work adds to its list:
/// half of `PER_QUEUE`. With 512, a backlog of one-batch partitions ran out of
/// listed ones every 1.5 s and its pops walked until the next lookup
/// (docs/benchmarks.md, "Other workload shapes"); the lookup reads about
/// 9 µs of database time per partition it returns.
pub const DISCOVER_LIMIT: usize = 2_048;

/// Recently written partitions of each queue; see the module docs.
#[derive(Debug, Default)]
pub struct RecentPartitions {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    queues: HashMap<String, QueueList>,
    /// Partitions remembered over all queues.
    total: usize,
}

#[derive(Debug, Default)]
struct QueueList {
    /// Group -> when the broker last looked up the queue's partitions with
    /// work for it (`RecentPartitions::discovery_due`).
    discovered: HashMap<String, Instant>,
    /// Write number of the next recorded write.
    next_write: u64,
    /// Partition -> number of its last recorded write.
    written: HashMap<String, u64>,
    /// The same, by write number (oldest first).
    by_write: BTreeMap<u64, String>,
    groups: HashMap<String, GroupView>,
}

#[derive(Debug)]
struct GroupView {
    /// Every entry written before this was found drained by the group.
    low: u64,
    /// Partition -> write number the queue was at when a pop found it drained.
    drained: HashMap<String, u64>,
    last_floor: Instant,
    /// Whether the last walk of this group's pops found work.
    walk_found: bool,
}

impl GroupView {
    /// Whether the group found `partition`, last written as `seq`, drained.
    fn drained(&self, partition: &str, seq: u64) -> bool {
        seq < self.low || self.drained.get(partition).is_some_and(|&at| at > seq)
    }
}

/// What [`RecentPartitions::learn`] made of a pop.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Learned {
    /// The pop walked the queue in the database.
    pub walked: bool,
    /// Its walk found work in partitions the list did not know.
    pub unlisted: bool,
}

/// What a wildcard pop should try first, and when the list was read.
#[derive(Debug)]
pub struct Hints {
    pub names: Vec<String>,
    /// The queue's write number when the hints were taken: a partition found
    /// drained counts as drained up to here, not past a later write.
    pub as_of: u64,
    /// Whether the pop may walk the queue when the hints do not fill it.
    pub walk: bool,
}

impl Default for Hints {
    /// Nothing listed: the walk is the only way to find work.
    fn default() -> Self {
        Self {
            names: Vec::new(),
            as_of: 0,
            walk: true,
        }
    }
}

impl RecentPartitions {
    /// `partition` of `queue` just received messages.
    pub fn record(&self, queue: &str, partition: &str) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.record(queue, partition);
    }

    /// The candidates a wildcard pop of `group` on `queue` should try first:
    /// none once per `FLOOR_INTERVAL`, so the database walk keeps its share.
    pub fn hints_for_pop(&self, queue: &str, group: &str) -> Hints {
        self.with_list(queue, |list| list.hints(group, Instant::now()))
            .unwrap_or_default()
    }

    /// Runs `f` on the list of `queue`, if there is one, under the lock.
    fn with_list<R>(&self, queue: &str, f: impl FnOnce(&mut QueueList) -> R) -> Option<R> {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.queues.get_mut(queue).map(f)
    }

    /// What a wildcard pop of `group` on `queue`, given `hints`, claimed:
    /// the hinted partitions it found drained leave the group's candidates,
    /// and if it was allowed to walk, the partitions it claimed from outside
    /// the hints say whether walking is worth it (see `QueueList::walked`).
    /// Whether the pop walked, and whether its walk found work in partitions
    /// the list did not know.
    pub fn learn(&self, queue: &str, group: &str, hints: &Hints, claim: &Claim) -> Learned {
        let walked = hints
            .walk
            .then(|| {
                // a claim's messages come partition by partition: look each
                // partition up in the hints once
                let mut walked: Vec<&str> = Vec::new();
                let mut last = None;
                for m in &claim.messages {
                    let p = m.partition_name.as_str();
                    if last == Some(p) {
                        continue;
                    }
                    last = Some(p);
                    if !hints.names.iter().any(|h| h == p) {
                        walked.push(p);
                    }
                }
                walked
            })
            // messages only from hinted partitions: the walk did not run
            .filter(|w| !w.is_empty() || claim.messages.is_empty());
        if walked.is_none() && claim.drained_hints.is_empty() {
            return Learned::default();
        }
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let unlisted = match inner.queues.get_mut(queue) {
            Some(list) => {
                let unlisted = walked.as_ref().is_some_and(|w| list.walked(group, w));
                list.mark_drained(group, &claim.drained_hints, hints.as_of);
                unlisted
            }
            // no list yet: whatever the walk found is unlisted
            None => walked.iter().flatten().next().is_some(),
        };
        // Where a walk found work is a candidate from now on, as if written:
        // after a restart (nothing recorded yet) or with writes this replica
        // never heard of, the following pops try it first instead of walking.
        for p in walked.iter().flatten() {
            inner.record(queue, p);
        }
        Learned {
            walked: walked.is_some(),
            unlisted,
        }
    }

    /// Whether the broker should look up `queue`'s partitions with work for
    /// `group` now: true at most once per `FLOOR_INTERVAL` per queue and group
    /// (and then counted as done).
    pub fn discovery_due(&self, queue: &str, group: &str) -> bool {
        let now = Instant::now();
        self.with_list(queue, |list| {
            let due = list
                .discovered
                .get(group)
                .is_none_or(|at| now.duration_since(*at) >= FLOOR_INTERVAL);
            if due {
                if list.discovered.len() >= MAX_GROUPS {
                    list.discovered.clear();
                }
                list.discovered.insert(group.to_owned(), now);
            }
            due
        })
        .unwrap_or(false)
    }

    /// Partitions of `queue` found with work in the database: candidates from
    /// now on, as if written (those the list knows keep their place).
    pub fn discovered(&self, queue: &str, partitions: &[String]) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        for p in partitions {
            let known = inner
                .queues
                .get(queue)
                .is_some_and(|list| list.written.contains_key(p));
            if !known {
                inner.record(queue, p);
            }
        }
    }

    /// The cursors of `group` moved back or were deleted (on `queue`, or on
    /// every queue): forget which partitions it had drained.
    pub fn forget_group(&self, queue: Option<&str>, group: &str) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        match queue {
            Some(q) => {
                if let Some(list) = inner.queues.get_mut(q) {
                    list.groups.remove(group);
                }
            }
            None => {
                for list in inner.queues.values_mut() {
                    list.groups.remove(group);
                }
            }
        }
    }

    /// A deleted queue's list goes with it.
    pub fn forget(&self, queue: &str) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(list) = inner.queues.remove(queue) {
            inner.total -= list.written.len();
        }
    }
}

impl Inner {
    /// Records a write of `partition` to `queue`, within the memory bounds.
    fn record(&mut self, queue: &str, partition: &str) {
        if self.total >= MAX_TOTAL {
            self.queues.clear();
            self.total = 0;
        }
        // a push to a known queue allocates nothing but its write entry
        if !self.queues.contains_key(queue) {
            self.queues.insert(queue.to_owned(), QueueList::default());
        }
        let Some(list) = self.queues.get_mut(queue) else {
            return;
        };
        if list.record(partition) {
            if list.written.len() > PER_QUEUE {
                list.evict_oldest();
            } else {
                self.total += 1;
            }
        }
    }
}

impl QueueList {
    /// Records a write; true if the partition is new to the list.
    fn record(&mut self, partition: &str) -> bool {
        let seq = self.next_write;
        self.next_write += 1;
        match self.written.get_mut(partition) {
            Some(old) => {
                let name = self
                    .by_write
                    .remove(old)
                    .unwrap_or_else(|| partition.to_owned());
                *old = seq;
                self.by_write.insert(seq, name);
                false
            }
            None => {
                self.written.insert(partition.to_owned(), seq);
                self.by_write.insert(seq, partition.to_owned());
                true
            }
        }
    }

    fn evict_oldest(&mut self) {
        if let Some((_, name)) = self.by_write.pop_first() {
            self.written.remove(&name);
            for view in self.groups.values_mut() {
                view.drained.remove(&name);
            }
        }
    }

    fn mark_drained(&mut self, group: &str, partitions: &[String], as_of: u64) {
        let Some(view) = self.groups.get_mut(group) else {
            return;
        };
        for p in partitions {
            if self.written.contains_key(p) {
                view.drained.insert(p.clone(), as_of);
            }
        }
    }

    /// A pop of `group` walked and claimed from the partitions `walked`
    /// (none: the walk found nothing). Work the list already counts as a
    /// candidate (written after the hints were taken, or past the first
    /// [`HINTS_PER_POP`] candidates) will be hinted anyway; only work the list
    /// does not know re-enables walking. Until a walk finds such work again,
    /// the group's pops walk only once per [`FLOOR_INTERVAL`]: at 10 000
    /// partitions a walk that finds nothing costs tens of milliseconds of
    /// database time, and every consumer a push wakes took one after losing
    /// the race for the new messages. Work in a partition the group had found
    /// drained means its cursors moved back (a seek or a group deletion,
    /// possibly through another replica): the group's view starts over.
    /// Returns whether the walk found work the list does not know.
    fn walked(&mut self, group: &str, walked: &[&str]) -> bool {
        let unlisted = walked.iter().any(|p| !self.written.contains_key(*p));
        let Some(view) = self.groups.get_mut(group) else {
            return unlisted;
        };
        let moved_back = walked.iter().any(|p| {
            self.written
                .get(*p)
                .is_some_and(|&seq| view.drained(p, seq))
        });
        if moved_back {
            self.groups.remove(group);
        } else {
            view.walk_found = unlisted;
        }
        unlisted
    }

    fn hints(&mut self, group: &str, now: Instant) -> Hints {
        let as_of = self.next_write;
        if !self.groups.contains_key(group) {
            if self.groups.len() >= MAX_GROUPS {
                self.groups.clear();
            }
            let view = GroupView {
                low: 0,
                drained: HashMap::new(),
                last_floor: now,
                walk_found: true,
            };
            self.groups.insert(group.to_owned(), view);
        }
        let Some(view) = self.groups.get_mut(group) else {
            return Hints::default();
        };
        if now.duration_since(view.last_floor) >= FLOOR_INTERVAL {
            view.last_floor = now;
            return Hints {
                names: Vec::new(),
                as_of,
                walk: true,
            };
        }
        let mut names = Vec::new();
        let mut prefix_drained = true;
        let mut new_low = view.low;
        for (&seq, name) in self.by_write.range(view.low..) {
            if view.drained(name, seq) {
                if prefix_drained {
                    // every write up to here is drained: stop looking at them
                    view.drained.remove(name);
                    new_low = seq + 1;
                }
                continue;
            }
            prefix_drained = false;
            names.push(name.clone());
            if names.len() == HINTS_PER_POP {
                break;
            }
        }
        view.low = new_low;
        Hints {
            names,
            as_of,
            walk: view.walk_found,
        }
    }
}

#[cfg(test)]
mod tests;
