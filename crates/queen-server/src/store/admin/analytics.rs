//! The metrics history behind `/api/v1/analytics/*`: the per-queue rows the
//! gated part of the stats job writes (`queen.metrics_history`), the
//! per-replica throughput rows (`queen.replica_stats`) and the job runs of
//! retention and eviction (`queen.job_runs`), bucketed on read.

use chrono::{DateTime, Utc};

use crate::store::jobs::AdvisoryLockGuard;
use crate::store::op::{with_op, DbOp};
use crate::store::{col, rows_into, Store, StoreError};

/// A time-series read: the window, the bucket width, optional filters.
#[derive(Debug, Clone)]
pub struct SeriesQuery {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    /// Bucket width in seconds (at least 1).
    pub bucket_secs: i32,
    pub queue: Option<String>,
    /// Queues of one namespace / one task (queue-ops, queue-lag).
    pub namespace: Option<String>,
    pub task: Option<String>,
    /// Replica filter (`workerId` / `hostname`) of the per-replica series.
    pub server_id: Option<String>,
}

/// Operations on one queue in one bucket.
#[derive(Debug, Clone)]
pub struct OpsPoint {
    pub queue: String,
    pub bucket: DateTime<Utc>,
    pub pushed: i64,
    pub popped: i64,
    pub acked: i64,
    pub dead_lettered: i64,
}

/// Lag of one queue in one bucket: the worst and the mean lag of its
/// samples, and the gauges of its newest sample.
#[derive(Debug, Clone)]
pub struct LagPoint {
    pub queue: String,
    pub bucket: DateTime<Utc>,
    pub lag_seconds: f64,
    pub avg_lag_seconds: f64,
    pub offset_lag: i64,
    pub pending: i64,
    pub processing: i64,
}

/// Throughput of one replica in one bucket.
#[derive(Debug, Clone)]
pub struct WorkerPoint {
    pub server_id: String,
    pub bucket: DateTime<Utc>,
    pub pushed: i64,
    pub popped: i64,
    pub acked: i64,
    pub samples: i64,
    pub last_seen: DateTime<Utc>,
}

/// Replicas that had a pop parked on a queue in one bucket.
#[derive(Debug, Clone)]
pub struct ParkedPoint {
    pub queue: String,
    pub bucket: DateTime<Utc>,
    pub replicas: Vec<String>,
}

/// One queue's retention settings.
#[derive(Debug, Clone)]
pub struct QueuePolicy {
    pub queue: String,
    pub retention_enabled: bool,
    pub retention_seconds: i32,
    pub completed_retention_seconds: i32,
    pub ttl: i32,
    pub total: i64,
}

/// One run of a leader-gated job.
#[derive(Debug, Clone)]
pub struct RetentionRun {
    pub job: String,
    pub cycle: i64,
    pub server_id: String,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub affected: i64,
}

impl Store {
    /// One row per queue into `queen.metrics_history`, unless a row younger
    /// than `min_gap_ms` exists; see `queen.record_queue_metrics`.
    pub async fn record_queue_metrics(
        &self,
        lock: &AdvisoryLockGuard,
        min_gap_ms: i64,
    ) -> Result<i32, StoreError> {
        with_op!(self.db, DbOp::Analytics, on = lock.client(), |client| {
            let row = client
                .query_one(
                    "SELECT queen.record_queue_metrics($1) AS written",
                    &[&min_gap_ms],
                )
                .await?;
            col(&row, "written")
        })
    }

    /// Deletes metrics history rows and job runs older than `days`.
    pub async fn purge_metrics_history(
        &self,
        lock: &AdvisoryLockGuard,
        days: i32,
    ) -> Result<u64, StoreError> {
        with_op!(self.db, DbOp::Retention, on = lock.client(), |client| {
            let history = client
                .execute(
                    "DELETE FROM queen.metrics_history
                         WHERE bucket < now() - make_interval(days => $1)",
                    &[&days],
                )
                .await?;
            let runs = client
                .execute(
                    "DELETE FROM queen.job_runs
                         WHERE started_at < now() - make_interval(days => $1)",
                    &[&days],
                )
                .await?;
            Ok(history + runs)
        })
    }

