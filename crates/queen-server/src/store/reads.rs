//! Reads that move nothing (issue 21): records by offset (`queen.fetch_records`),
//! partition discovery with a safe time, queue depth, and the move of a dead
//! letter back to the tail of its partition.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::op::{with_op, DbOp};
use super::push::append_with;
use super::{col, rows_into, AppendStatus, NewMessage, Store, StoreError};

/// One entry of a fetch, wire offsets.
#[derive(Debug, Clone)]
pub struct FetchEntry {
    pub queue: String,
    pub partition: String,
    pub offset: i64,
    pub max_bytes: i64,
}

/// One record read by offset; `payload` as stored (the broker decrypts it).
#[derive(Debug, Clone)]
pub struct FetchedRecord {
    pub offset: i64,
    pub transaction_id: String,
    pub payload: String,
    pub ts: DateTime<Utc>,
}

/// What a fetch read of one entry.
#[derive(Debug, Clone, Default)]
pub struct FetchedEntry {
    /// The queue does not exist.
    pub unknown_queue: bool,
    pub high_watermark: i64,
    pub log_start: i64,
    pub records: Vec<FetchedRecord>,
}

/// One partition of a discovery page.
#[derive(Debug, Clone)]
pub struct ChangedPartition {
    pub id: Uuid,
    pub name: String,
    /// Wire offset of the last record, -1 when none.
    pub last_offset: i64,
    pub log_start: i64,
    pub last_write_at: Option<DateTime<Utc>>,
}

/// Where a discovery page starts.
#[derive(Debug, Clone)]
pub enum ChangedAfter {
    /// Every partition, by name, after this name.
    Name(String),
    /// Partitions written at or after `since`, by (last write, name), after these.
    Written(DateTime<Utc>, String),
}

/// One discovery page.
#[derive(Debug, Clone)]
pub struct ChangedPage {
    /// `None`: the queue does not exist.
    pub partitions: Option<Vec<ChangedPartition>>,
}

/// The time up to which a discovery answer counts every write.
#[derive(Debug, Clone, Copy)]
pub struct SafeTime {
    pub at: DateTime<Utc>,
    /// Some transaction of the database was not visible to the broker's role:
    /// `at` is then a fixed guard before now.
    pub degraded: bool,
}

/// Backlog of one partition for the chosen cursor.
#[derive(Debug, Clone)]
pub struct PartitionDepth {
    pub partition: String,
    pub pending: i64,
    pub processing: i64,
}

/// What a dead-letter retry did.
#[derive(Debug, Clone)]
pub enum RetryOutcome {
    /// No dead letter of that partition and transactionId.
    Gone,
    Moved(RetriedLetter),
    /// `dlq:<id>` is already in the partition: nothing written, row kept.
    Duplicate(RetriedLetter),
}

/// The dead letter a retry moved, and the message it became.
#[derive(Debug, Clone)]
pub struct RetriedLetter {
    pub dlq_id: i64,
    pub queue: String,
    pub partition: String,
    pub consumer_group: String,
    pub original_transaction_id: String,
    pub message_id: Uuid,
    pub transaction_id: String,
    /// Wire offset of the new message (of the existing one for a duplicate).
    pub offset: i64,
}

/// Transactions older than this cannot be seen: the safe time falls back to
/// now minus this guard.
const DEGRADED_GUARD_SECONDS: f64 = 30.0;

impl Store {
    /// Reads records by offset, one snapshot for the whole call.
    pub async fn fetch(
        &self,
        entries: &[FetchEntry],
        call_max_bytes: i64,
        max_records: i32,
    ) -> Result<Vec<FetchedEntry>, StoreError> {
        let queues: Vec<&str> = entries.iter().map(|e| e.queue.as_str()).collect();
        let partitions: Vec<&str> = entries.iter().map(|e| e.partition.as_str()).collect();
        let offsets: Vec<i64> = entries.iter().map(|e| e.offset).collect();
        let budgets: Vec<i64> = entries.iter().map(|e| e.max_bytes).collect();
        with_op!(self.db, DbOp::Reads, |client| {
            let rows = client
                .query(
                    "SELECT idx, kind, high, low, msg_offset, transaction_id, payload, created_at
                     FROM queen.fetch_records($1, $2, $3, $4, $5, $6)",
                    &[
                        &queues,
                        &partitions,
                        &offsets,
                        &budgets,
                        &call_max_bytes,
                        &max_records,
                    ],
                )
                .await?;
            let mut out = vec![FetchedEntry::default(); entries.len()];
            for r in &rows {
                let idx: i32 = col(r, "idx")?;
                let Some(entry) = usize::try_from(idx - 1).ok().and_then(|i| out.get_mut(i)) else {
                    continue;
                };
                let kind: &str = col(r, "kind")?;
                match kind {
                    "unknown_queue" => entry.unknown_queue = true,
                    "bounds" => {
                        entry.high_watermark = col(r, "high")?;
                        entry.log_start = col(r, "low")?;
                    }
                    _ => entry.records.push(FetchedRecord {
                        offset: col(r, "msg_offset")?,
                        transaction_id: col(r, "transaction_id")?,
                        payload: col(r, "payload")?,
                        ts: col(r, "created_at")?,
                    }),
                }
            }
            Ok(out)
        })
    }

