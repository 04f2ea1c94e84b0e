//! Statistics computed on read: per-partition counts and ingest per minute.

use chrono::{DateTime, Utc};
use tokio_postgres::Row;
use uuid::Uuid;

use crate::store::op::{with_op, DbOp};
use crate::store::{col, rows_into, Store, StoreError};

/// Counts of one partition (see the `queen.partition_stats` view).
#[derive(Debug, Clone)]
pub struct PartitionStats {
    pub queue_id: Uuid,
    pub queue: String,
    pub namespace: String,
    pub task: String,
    pub queue_created_at: DateTime<Utc>,
    pub partition_id: Option<Uuid>,
    pub partition: Option<String>,
    pub created_at: Option<DateTime<Utc>>,
    pub total: i64,
    pub completed: i64,
    pub processing: i64,
    pub dead_letter: i64,
    /// Messages passed over for the queue's ttl and not dead-lettered (the
    /// most any group passed over).
    pub expired: i64,
    pub oldest_message: Option<DateTime<Utc>>,
    pub newest_message: Option<DateTime<Utc>>,
    pub last_consumed_at: Option<DateTime<Utc>>,
}

impl PartitionStats {
    /// Messages neither completed, leased, dead-lettered nor expired.
    pub fn pending(&self) -> i64 {
        (self.total - self.completed - self.processing - self.dead_letter - self.expired).max(0)
    }

    fn from_row(r: &Row) -> Result<Self, StoreError> {
        let consumed: i64 = col(r, "consumed")?;
        let dead_letter: i64 = col(r, "dead_letter")?;
        let expired: i64 = col(r, "expired")?;
        Ok(Self {
            queue_id: col(r, "queue_id")?,
            queue: col(r, "queue")?,
            namespace: col(r, "namespace")?,
            task: col(r, "task")?,
            queue_created_at: col(r, "queue_created_at")?,
            partition_id: col(r, "partition_id")?,
            partition: col(r, "partition")?,
            created_at: col(r, "created_at")?,
            total: col(r, "total")?,
            // a dead-lettered or expired message moved the cursor too; count
            // it once, as dead or expired
            completed: (consumed - dead_letter - expired).max(0),
            processing: col(r, "processing")?,
            dead_letter,
            expired,
            oldest_message: col(r, "oldest_message")?,
            newest_message: col(r, "newest_message")?,
            last_consumed_at: col(r, "last_consumed_at")?,
        })
    }
}

/// The queues a read covers: one by name, those of a namespace and/or a
/// task, or (all `None`) every queue.
#[derive(Debug, Clone, Copy, Default)]
pub struct QueueScope<'a> {
    pub queue: Option<&'a str>,
    pub namespace: Option<&'a str>,
    pub task: Option<&'a str>,
}

impl Store {
    /// Per-partition counts of every queue (or one); queues without partitions
    /// appear once with `partition_id: None`.
    pub async fn partition_stats(
        &self,
        queue: Option<&str>,
    ) -> Result<Vec<PartitionStats>, StoreError> {
        with_op!(self.db, DbOp::Stats, |client| {
            let rows = client
                    .query(
                        "SELECT q.id AS queue_id, q.name AS queue, q.namespace, q.task,
                                q.created_at AS queue_created_at, s.partition_id, s.name AS partition,
                                s.created_at, coalesce(s.total, 0) AS total,
                                coalesce(s.completed, 0) AS consumed,
                                coalesce(s.processing, 0)::bigint AS processing,
                                coalesce(s.dead_letter, 0) AS dead_letter,
                                coalesce(s.expired, 0)::bigint AS expired,
                                s.oldest_message, s.newest_message, s.last_consumed_at
                         FROM queen.queues q
                         LEFT JOIN queen.partition_stats s ON s.queue_id = q.id
                         WHERE ($1::text IS NULL OR q.name = $1)
                         ORDER BY q.created_at DESC, q.name, s.name",
                        &[&queue],
                    )
                    .await?;
            rows_into(&rows, PartitionStats::from_row)
        })
    }

    /// Messages written per minute in a window (optionally one queue).
    pub async fn ingested_per_minute(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        scope: QueueScope<'_>,
    ) -> Result<Vec<(DateTime<Utc>, i64)>, StoreError> {
        with_op!(self.db, DbOp::Stats, |client| {
            let rows = client
                .query(
                    "SELECT date_trunc('minute', s.created_at) AS minute,
                                sum(s.last_offset - s.first_offset + 1)::bigint AS messages
                         FROM queen.segments s
                         JOIN queen.partitions p ON p.id = s.partition_id
                         JOIN queen.queues q ON q.id = p.queue_id
                         WHERE s.created_at >= $1 AND s.created_at <= $2
                           AND ($3::text IS NULL OR q.name = $3)
                           AND ($4::text IS NULL OR q.namespace = $4)
                           AND ($5::text IS NULL OR q.task = $5)
                         GROUP BY 1 ORDER BY 1",
                    &[&from, &to, &scope.queue, &scope.namespace, &scope.task],
                )
                .await?;
            rows_into(&rows, |r| Ok((col(r, "minute")?, col(r, "messages")?)))
        })
    }
}
