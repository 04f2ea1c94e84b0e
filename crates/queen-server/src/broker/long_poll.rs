//! Wakes parked long-poll pops when a push commits, a lease is released, or
//! a retry hold ends.
//!
//! A parked pop registers interest *before* it checks PostgreSQL, so a wake that
//! lands between its check and its wait is never lost. The waker is only a hint:
//! a parked pop also re-checks on its own bounded interval
//! ([`crate::backoff::Backoff::for_long_poll`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Parked pops, keyed by queue name. A clone shares them (a wake scheduled
/// for later holds one, see [`Waker::notify_after`]).
#[derive(Debug, Default, Clone)]
pub struct Waker {
    queues: Arc<Mutex<HashMap<String, Arc<Notify>>>>,
}

impl Waker {
    /// Returns the notifier of `queue`, creating it if needed.
    pub fn subscribe(&self, queue: &str) -> Arc<Notify> {
        let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        queues
            .entry(queue.to_owned())
            .or_insert_with(|| Arc::new(Notify::new()))
            .clone()
    }

    /// Wakes every pop parked on `queue` right now.
    pub fn notify(&self, queue: &str) {
        let queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = queues.get(queue) {
            n.notify_waiters();
        }
    }

    /// Wakes the pops parked on each of `keys` once `after` has passed (the
    /// end of a retry hold), unless `cancel` comes first; then runs `then`.
    pub fn notify_after(
        &self,
        keys: Vec<String>,
        after: Duration,
        cancel: CancellationToken,
        then: impl FnOnce() + Send + 'static,
    ) {
        let waker = self.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = tokio::time::sleep(after) => {}
                _ = cancel.cancelled() => return,
            }
            for key in &keys {
                waker.notify(key);
            }
            then();
        });
    }

    /// Drops notifiers nobody waits on; called now and then to bound memory.
    pub fn prune(&self) {
        let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        queues.retain(|_, n| Arc::strong_count(n) > 1);
    }

    /// Number of queues with a notifier held by a parked pop.
    pub fn parked_queues(&self) -> usize {
        let queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        queues.values().filter(|n| Arc::strong_count(n) > 1).count()
    }

    /// Pops holding each queue's notifier (parked, or checking before they
    /// park), for the queues that have any.
    pub fn parked_counts(&self) -> Vec<(String, usize)> {
        let queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        queues
            .iter()
            .map(|(q, n)| (q, Arc::strong_count(n) - 1))
            .filter(|(_, n)| *n > 0)
            .map(|(q, n)| (q.clone(), n))
            .collect()
    }

    /// Names of the queues with a notifier held by a parked pop, sorted.
    pub fn parked_queue_names(&self) -> Vec<String> {
        let queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        let mut names: Vec<String> = queues
            .iter()
            .filter(|(_, n)| Arc::strong_count(n) > 1)
            .map(|(q, _)| q.clone())
            .collect();
        names.sort();
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_wake_scheduled_for_later_comes_then_and_not_before() {
        let waker = Waker::default();
        let n = waker.subscribe("q");
        let notified = n.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let started = tokio::time::Instant::now();
        waker.notify_after(
            vec!["q".into()],
            Duration::from_millis(150),
            CancellationToken::new(),
            move || {
                let _ = tx.send(());
            },
        );
        tokio::time::timeout(Duration::from_secs(10), notified)
            .await
            .expect("the scheduled wake never came");
        assert!(started.elapsed() >= Duration::from_millis(150));
        rx.await.expect("the follow-up ran");
    }

    #[tokio::test]
    async fn a_wake_registered_before_the_check_is_not_lost() {
        let waker = Waker::default();
        let n = waker.subscribe("q");
        let notified = n.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        // the push commits between our check and our wait
        waker.notify("q");
        tokio::time::timeout(Duration::from_secs(1), notified)
            .await
            .expect("wake was lost");
    }

    #[test]
    fn prune_keeps_only_held_notifiers() {
        let waker = Waker::default();
        let held = waker.subscribe("a");
        drop(waker.subscribe("b"));
        waker.prune();
        assert_eq!(waker.parked_queues(), 1);
        drop(held);
        waker.prune();
        assert_eq!(waker.parked_queues(), 0);
    }
}