    /// The safe time of a discovery answer: the start of this statement, or
    /// the start of the oldest other transaction of this database if earlier.
    /// A push's segment time is taken inside its transaction, so a write not
    /// yet committed when the page is read cannot be stamped before it.
    pub async fn safe_time(&self) -> Result<SafeTime, StoreError> {
        with_op!(self.db, DbOp::Reads, |client| {
            let row = client
                .query_one(
                    "SELECT statement_timestamp() AS now,
                            min(a.xact_start) AS oldest,
                            coalesce(bool_or(a.xact_start IS NULL AND a.state IS NULL), false) AS hidden
                     FROM pg_stat_activity a
                     WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
                       AND a.backend_type = 'client backend'",
                    &[],
                )
                .await?;
            let now: DateTime<Utc> = col(&row, "now")?;
            let oldest: Option<DateTime<Utc>> = col(&row, "oldest")?;
            let hidden: bool = col(&row, "hidden")?;
            if hidden {
                let guard =
                    chrono::Duration::milliseconds((DEGRADED_GUARD_SECONDS * 1000.0) as i64);
                return Ok(SafeTime {
                    at: now - guard,
                    degraded: true,
                });
            }
            Ok(SafeTime {
                at: oldest.map_or(now, |o| o.min(now)),
                degraded: false,
            })
        })
    }

    /// One page of a queue's partitions: all of them by name, or those
    /// written at or after `since` by (last write, name).
    pub async fn changed_partitions(
        &self,
        queue: &str,
        since: Option<DateTime<Utc>>,
        after: Option<&ChangedAfter>,
        limit: i64,
    ) -> Result<ChangedPage, StoreError> {
        with_op!(self.db, DbOp::Reads, |client| {
            let Some(q) = client
                .query_opt("SELECT id FROM queen.queues WHERE name = $1", &[&queue])
                .await?
            else {
                return Ok(ChangedPage { partitions: None });
            };
            let queue_id: Uuid = col(&q, "id")?;
            let (after_name, after_time) = match after {
                None => (None, None),
                Some(ChangedAfter::Name(n)) => (Some(n.as_str()), None),
                Some(ChangedAfter::Written(t, n)) => (Some(n.as_str()), Some(*t)),
            };
            let rows = if let Some(since) = since {
                client
                    .query(
                        "SELECT id, name, next_offset, low_offset, last_created_at
                         FROM queen.partitions
                         WHERE queue_id = $1 AND last_created_at >= $2
                           AND ($3::timestamptz IS NULL OR (last_created_at, name) > ($3, $4::text))
                         ORDER BY last_created_at, name LIMIT $5",
                        &[&queue_id, &since, &after_time, &after_name, &limit],
                    )
                    .await?
            } else {
                client
                    .query(
                        "SELECT id, name, next_offset, low_offset, last_created_at
                         FROM queen.partitions
                         WHERE queue_id = $1 AND ($2::text IS NULL OR name > $2)
                         ORDER BY name LIMIT $3",
                        &[&queue_id, &after_name, &limit],
                    )
                    .await?
            };
            let partitions = rows_into(&rows, |r| {
                let next: i64 = col(r, "next_offset")?;
                let low: i64 = col(r, "low_offset")?;
                Ok(ChangedPartition {
                    id: col(r, "id")?,
                    name: col(r, "name")?,
                    last_offset: next - 2,
                    log_start: low - 1,
                    last_write_at: col(r, "last_created_at")?,
                })
            })?;
            Ok(ChangedPage {
                partitions: Some(partitions),
            })
        })
    }

