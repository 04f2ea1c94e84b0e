//! Cadence and batch sizes of the background jobs: retention, partition
//! cleanup, eviction and per-replica statistics (http-api.md sections 5.7,
//! 5.9).

use std::time::Duration;

use super::defaults;
use super::env::{ConfigError, Reader};

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
    })
}
