//! Wakes parked long-poll pops when a push commits or a lease is released.
//!
//! A parked pop registers interest *before* it checks PostgreSQL, so a wake that
//! lands between its check and its wait is never lost. The waker is only a hint:
//! a parked pop also re-checks on its own bounded interval.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use crate::config::PopConfig;

/// Parked pops, keyed by queue name.
#[derive(Debug, Default)]
pub struct Waker {
    queues: Mutex<HashMap<String, Arc<Notify>>>,
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
}

/// The re-check schedule of one parked pop: a fixed interval for the first
/// checks, then growing by a factor up to a ceiling.
#[derive(Debug, Clone)]
pub struct Backoff {
    interval: Duration,
    empty_checks: u32,
    threshold: u32,
    multiplier: f64,
    max: Duration,
}

impl Backoff {
    pub fn new(c: &PopConfig) -> Self {
        Self {
            interval: c.wait_initial_interval.min(c.wait_max_interval),
            empty_checks: 0,
            threshold: c.wait_backoff_threshold,
            multiplier: c.wait_backoff_multiplier,
            max: c.wait_max_interval,
        }
    }

    /// Returns how long to wait before the next check, and advances the schedule.
    pub fn next_interval(&mut self) -> Duration {
        let current = self.interval;
        self.empty_checks += 1;
        if self.empty_checks >= self.threshold {
            self.interval = self.interval.mul_f64(self.multiplier).min(self.max);
        }
        current
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SubscriptionMode;

    fn pop_config() -> PopConfig {
        PopConfig {
            default_batch: 1,
            default_timeout: Duration::from_secs(30),
            default_subscription_mode: SubscriptionMode::All,
            wait_initial_interval: Duration::from_millis(100),
            wait_backoff_threshold: 3,
            wait_backoff_multiplier: 2.0,
            wait_max_interval: Duration::from_millis(1000),
        }
    }

    #[test]
    fn backoff_grows_after_threshold_up_to_ceiling() {
        let mut b = Backoff::new(&pop_config());
        let got: Vec<u128> = (0..8).map(|_| b.next_interval().as_millis()).collect();
        assert_eq!(got, vec![100, 100, 100, 200, 400, 800, 1000, 1000]);
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