    /// Backlog per partition of a queue, sorted by name; `None` for an
    /// unknown queue. With `group`, that group's cursor; without, the lowest
    /// cursor of the queue's named groups (a named group without a cursor on
    /// a partition has consumed nothing there), else the queue-mode cursor.
    /// No cursor at all: everything retained is pending.
    pub async fn queue_depth(
        &self,
        queue: &str,
        group: Option<&str>,
    ) -> Result<Option<Vec<PartitionDepth>>, StoreError> {
        with_op!(self.db, DbOp::Reads, |client| {
            let Some(q) = client
                .query_opt("SELECT id FROM queen.queues WHERE name = $1", &[&queue])
                .await?
            else {
                return Ok(None);
            };
            let queue_id: Uuid = col(&q, "id")?;
            let rows = client
                .query(
                    "WITH named AS (
                         SELECT DISTINCT lc.consumer_group
                         FROM queen.log_consumers lc JOIN queen.partitions p ON p.id = lc.partition_id
                         WHERE p.queue_id = $1 AND lc.consumer_group <> '__QUEUE_MODE__'
                     )
                     SELECT p.name, p.next_offset, p.low_offset, c.committed, c.processing
                     FROM queen.partitions p
                     LEFT JOIN LATERAL (
                         SELECT CASE
                                  WHEN $2::text IS NOT NULL THEN
                                    (SELECT lc.committed_offset FROM queen.log_consumers lc
                                      WHERE lc.partition_id = p.id AND lc.consumer_group = $2)
                                  WHEN EXISTS (SELECT 1 FROM named) THEN
                                    (SELECT CASE WHEN bool_or(lc.committed_offset IS NULL) THEN NULL
                                                 ELSE min(lc.committed_offset) END
                                       FROM named n
                                       LEFT JOIN queen.log_consumers lc
                                         ON lc.partition_id = p.id AND lc.consumer_group = n.consumer_group)
                                  ELSE
                                    (SELECT lc.committed_offset FROM queen.log_consumers lc
                                      WHERE lc.partition_id = p.id AND lc.consumer_group = '__QUEUE_MODE__')
                                END AS committed,
                                (SELECT coalesce(max(greatest(lc.lease_end_offset - lc.committed_offset, 0)), 0)
                                   FROM queen.log_consumers lc
                                  WHERE lc.partition_id = p.id AND lc.lease_expires_at > now()
                                    AND lc.consumer_group = coalesce($2, lc.consumer_group)
                                    AND ($2::text IS NOT NULL OR NOT EXISTS (SELECT 1 FROM named)
                                         OR lc.consumer_group <> '__QUEUE_MODE__')
                                    AND ($2::text IS NOT NULL OR EXISTS (SELECT 1 FROM named)
                                         OR lc.consumer_group = '__QUEUE_MODE__')) AS processing
                     ) c ON true
                     WHERE p.queue_id = $1
                     ORDER BY p.name",
                    &[&queue_id, &group],
                )
                .await?;
            let parts = rows_into(&rows, |r| {
                let next: i64 = col(r, "next_offset")?;
                let low: i64 = col(r, "low_offset")?;
                let committed: Option<i64> = col(r, "committed")?;
                let processing: i64 = col(r, "processing")?;
                let last = next - 1;
                let cursor = committed.unwrap_or(low - 1).max(low - 1);
                let pending = (last - cursor).max(0);
                Ok(PartitionDepth {
                    partition: col(r, "name")?,
                    pending,
                    processing: processing.min(pending),
                })
            })?;
            Ok(Some(parts))
        })
    }

    /// Moves the oldest dead letter of (partition, transactionId) back to the
    /// tail of its partition as a new message with transactionId
    /// `dlq:<row id>`, and deletes the row, in one transaction.
    pub async fn retry_dead_letter(
        &self,
        partition_id: Uuid,
        transaction_id: &str,
    ) -> Result<RetryOutcome, StoreError> {
        with_op!(self.db, DbOp::RetryDeadLetter, |client| {
            let tx = client.transaction().await?;
            let Some(row) = tx
                .query_opt(
                    "SELECT d.id, d.consumer_group, d.transaction_id, d.trace_id, d.payload,
                            d.producer_sub, p.queue_id, p.name AS partition, q.name AS queue
                     FROM queen.dead_letters d
                     JOIN queen.partitions p ON p.id = d.partition_id
                     JOIN queen.queues q ON q.id = p.queue_id
                     WHERE d.partition_id = $1 AND d.transaction_id = $2
                     ORDER BY d.id LIMIT 1
                     FOR UPDATE OF d",
                    &[&partition_id, &transaction_id],
                )
                .await?
            else {
                return Ok(RetryOutcome::Gone);
            };
            let dlq_id: i64 = col(&row, "id")?;
            let new_txn = format!("dlq:{dlq_id}");
            let partition: String = col(&row, "partition")?;
            let message = NewMessage {
                queue_id: col(&row, "queue_id")?,
                partition: partition.clone(),
                message_id: Uuid::now_v7(),
                transaction_id: new_txn.clone(),
                trace_id: col(&row, "trace_id")?,
                payload: col(&row, "payload")?,
                producer_sub: col(&row, "producer_sub")?,
            };
            let queued = append_with(&tx, std::slice::from_ref(&message), false)
                .await?
                .first()
                .is_some_and(|o| o.status == AppendStatus::Queued);
            // the message the key names: the new one, or the one already there
            let key = tx
                .query_one(
                    "SELECT msg_offset, message_id FROM queen.message_keys
                     WHERE partition_id = $1 AND transaction_id = $2",
                    &[&partition_id, &new_txn],
                )
                .await?;
            let offset: i64 = col(&key, "msg_offset")?;
            let letter = RetriedLetter {
                dlq_id,
                queue: col(&row, "queue")?,
                partition,
                consumer_group: col(&row, "consumer_group")?,
                original_transaction_id: col(&row, "transaction_id")?,
                message_id: col(&key, "message_id")?,
                transaction_id: new_txn,
                offset: offset - 1,
            };
            if !queued {
                // nothing was written; the row stays
                tx.rollback().await?;
                return Ok(RetryOutcome::Duplicate(letter));
            }
            tx.execute("DELETE FROM queen.dead_letters WHERE id = $1", &[&dlq_id])
                .await?;
            tx.commit().await?;
            Ok(RetryOutcome::Moved(letter))
        })
    }
}
