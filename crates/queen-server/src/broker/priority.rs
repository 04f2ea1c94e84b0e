//! The order in which a namespace pop (`GET /api/v1/pop?namespace=&task=`)
//! tries the queues of the namespace: queue option `priority`.
//!
//! Seven of every eight namespace pops of a broker try the queues by
//! priority, highest first; queues of equal priority take turns being
//! first (the start rotates with every pop). The eighth ignores priority and
//! takes every queue in turn, starting one queue further each time, so a
//! queue with work is tried first at least once every `8 × queues` namespace
//! pops, whatever its priority: busy high-priority queues slow the others
//! down, they do not stop them.

use std::sync::atomic::{AtomicU64, Ordering};

use super::Broker;
use crate::store::StoreError;

/// One namespace pop in this many ignores priority.
pub const FAIR_EVERY: u64 = 8;

/// Namespace pops of this process, for the rotations.
static NAMESPACE_POPS: AtomicU64 = AtomicU64::new(0);

/// `queues` (name, priority) in the order the `n`-th namespace pop tries them.
pub fn order(mut queues: Vec<(String, i32)>, n: u64) -> Vec<String> {
    if queues.is_empty() {
        return Vec::new();
    }
    queues.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    if n % FAIR_EVERY == FAIR_EVERY - 1 {
        queues.sort_by(|a, b| a.0.cmp(&b.0));
        let k = (n / FAIR_EVERY) % queues.len() as u64;
        queues.rotate_left(k as usize);
    } else {
        for run in queues.chunk_by_mut(|a, b| a.1 == b.1) {
            let k = n % run.len() as u64;
            run.rotate_left(k as usize);
        }
    }
    queues.into_iter().map(|(name, _)| name).collect()
}

impl Broker {
    /// The queues of a namespace (and task) in the order this pop tries them.
    pub(super) async fn namespace_queues(
        &self,
        namespace: Option<&str>,
        task: Option<&str>,
    ) -> Result<Vec<String>, StoreError> {
        let queues = self.store.queues_in_namespace(namespace, task).await?;
        Ok(order(
            queues,
            NAMESPACE_POPS.fetch_add(1, Ordering::Relaxed),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(list: &[(&str, i32)]) -> Vec<(String, i32)> {
        list.iter().map(|(n, p)| ((*n).to_owned(), *p)).collect()
    }

    #[test]
    fn higher_priority_first_and_equal_ones_take_turns() {
        let queues = q(&[("a", 0), ("b", 5), ("c", 5), ("d", 1)]);
        assert_eq!(order(queues.clone(), 0), ["b", "c", "d", "a"]);
        assert_eq!(order(queues.clone(), 1), ["c", "b", "d", "a"]);
        assert_eq!(order(queues, 2), ["b", "c", "d", "a"]);
    }

    #[test]
    fn every_queue_is_first_within_eight_times_the_queues() {
        let queues = q(&[("low", 0), ("mid", 3), ("high", 9)]);
        for name in ["low", "mid", "high"] {
            let first = (0..FAIR_EVERY * 3)
                .filter(|&n| order(queues.clone(), n)[0] == name)
                .count();
            assert!(first >= 1, "{name} never first");
        }
        // and the high one is first most of the time
        let high = (0..FAIR_EVERY * 3)
            .filter(|&n| order(queues.clone(), n)[0] == "high")
            .count();
        assert!(high >= 21, "{high}");
        assert!(order(Vec::new(), 3).is_empty());
    }
}