    /// Push, pop, ack and dead-letter counts per queue per bucket.
    pub async fn queue_ops(&self, q: &SeriesQuery) -> Result<Vec<OpsPoint>, StoreError> {
        with_op!(self.db, DbOp::Analytics, |client| {
            let rows = client
                .query(
                    "SELECT queue,
                            date_bin(make_interval(secs => $3), bucket, 'epoch'::timestamptz) AS ts,
                            sum(pushed)::bigint AS pushed, sum(popped)::bigint AS popped,
                            sum(acked)::bigint AS acked, sum(dead_lettered)::bigint AS dead
                     FROM queen.metrics_history
                     WHERE bucket >= $1 AND bucket <= $2 AND ($4::text IS NULL OR queue = $4)
                       AND ($5::text IS NULL AND $6::text IS NULL OR queue IN
                            (SELECT name FROM queen.queues
                             WHERE ($5::text IS NULL OR namespace = $5) AND ($6::text IS NULL OR task = $6)))
                     GROUP BY 1, 2 ORDER BY 1, 2",
                    &[&q.from, &q.to, &f64::from(q.bucket_secs), &q.queue, &q.namespace, &q.task],
                )
                .await?;
            rows_into(&rows, |r| {
                Ok(OpsPoint {
                    queue: col(r, "queue")?,
                    bucket: col(r, "ts")?,
                    pushed: col(r, "pushed")?,
                    popped: col(r, "popped")?,
                    acked: col(r, "acked")?,
                    dead_lettered: col(r, "dead")?,
                })
            })
        })
    }

    /// Lag per queue per bucket.
    pub async fn queue_lag(&self, q: &SeriesQuery) -> Result<Vec<LagPoint>, StoreError> {
        with_op!(self.db, DbOp::Analytics, |client| {
            let rows = client
                .query(
                    "SELECT queue,
                            date_bin(make_interval(secs => $3), bucket, 'epoch'::timestamptz) AS ts,
                            max(lag_seconds) AS lag, avg(lag_seconds) AS avg_lag,
                            (array_agg(offset_lag ORDER BY bucket DESC))[1] AS offset_lag,
                            (array_agg(pending ORDER BY bucket DESC))[1] AS pending,
                            (array_agg(processing ORDER BY bucket DESC))[1] AS processing
                     FROM queen.metrics_history
                     WHERE bucket >= $1 AND bucket <= $2 AND ($4::text IS NULL OR queue = $4)
                       AND ($5::text IS NULL AND $6::text IS NULL OR queue IN
                            (SELECT name FROM queen.queues
                             WHERE ($5::text IS NULL OR namespace = $5) AND ($6::text IS NULL OR task = $6)))
                     GROUP BY 1, 2 ORDER BY 1, 2",
                    &[&q.from, &q.to, &f64::from(q.bucket_secs), &q.queue, &q.namespace, &q.task],
                )
                .await?;
            rows_into(&rows, |r| {
                Ok(LagPoint {
                    queue: col(r, "queue")?,
                    bucket: col(r, "ts")?,
                    lag_seconds: col(r, "lag")?,
                    avg_lag_seconds: col(r, "avg_lag")?,
                    offset_lag: col(r, "offset_lag")?,
                    pending: col(r, "pending")?,
                    processing: col(r, "processing")?,
                })
            })
        })
    }

