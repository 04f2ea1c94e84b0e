//! This replica's health row, every stats interval (every replica, not
//! gated; `queen.replica_health`, read by `analytics/worker-metrics`):
//! the event loop lag, measured here as how late a 100 ms timer of the
//! runtime fires (a runtime whose workers are busy or blocked runs it late),
//! CPU use over the interval, RSS, the pool and the spool.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::broker::process::{cpu_times, CpuMeter};
use crate::broker::{status_rss_bytes, Broker};
use crate::store::{HealthSample, Store};

/// The probe timer's period.
const TICK: Duration = Duration::from_millis(100);

/// Lateness of the probe timer over one interval.
#[derive(Debug, Default)]
struct LoopLag {
    sum_ms: f64,
    max_ms: f64,
    ticks: u32,
}

impl LoopLag {
    fn record(&mut self, late: Duration) {
        let ms = late.as_secs_f64() * 1000.0;
        self.sum_ms += ms;
        self.max_ms = self.max_ms.max(ms);
        self.ticks += 1;
    }

    fn avg_ms(&self) -> f64 {
        if self.ticks == 0 {
            0.0
        } else {
            self.sum_ms / f64::from(self.ticks)
        }
    }
}

pub(super) async fn run(broker: Arc<Broker>, store: Arc<Store>, cancel: CancellationToken) {
    let cpu = CpuMeter::new();
    // the first read of the meter is the lifetime average: take it now
    cpu.percent(cpu_times(), 1.0, Duration::ZERO);
    let mut lag = LoopLag::default();
    let mut since = Instant::now();
    loop {
        let asleep = Instant::now();
        tokio::select! {
            _ = tokio::time::sleep(TICK) => {}
            _ = cancel.cancelled() => return,
        }
        lag.record(asleep.elapsed().saturating_sub(TICK));
        if since.elapsed() < broker.config().jobs.stats_interval {
            continue;
        }
        since = Instant::now();
        let done = std::mem::take(&mut lag);
        if !store.is_ready() {
            continue;
        }
        let pool = broker.pool_status();
        let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
        let sample = HealthSample {
            loop_lag_avg_ms: done.avg_ms(),
            loop_lag_max_ms: done.max_ms,
            cpu_percent: cpu.percent(cpu_times(), 1.0, Duration::ZERO),
            rss_bytes: i64::try_from(status_rss_bytes()).unwrap_or(i64::MAX),
            pool_size: count(pool.max_size),
            pool_open: count(pool.open),
            pool_idle: count(pool.idle),
            pool_waiting: count(pool.waiting),
            spool_pending: i64::try_from(broker.spool_status().stats.records).unwrap_or(i64::MAX),
        };
        if let Err(e) = store
            .write_replica_health(&broker.config().server_id, &sample)
            .await
        {
            tracing::debug!(error = %e, "writing replica health failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lag_is_the_mean_and_the_worst_lateness() {
        let mut lag = LoopLag::default();
        assert_eq!(lag.avg_ms(), 0.0);
        lag.record(Duration::from_millis(2));
        lag.record(Duration::from_millis(10));
        lag.record(Duration::ZERO);
        assert_eq!(lag.max_ms, 10.0);
        assert_eq!(lag.avg_ms(), 4.0);
    }
}
