//! State the key/value, lock and timer use cases share: their metrics and
//! the wake-up of this replica's timer sweeper.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use prometheus::{IntCounterVec, Opts, Registry};
use tokio::sync::Notify;

/// Counters of the KV, lock and timer surfaces, and the sweeper's alarm.
#[derive(Debug)]
pub struct Surfaces {
    /// `queen_kv_ops_total{op, outcome}`: outcome applied | refused | hit | miss | read.
    pub kv_ops: IntCounterVec,
    /// `queen_kv_calls_total{outcome}`: committed | precondition.
    pub kv_calls: IntCounterVec,
    /// `queen_lock_ops_total{op, outcome}`: granted | refused | renewed | lost | released | read.
    pub lock_ops: IntCounterVec,
    /// `queen_timer_events_total{event}`: scheduled | rescheduled | cancelled | absent | fired | duplicate | fire_failed | dead_lettered | skipped (missed ticks of a recurring timer, `catchUp: none`).
    pub timer_events: IntCounterVec,
    /// The sweeper sleeps until this instant at the latest.
    alarm: Mutex<Option<Instant>>,
    wake: Notify,
}

fn counter_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
    if let Err(e) = registry.register(Box::new(c.clone())) {
        tracing::warn!(error = %e, metric = name, "metric not registered");
    }
    c
}

impl Surfaces {
    pub fn new(registry: &Registry) -> Self {
        Self {
            kv_ops: counter_vec(
                registry,
                "queen_kv_ops_total",
                "KV operations by op and outcome",
                &["op", "outcome"],
            ),
            kv_calls: counter_vec(
                registry,
                "queen_kv_calls_total",
                "KV calls (POST /api/v1/kv) by outcome",
                &["outcome"],
            ),
            lock_ops: counter_vec(
                registry,
                "queen_lock_ops_total",
                "lock and semaphore operations by op and outcome",
                &["op", "outcome"],
            ),
            timer_events: counter_vec(
                registry,
                "queen_timer_events_total",
                "timer schedules, cancels and fires",
                &["event"],
            ),
            alarm: Mutex::new(None),
            wake: Notify::new(),
        }
    }

    /// Asks the sweeper to look again `after` from now (sooner only).
    pub fn set_alarm(&self, after: Duration) {
        let at = Instant::now() + after;
        let mut alarm = self.alarm.lock().unwrap_or_else(|e| e.into_inner());
        if alarm.is_none_or(|a| at < a) {
            *alarm = Some(at);
            drop(alarm);
            self.wake.notify_one();
        }
    }

    /// Sleeps until the alarm or `period`, whichever comes first.
    pub async fn sleep_until_due(&self, period: Duration) {
        let deadline = {
            let mut alarm = self.alarm.lock().unwrap_or_else(|e| e.into_inner());
            let fallback = Instant::now() + period;
            match alarm.take() {
                Some(a) if a < fallback => a,
                _ => fallback,
            }
        };
        tokio::select! {
            _ = tokio::time::sleep_until(deadline.into()) => {}
            _ = self.wake.notified() => {
                // a sooner alarm: sleep to it (it is re-read by the next call)
                let next = self.alarm.lock().unwrap_or_else(|e| e.into_inner()).take();
                if let Some(at) = next.filter(|a| *a < deadline) {
                    tokio::time::sleep_until(at.into()).await;
                } else {
                    tokio::time::sleep_until(deadline.into()).await;
                }
            }
        }
    }
}
