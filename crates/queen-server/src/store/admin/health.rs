//! Each replica's health rows (`queen.replica_health`, migration V36): the
//! write of `jobs/health.rs`, the bucketed read of
//! `GET /api/v1/analytics/worker-metrics` and the purge of the retention job.

use chrono::{DateTime, Utc};

use super::SeriesQuery;
use crate::store::jobs::AdvisoryLockGuard;
use crate::store::op::{with_op, DbOp};
use crate::store::{col, rows_into, Store, StoreError};

/// One replica's health over one stats interval.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HealthSample {
    pub loop_lag_avg_ms: f64,
    pub loop_lag_max_ms: f64,
    pub cpu_percent: f64,
    pub rss_bytes: i64,
    pub pool_size: i32,
    pub pool_open: i32,
    pub pool_idle: i32,
    pub pool_waiting: i32,
    pub spool_pending: i64,
}

/// One replica's health in one bucket: means and worst values of its rows.
#[derive(Debug, Clone)]
pub struct HealthPoint {
    pub server_id: String,
    pub bucket: DateTime<Utc>,
    pub loop_lag_avg_ms: f64,
    pub loop_lag_max_ms: f64,
    pub cpu_avg_percent: f64,
    pub cpu_max_percent: f64,
    pub rss_max_bytes: i64,
    pub pool_size: i32,
    /// Most connections in use by a request (open − idle) in one row.
    pub pool_active_max: i32,
    pub pool_open_max: i32,
    pub pool_waiting_max: i32,
    pub spool_pending_max: i64,
    pub samples: i64,
}

impl Store {
    /// Writes one health row of this replica.
    pub async fn write_replica_health(
        &self,
        server_id: &str,
        s: &HealthSample,
    ) -> Result<(), StoreError> {
        with_op!(self.db, DbOp::ReplicaStats, |client| {
            client
                .execute(
                    "INSERT INTO queen.replica_health (server_id, bucket, loop_lag_avg_ms,
                         loop_lag_max_ms, cpu_percent, rss_bytes, pool_size, pool_open,
                         pool_idle, pool_waiting, spool_pending)
                     VALUES ($1, date_trunc('milliseconds', now()), $2, $3, $4, $5, $6, $7, $8, $9, $10)
                     ON CONFLICT (server_id, bucket) DO NOTHING",
                    &[
                        &server_id,
                        &s.loop_lag_avg_ms,
                        &s.loop_lag_max_ms,
                        &s.cpu_percent,
                        &s.rss_bytes,
                        &s.pool_size,
                        &s.pool_open,
                        &s.pool_idle,
                        &s.pool_waiting,
                        &s.spool_pending,
                    ],
                )
                .await?;
            Ok(())
        })
    }

    /// Health per replica per bucket.
    pub async fn worker_health(&self, q: &SeriesQuery) -> Result<Vec<HealthPoint>, StoreError> {
        with_op!(self.db, DbOp::Analytics, |client| {
            let rows = client
                .query(
                    "SELECT server_id,
                            date_bin(make_interval(secs => $3), bucket, 'epoch'::timestamptz) AS ts,
                            avg(loop_lag_avg_ms) AS lag_avg, max(loop_lag_max_ms) AS lag_max,
                            avg(cpu_percent) AS cpu_avg, max(cpu_percent) AS cpu_max,
                            max(rss_bytes) AS rss_max, max(pool_size) AS pool_size,
                            max(pool_open - pool_idle) AS pool_active_max,
                            max(pool_open) AS pool_open_max, max(pool_waiting) AS pool_waiting_max,
                            max(spool_pending) AS spool_pending_max, count(*) AS samples
                     FROM queen.replica_health
                     WHERE bucket >= $1 AND bucket <= $2 AND ($4::text IS NULL OR server_id = $4)
                     GROUP BY 1, 2 ORDER BY 1, 2",
                    &[&q.from, &q.to, &f64::from(q.bucket_secs), &q.server_id],
                )
                .await?;
            rows_into(&rows, |r| {
                Ok(HealthPoint {
                    server_id: col(r, "server_id")?,
                    bucket: col(r, "ts")?,
                    loop_lag_avg_ms: col(r, "lag_avg")?,
                    loop_lag_max_ms: col(r, "lag_max")?,
                    cpu_avg_percent: col(r, "cpu_avg")?,
                    cpu_max_percent: col(r, "cpu_max")?,
                    rss_max_bytes: col(r, "rss_max")?,
                    pool_size: col(r, "pool_size")?,
                    pool_active_max: col(r, "pool_active_max")?,
                    pool_open_max: col(r, "pool_open_max")?,
                    pool_waiting_max: col(r, "pool_waiting_max")?,
                    spool_pending_max: col(r, "spool_pending_max")?,
                    samples: col(r, "samples")?,
                })
            })
        })
    }

    /// Deletes health rows older than `days`.
    pub async fn purge_replica_health(
        &self,
        lock: &AdvisoryLockGuard,
        days: i32,
    ) -> Result<u64, StoreError> {
        with_op!(self.db, DbOp::Retention, on = lock.client(), |client| {
            Ok(client
                .execute(
                    "DELETE FROM queen.replica_health
                         WHERE bucket < now() - make_interval(days => $1)",
                    &[&days],
                )
                .await?)
        })
    }
}
