//! Cadence and batch sizes of the background jobs: retention, partition
//! cleanup, eviction and per-replica statistics (http-api.md sections 5.7,
//! 5.9).

use std::time::Duration;

use super::defaults;
use super::env::{at_least_one, ConfigError, Reader};

/// Background jobs: retention, eviction, stats (http-api.md §5.7, §5.9).
#[derive(Debug, Clone)]
pub struct JobsConfig {
    pub retention_interval: Duration,
    pub retention_batch: i32,
    pub partition_cleanup_days: i32,
    pub metrics_retention_days: i32,
    pub eviction_interval: Duration,
    pub eviction_batch: i32,
    pub stats_interval: Duration,
    /// Most queues with the reference's per-queue series on `/metrics/prometheus`.
    pub metrics_queue_series_max: usize,
    /// Ephemeral queues (client-surface-2.6.md §10.5): the most payload bytes
    /// all of them may hold together; a push beyond answers `503 ephemeral_unavailable`.
    pub ephemeral_max_bytes: i64,
    /// An implicit (undeclared) ephemeral queue without contents that nothing
    /// pushed to or popped from for this long is collected.
    pub ephemeral_idle: Duration,
    /// Period of the ephemeral collector (idle queues, and each queue's byte count).
    pub ephemeral_sweep_interval: Duration,
}

pub(super) fn read_jobs(r: &Reader<'_>) -> Result<JobsConfig, ConfigError> {
    Ok(JobsConfig {
        retention_interval: r.millis("RETENTION_INTERVAL", defaults::RETENTION_INTERVAL_MS)?,
        retention_batch: r.parsed("RETENTION_BATCH_SIZE", defaults::RETENTION_BATCH_SIZE)?,
        partition_cleanup_days: r
            .parsed("PARTITION_CLEANUP_DAYS", defaults::PARTITION_CLEANUP_DAYS)?,
        metrics_retention_days: r
            .parsed("METRICS_RETENTION_DAYS", defaults::METRICS_RETENTION_DAYS)?,
        eviction_interval: r.millis("EVICTION_INTERVAL", defaults::EVICTION_INTERVAL_MS)?,
        eviction_batch: r.parsed("EVICTION_BATCH_SIZE", defaults::EVICTION_BATCH_SIZE)?,
        stats_interval: r.millis("STATS_INTERVAL_MS", defaults::STATS_INTERVAL_MS)?,
        metrics_queue_series_max: r.parsed(
            "METRICS_QUEUE_SERIES_MAX",
            defaults::METRICS_QUEUE_SERIES_MAX,
        )?,
        ephemeral_max_bytes: i64::try_from(at_least_one(
            "EPHEMERAL_MAX_BYTES",
            r.parsed::<u64>("EPHEMERAL_MAX_BYTES", defaults::EPHEMERAL_MAX_BYTES)?,
        )?)
        .unwrap_or(i64::MAX),
        ephemeral_idle: {
            let secs: u64 = r.parsed("EPHEMERAL_IDLE_SECONDS", defaults::EPHEMERAL_IDLE_SECONDS)?;
            // a pop refreshes a queue's touch at most once a second
            // (ephemeral_pop.sql): a shorter idle period could collect a
            // queue a pop is using
            if secs < 2 {
                return Err(ConfigError::new(
                    "EPHEMERAL_IDLE_SECONDS",
                    secs.to_string(),
                    "must be at least 2",
                ));
            }
            Duration::from_secs(secs)
        },
        ephemeral_sweep_interval: {
            let d = r.millis(
                "EPHEMERAL_SWEEP_INTERVAL_MS",
                defaults::EPHEMERAL_SWEEP_INTERVAL_MS,
            )?;
            if d.is_zero() {
                return Err(ConfigError::new(
                    "EPHEMERAL_SWEEP_INTERVAL_MS",
                    "0",
                    "must be at least 1 ms",
                ));
            }
            d
        },
    })
}