    /// Throughput per replica per bucket.
    pub async fn worker_metrics(&self, q: &SeriesQuery) -> Result<Vec<WorkerPoint>, StoreError> {
        with_op!(self.db, DbOp::Analytics, |client| {
            let rows = client
                .query(
                    "SELECT server_id,
                            date_bin(make_interval(secs => $3), bucket, 'epoch'::timestamptz) AS ts,
                            sum(pushed)::bigint AS pushed, sum(popped)::bigint AS popped,
                            sum(acked)::bigint AS acked, count(*) AS samples,
                            max(bucket) AS last_seen
                     FROM queen.replica_stats
                     WHERE bucket >= $1 AND bucket <= $2 AND ($4::text IS NULL OR server_id = $4)
                     GROUP BY 1, 2 ORDER BY 1, 2",
                    &[&q.from, &q.to, &f64::from(q.bucket_secs), &q.server_id],
                )
                .await?;
            rows_into(&rows, |r| {
                Ok(WorkerPoint {
                    server_id: col(r, "server_id")?,
                    bucket: col(r, "ts")?,
                    pushed: col(r, "pushed")?,
                    popped: col(r, "popped")?,
                    acked: col(r, "acked")?,
                    samples: col(r, "samples")?,
                    last_seen: col(r, "last_seen")?,
                })
            })
        })
    }

    /// Per queue per bucket, the replicas that reported a parked pop on it.
    pub async fn parked_replicas(&self, q: &SeriesQuery) -> Result<Vec<ParkedPoint>, StoreError> {
        with_op!(self.db, DbOp::Analytics, |client| {
            let rows = client
                .query(
                    "SELECT pq.queue,
                            date_bin(make_interval(secs => $3), rs.bucket, 'epoch'::timestamptz) AS ts,
                            array_agg(DISTINCT rs.server_id ORDER BY rs.server_id) AS replicas
                     FROM queen.replica_stats rs, unnest(rs.parked_queues) AS pq(queue)
                     WHERE rs.bucket >= $1 AND rs.bucket <= $2 AND ($4::text IS NULL OR pq.queue = $4)
                     GROUP BY 1, 2 ORDER BY 1, 2",
                    &[&q.from, &q.to, &f64::from(q.bucket_secs), &q.queue],
                )
                .await?;
            rows_into(&rows, |r| {
                Ok(ParkedPoint {
                    queue: col(r, "queue")?,
                    bucket: col(r, "ts")?,
                    replicas: col(r, "replicas")?,
                })
            })
        })
    }

    /// Retention settings of every queue (or one) with its stored message count.
    pub async fn retention_policies(
        &self,
        queue: Option<&str>,
    ) -> Result<Vec<QueuePolicy>, StoreError> {
        with_op!(self.db, DbOp::Analytics, |client| {
            let rows = client
                .query(
                    "SELECT q.name, q.retention_enabled, q.retention_seconds,
                            q.completed_retention_seconds, q.ttl,
                            coalesce((SELECT sum(p.next_offset - p.low_offset) FROM queen.partitions p
                                      WHERE p.queue_id = q.id), 0)::bigint AS total
                     FROM queen.queues q
                     WHERE ($1::text IS NULL OR q.name = $1)
                     ORDER BY q.name",
                    &[&queue],
                )
                .await?;
            rows_into(&rows, |r| {
                Ok(QueuePolicy {
                    queue: col(r, "name")?,
                    retention_enabled: col(r, "retention_enabled")?,
                    retention_seconds: col(r, "retention_seconds")?,
                    completed_retention_seconds: col(r, "completed_retention_seconds")?,
                    ttl: col(r, "ttl")?,
                    total: col(r, "total")?,
                })
            })
        })
    }

    /// Runs of the retention and eviction jobs that started in the window.
    pub async fn retention_runs(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<RetentionRun>, StoreError> {
        with_op!(self.db, DbOp::Analytics, |client| {
            let rows = client
                .query(
                    "SELECT job, cycle, server_id, started_at, finished_at, affected
                     FROM queen.job_runs
                     WHERE job IN ('retention', 'eviction') AND started_at >= $1 AND started_at <= $2
                     ORDER BY started_at DESC LIMIT 1000",
                    &[&from, &to],
                )
                .await?;
            rows_into(&rows, |r| {
                Ok(RetentionRun {
                    job: col(r, "job")?,
                    cycle: col(r, "cycle")?,
                    server_id: col(r, "server_id")?,
                    started_at: col(r, "started_at")?,
                    finished_at: col(r, "finished_at")?,
                    affected: col(r, "affected")?,
                })
            })
        })
    }
}
