//! Last-value consumer groups (conflation): the stored policy of each
//! (queue, group), cached, and what conflation retired.
//!
//! A pop with `conflation=true` asks for last-value delivery: each claimed
//! partition gives its newest visible message, and the ack of that message
//! commits everything behind it. It is a property of the consumer group on
//! the queue, stored by the group's first pop there (`queen.group_policy`;
//! absent means false), and the stored value wins for every later pop of the
//! group, whatever it asks. A pop that asks for conflation on a group
//! registered without it is served as the group is (no conflation) and told
//! so (`conflationConflict`).
//!
//! Every pop of a named group needs the group's policy, so it is cached per
//! replica. A stored policy changes only when the group is deleted (and then
//! registered again); this replica forgets its entry at once when it deletes
//! the group, the other replicas when the entry is older than
//! `QUEUE_CONFIG_MAX_AGE_MS`, as for queue configuration.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use prometheus::{IntCounter, IntCounterVec, Opts, Registry};
use queen_proto::ConsumerGroup;

use super::Broker;
use crate::store::StoreError;

/// Cached policies; past this the cache starts over.
const MAX_ENTRIES: usize = 100_000;

/// Queue -> group -> (the group conflates, when that was read).
type PolicyCache = HashMap<String, HashMap<String, (bool, Instant)>>;

/// How a pop of a group is served, and what its answer says about it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupPolicy {
    /// The group conflates: one message per partition, the newest.
    pub conflate: bool,
    /// The pop asked for conflation and the stored policy says otherwise.
    pub conflict: bool,
}

/// The per-replica cache of stored policies, and the conflation metrics.
#[derive(Debug)]
pub struct GroupPolicies {
    max_age: Duration,
    cache: Mutex<PolicyCache>,
    /// Positions retired without a delivery, per queue.
    pub conflated: IntCounterVec,
    /// Pops whose `conflation=true` disagreed with the stored policy.
    pub conflicts: IntCounter,
}

impl GroupPolicies {
    pub fn new(max_age: Duration, registry: &Registry) -> Self {
        let conflated = IntCounterVec::new(
            Opts::new(
                "queen_conflated_total",
                "positions of conflating consumer groups retired without a delivery (their acks committed past them)",
            ),
            &["queue"],
        )
        .expect("valid metric");
        registry
            .register(Box::new(conflated.clone()))
            .expect("unique metric");
        let conflicts = IntCounter::new(
            "queen_conflation_conflicts_total",
            "pops that asked for conflation on a group registered without it",
        )
        .expect("valid metric");
        registry
            .register(Box::new(conflicts.clone()))
            .expect("unique metric");
        Self {
            max_age,
            cache: Mutex::default(),
            conflated,
            conflicts,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PolicyCache> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The cached policy of `group` on `queue`, while it is fresh.
    pub fn cached(&self, queue: &str, group: &str) -> Option<bool> {
        let cache = self.lock();
        cache
            .get(queue)
            .and_then(|groups| groups.get(group))
            .filter(|(_, at)| at.elapsed() < self.max_age)
            .map(|(conflate, _)| *conflate)
    }

    fn put(&self, queue: &str, group: &str, conflate: bool) {
        let mut cache = self.lock();
        if cache.values().map(HashMap::len).sum::<usize>() >= MAX_ENTRIES {
            cache.clear();
        }
        cache
            .entry(queue.to_owned())
            .or_default()
            .insert(group.to_owned(), (conflate, Instant::now()));
    }

    /// `group` was deleted (on `queue`, or on every queue).
    pub fn forget_group(&self, queue: Option<&str>, group: &str) {
        let mut cache = self.lock();
        for (q, groups) in cache.iter_mut() {
            if queue.is_none_or(|queue| queue == q) {
                groups.remove(group);
            }
        }
    }

    /// `queue` was deleted.
    pub fn forget_queue(&self, queue: &str) {
        self.lock().remove(queue);
    }
}

impl Broker {
    /// How a pop of `group` on `queue` that asked for conflation
    /// (`requested`) or not is served. Queue mode never conflates and is
    /// never registered.
    pub(super) async fn group_policy(
        &self,
        queue: &str,
        group: &ConsumerGroup,
        requested: bool,
    ) -> Result<GroupPolicy, StoreError> {
        if group.as_str() == queen_proto::names::QUEUE_MODE {
            return Ok(GroupPolicy::default());
        }
        let stored = match self.policies.cached(queue, group.as_str()) {
            Some(stored) => stored,
            None => {
                let stored = self
                    .store
                    .group_policy(queue, group.as_str(), requested)
                    .await?;
                self.policies.put(queue, group.as_str(), stored);
                stored
            }
        };
        let conflict = requested && !stored;
        if conflict {
            self.policies.conflicts.inc();
        }
        Ok(GroupPolicy {
            conflate: stored,
            conflict,
        })
    }

    /// Counts what the acks of `group` retired without a delivery, for the
    /// queues on which the group conflates (as this replica has cached).
    pub(super) fn count_conflated<'a>(
        &self,
        group: &str,
        retired: impl IntoIterator<Item = (&'a str, i64)>,
    ) {
        for (queue, skipped) in retired {
            if skipped > 0 && self.policies.cached(queue, group) == Some(true) {
                self.policies
                    .conflated
                    .with_label_values(&[queue])
                    .inc_by(skipped.unsigned_abs());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_and_deletions_forget_them() {
        let p = GroupPolicies::new(Duration::from_secs(60), &Registry::new());
        p.put("q", "g", true);
        p.put("q", "h", false);
        p.put("r", "g", true);
        assert_eq!(p.cached("q", "g"), Some(true));
        assert_eq!(p.cached("q", "h"), Some(false));
        assert_eq!(p.cached("q", "x"), None);
        p.forget_group(Some("q"), "g");
        assert_eq!(p.cached("q", "g"), None);
        assert_eq!(p.cached("r", "g"), Some(true));
        p.forget_group(None, "g");
        assert_eq!(p.cached("r", "g"), None);
        p.forget_queue("q");
        assert_eq!(p.cached("q", "h"), None);

        let stale = GroupPolicies::new(Duration::ZERO, &Registry::new());
        stale.put("q", "g", true);
        assert_eq!(stale.cached("q", "g"), None);
    }
}
