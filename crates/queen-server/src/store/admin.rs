//! Reads and admin writes of the ADMIN/SECONDARY routes: DLQ, traces,
//! consumer groups, statistics, single messages, cluster flags.

use chrono::{DateTime, Utc};
use tokio_postgres::Row;
use uuid::Uuid;

use super::{Store, StoreError};

/// A dead-lettered message.
#[derive(Debug, Clone)]
pub struct DeadLetter {
    pub message_id: Uuid,
    pub transaction_id: String,
    pub partition_id: Uuid,
    pub queue: String,
    pub partition: String,
    pub consumer_group: String,
    pub error_message: Option<String>,
    pub retry_count: i32,
    pub payload: String,
    pub producer_sub: Option<String>,
    pub created_at: DateTime<Utc>,
    pub failed_at: DateTime<Utc>,
}

/// Filters of the DLQ listing; `None` means no filter.
#[derive(Debug, Clone, Default)]
pub struct DeadLetterFilter {
    pub queue: Option<String>,
    pub consumer_group: Option<String>,
    pub partition: Option<String>,
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
    pub limit: i64,
    pub offset: i64,
}

/// A trace event, with the message it belongs to.
#[derive(Debug, Clone)]
pub struct Trace {
    pub id: Uuid,
    pub partition_id: Uuid,
    pub transaction_id: String,
    pub consumer_group: String,
    pub event_type: String,
    pub data: String,
    pub trace_names: Vec<String>,
    pub worker_id: Option<String>,
    pub created_at: DateTime<Utc>,
    pub queue: Option<String>,
    pub partition: Option<String>,
    pub message_payload: Option<String>,
}

/// A trace name with its counts.
#[derive(Debug, Clone)]
pub struct TraceName {
    pub name: String,
    pub trace_count: i64,
    pub message_count: i64,
    pub last_seen: DateTime<Utc>,
}

/// One consumer cursor with what lies ahead of it.
#[derive(Debug, Clone)]
pub struct Cursor {
    pub consumer_group: String,
    pub queue: String,
    pub partition: String,
    pub partition_id: Uuid,
    pub offset_lag: i64,
    pub oldest_unconsumed_at: Option<DateTime<Utc>>,
    pub last_consumed_at: Option<DateTime<Utc>>,
    pub total_consumed: i64,
    pub lease_active: bool,
    pub lease_holder: Option<String>,
}

/// A stored subscription of a group on a queue.
#[derive(Debug, Clone)]
pub struct Subscription {
    pub consumer_group: String,
    pub queue: String,
    pub mode: String,
    pub timestamp: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
}

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
    pub oldest_message: Option<DateTime<Utc>>,
    pub newest_message: Option<DateTime<Utc>>,
    pub last_consumed_at: Option<DateTime<Utc>>,
}

impl PartitionStats {
    /// Messages neither completed, leased nor dead-lettered.
    pub fn pending(&self) -> i64 {
        (self.total - self.completed - self.processing - self.dead_letter).max(0)
    }
}

/// Filters of the message listing.
#[derive(Debug, Clone, Default)]
pub struct MessageFilter {
    pub queue: Option<String>,
    pub partition: Option<String>,
    pub namespace: Option<String>,
    pub task: Option<String>,
    pub status: Option<String>,
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
    pub limit: i64,
    pub offset: i64,
}

/// A message as the admin API lists it (no payload).
#[derive(Debug, Clone)]
pub struct MessageSummary {
    pub message_id: Uuid,
    pub transaction_id: String,
    pub partition_id: Uuid,
    pub queue: String,
    pub partition: String,
    pub namespace: String,
    pub task: String,
    pub status: String,
    pub trace_id: Option<Uuid>,
    pub producer_sub: Option<String>,
    pub priority: i32,
    pub created_at: DateTime<Utc>,
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub consumed_by: i64,
    pub bus_groups: i64,
    pub has_queue_mode: bool,
}

/// A message with its payload and per-group state.
#[derive(Debug, Clone)]
pub struct MessageDetail {
    pub summary: MessageSummary,
    pub payload: String,
    pub error_message: Option<String>,
    pub retry_count: i32,
    pub lease_time: i32,
    pub retry_limit: i32,
    pub retry_delay: i32,
    pub ttl: i32,
    /// (group, consumed, lease expiry)
    pub groups: Vec<(String, bool, Option<DateTime<Utc>>)>,
}

const MESSAGE_SUMMARY_SQL: &str = "
    SELECT m.message_id, m.transaction_id, p.id AS partition_id, q.name AS queue, p.name AS partition,
           q.namespace, q.task, queen.message_status(p.id, m.off) AS status, m.trace_id,
           m.producer_sub, q.priority, m.created_at, qm.lease_expires_at,
           (SELECT count(*) FROM queen.log_consumers lc
             WHERE lc.partition_id = p.id AND lc.consumer_group <> '__QUEUE_MODE__'
               AND lc.committed_offset >= m.off) AS consumed_by,
           (SELECT count(*) FROM queen.log_consumers lc
             WHERE lc.partition_id = p.id AND lc.consumer_group <> '__QUEUE_MODE__') AS bus_groups,
           (qm.partition_id IS NOT NULL) AS has_queue_mode,
           m.payload, m.off
    FROM messages m
    JOIN queen.partitions p ON p.id = m.partition_id
    JOIN queen.queues q ON q.id = p.queue_id
    LEFT JOIN queen.log_consumers qm
           ON qm.partition_id = p.id AND qm.consumer_group = '__QUEUE_MODE__'
                                     AND qm.lease_expires_at > now() AND qm.lease_end_offset >= m.off
                                     AND qm.committed_offset < m.off";

fn summary_from_row(r: &Row) -> MessageSummary {
    MessageSummary {
        message_id: r.get("message_id"),
        transaction_id: r.get("transaction_id"),
        partition_id: r.get("partition_id"),
        queue: r.get("queue"),
        partition: r.get("partition"),
        namespace: r.get("namespace"),
        task: r.get("task"),
        status: r.get("status"),
        trace_id: r.get("trace_id"),
        producer_sub: r.get("producer_sub"),
        priority: r.get("priority"),
        created_at: r.get("created_at"),
        lease_expires_at: r.get("lease_expires_at"),
        consumed_by: r.get("consumed_by"),
        bus_groups: r.get("bus_groups"),
        has_queue_mode: r.get("has_queue_mode"),
    }
}

fn trace_from_row(r: &Row) -> Trace {
    Trace {
        id: r.get("id"),
        partition_id: r.get("partition_id"),
        transaction_id: r.get("transaction_id"),
        consumer_group: r.get("consumer_group"),
        event_type: r.get("event_type"),
        data: r.get("data"),
        trace_names: r.get("trace_names"),
        worker_id: r.get("worker_id"),
        created_at: r.get("created_at"),
        queue: r.get("queue"),
        partition: r.get("partition"),
        message_payload: r.get("message_payload"),
    }
}

const TRACE_SQL: &str = "
    SELECT t.id, t.partition_id, t.transaction_id, t.consumer_group, t.event_type, t.data::text AS data,
           t.trace_names, t.worker_id, t.created_at, q.name AS queue, p.name AS partition,
           (SELECT ma.payload FROM queen.message_keys k, LATERAL queen.message_at(k.partition_id, k.msg_offset) ma
             WHERE k.partition_id = t.partition_id AND k.transaction_id = t.transaction_id) AS message_payload
    FROM queen.message_traces t
    LEFT JOIN queen.partitions p ON p.id = t.partition_id
    LEFT JOIN queen.queues q ON q.id = p.queue_id";

impl Store {
    /// Lists dead letters, newest first, with the total matching the filters.
    pub async fn list_dead_letters(
        &self,
        f: &DeadLetterFilter,
    ) -> Result<(Vec<DeadLetter>, i64), StoreError> {
        let client = self.client().await?;
        let filter = "FROM queen.dead_letters d
             JOIN queen.partitions p ON p.id = d.partition_id
             JOIN queen.queues q ON q.id = p.queue_id
             WHERE ($1::text IS NULL OR q.name = $1) AND ($2::text IS NULL OR d.consumer_group = $2)
               AND ($3::text IS NULL OR p.name = $3)
               AND ($4::timestamptz IS NULL OR d.failed_at >= $4)
               AND ($5::timestamptz IS NULL OR d.failed_at <= $5)";
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
            [&f.queue, &f.consumer_group, &f.partition, &f.from, &f.to];
        let total: i64 = client
            .query_one(&format!("SELECT count(*) {filter}"), &params)
            .await?
            .get(0);
        let sql = format!(
            "SELECT d.message_id, d.transaction_id, d.partition_id, q.name, p.name, d.consumer_group,
                    d.error_message, d.retry_count, d.payload, d.producer_sub,
                    d.original_created_at, d.failed_at
             {filter} ORDER BY d.failed_at DESC, d.id DESC LIMIT $6 OFFSET $7"
        );
        let rows = client
            .query(
                &sql,
                &[
                    &f.queue,
                    &f.consumer_group,
                    &f.partition,
                    &f.from,
                    &f.to,
                    &f.limit,
                    &f.offset,
                ],
            )
            .await?;
        let entries = rows
            .iter()
            .map(|r| DeadLetter {
                message_id: r.get(0),
                transaction_id: r.get(1),
                partition_id: r.get(2),
                queue: r.get(3),
                partition: r.get(4),
                consumer_group: r.get(5),
                error_message: r.get(6),
                retry_count: r.get(7),
                payload: r.get(8),
                producer_sub: r.get(9),
                created_at: r.get(10),
                failed_at: r.get(11),
            })
            .collect();
        Ok((entries, total))
    }

    /// Records a trace event on a message; false if the message is unknown.
    #[expect(clippy::too_many_arguments, reason = "one column per argument")]
    pub async fn insert_trace(
        &self,
        id: Uuid,
        partition_id: Uuid,
        transaction_id: &str,
        consumer_group: &str,
        event_type: &str,
        data_json: &str,
        names: &[String],
        worker_id: &str,
    ) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let n = client
            .execute(
                "INSERT INTO queen.message_traces
                     (id, partition_id, transaction_id, consumer_group, event_type, data, trace_names, worker_id)
                 SELECT $1, $2, $3, $4, $5, $6::text::jsonb, $7, $8
                 WHERE EXISTS (SELECT 1 FROM queen.message_keys k
                               WHERE k.partition_id = $2 AND k.transaction_id = $3)",
                &[
                    &id,
                    &partition_id,
                    &transaction_id,
                    &consumer_group,
                    &event_type,
                    &data_json,
                    &names,
                    &worker_id,
                ],
            )
            .await?;
        Ok(n == 1)
    }

    /// Trace events of one message, oldest first.
    pub async fn traces_of_message(
        &self,
        partition_id: Uuid,
        transaction_id: &str,
    ) -> Result<Vec<Trace>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                &format!(
                    "{TRACE_SQL} WHERE t.partition_id = $1 AND t.transaction_id = $2
                     ORDER BY t.created_at, t.id"
                ),
                &[&partition_id, &transaction_id],
            )
            .await?;
        Ok(rows.iter().map(trace_from_row).collect())
    }

    /// Trace events carrying `name`, newest first, with their total.
    pub async fn traces_by_name(
        &self,
        name: &str,
        limit: i64,
        offset: i64,
    ) -> Result<(Vec<Trace>, i64), StoreError> {
        let client = self.client().await?;
        let total: i64 = client
            .query_one(
                "SELECT count(*) FROM queen.message_traces WHERE $1 = ANY (trace_names)",
                &[&name],
            )
            .await?
            .get(0);
        let rows = client
            .query(
                &format!(
                    "{TRACE_SQL} WHERE $1 = ANY (t.trace_names)
                     ORDER BY t.created_at DESC, t.id DESC LIMIT $2 OFFSET $3"
                ),
                &[&name, &limit, &offset],
            )
            .await?;
        Ok((rows.iter().map(trace_from_row).collect(), total))
    }

    /// Trace names with counts, most recently seen first, with their total.
    pub async fn trace_names(
        &self,
        limit: i64,
        offset: i64,
    ) -> Result<(Vec<TraceName>, i64), StoreError> {
        let client = self.client().await?;
        let total: i64 = client
            .query_one(
                "SELECT count(DISTINCT n) FROM queen.message_traces, unnest(trace_names) n",
                &[],
            )
            .await?
            .get(0);
        let rows = client
            .query(
                "SELECT n, count(*), count(DISTINCT (partition_id, transaction_id)), max(created_at)
                 FROM queen.message_traces, unnest(trace_names) n
                 GROUP BY n ORDER BY max(created_at) DESC, n LIMIT $1 OFFSET $2",
                &[&limit, &offset],
            )
            .await?;
        let names = rows
            .iter()
            .map(|r| TraceName {
                name: r.get(0),
                trace_count: r.get(1),
                message_count: r.get(2),
                last_seen: r.get(3),
            })
            .collect();
        Ok((names, total))
    }

    /// Deletes a group's cursors (on one queue, or on all) and optionally its
    /// stored subscriptions. Returns the number of cursors deleted.
    pub async fn delete_consumer_group(
        &self,
        group: &str,
        queue: Option<&str>,
        delete_metadata: bool,
    ) -> Result<u64, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let deleted = tx
            .execute(
                "DELETE FROM queen.log_consumers lc USING queen.partitions p, queen.queues q
                 WHERE lc.partition_id = p.id AND p.queue_id = q.id
                   AND lc.consumer_group = $1 AND ($2::text IS NULL OR q.name = $2)",
                &[&group, &queue],
            )
            .await?;
        if delete_metadata {
            tx.execute(
                "DELETE FROM queen.consumer_subscriptions
                 WHERE consumer_group = $1 AND ($2::text IS NULL OR queue_name = $2)",
                &[&group, &queue],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(deleted)
    }

    /// Rewrites the stored subscription timestamp of a group on every queue.
    pub async fn update_subscription_timestamp(
        &self,
        group: &str,
        at: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        let client = self.client().await?;
        Ok(client
            .execute(
                "UPDATE queen.consumer_subscriptions SET subscription_timestamp = $2
                 WHERE consumer_group = $1",
                &[&group, &at],
            )
            .await?)
    }

    /// Every cursor (of one group, or of all), with its lag.
    pub async fn cursors(&self, group: Option<&str>) -> Result<Vec<Cursor>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT lc.consumer_group, q.name, p.name, p.id,
                        greatest(p.next_offset - 1 - greatest(lc.committed_offset, p.low_offset - 1), 0),
                        queen.oldest_after(p.id, greatest(lc.committed_offset, p.low_offset - 1)),
                        lc.last_consumed_at, lc.total_consumed,
                        coalesce(lc.lease_expires_at > now(), false), lc.lease_holder
                 FROM queen.log_consumers lc
                 JOIN queen.partitions p ON p.id = lc.partition_id
                 JOIN queen.queues q ON q.id = p.queue_id
                 WHERE ($1::text IS NULL OR lc.consumer_group = $1)
                 ORDER BY lc.consumer_group, q.name, p.name",
                &[&group],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| Cursor {
                consumer_group: r.get(0),
                queue: r.get(1),
                partition: r.get(2),
                partition_id: r.get(3),
                offset_lag: r.get(4),
                oldest_unconsumed_at: r.get(5),
                last_consumed_at: r.get(6),
                total_consumed: r.get(7),
                lease_active: r.get(8),
                lease_holder: r.get(9),
            })
            .collect())
    }

    /// Stored subscriptions (queue-wide and per partition).
    pub async fn subscriptions(&self) -> Result<Vec<Subscription>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT consumer_group, queue_name, subscription_mode, subscription_timestamp, created_at
                 FROM queen.consumer_subscriptions ORDER BY consumer_group, queue_name, partition_name",
                &[],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| Subscription {
                consumer_group: r.get(0),
                queue: r.get(1),
                mode: r.get(2),
                timestamp: r.get(3),
                created_at: r.get(4),
            })
            .collect())
    }

    /// Moves a group's existing cursors on a queue; see `queen.seek`.
    /// Returns (partition, new committed offset) per cursor moved.
    pub async fn seek(
        &self,
        group: &str,
        queue_id: Uuid,
        partition: Option<&str>,
        to_end: bool,
        at: Option<DateTime<Utc>>,
    ) -> Result<Vec<(String, i64)>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT partition_name, committed_offset FROM queen.seek($1, $2, $3, $4, $5)",
                &[&group, &queue_id, &partition, &to_end, &at],
            )
            .await?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    /// Per-partition counts of every queue (or one); queues without partitions
    /// appear once with `partition_id: None`.
    pub async fn partition_stats(
        &self,
        queue: Option<&str>,
    ) -> Result<Vec<PartitionStats>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT q.id, q.name, q.namespace, q.task, q.created_at, s.partition_id, s.name,
                        s.created_at, coalesce(s.total, 0), coalesce(s.completed, 0),
                        coalesce(s.processing, 0)::bigint, coalesce(s.dead_letter, 0),
                        s.oldest_message, s.newest_message, s.last_consumed_at
                 FROM queen.queues q
                 LEFT JOIN queen.partition_stats s ON s.queue_id = q.id
                 WHERE ($1::text IS NULL OR q.name = $1)
                 ORDER BY q.created_at DESC, q.name, s.name",
                &[&queue],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| PartitionStats {
                queue_id: r.get(0),
                queue: r.get(1),
                namespace: r.get(2),
                task: r.get(3),
                queue_created_at: r.get(4),
                partition_id: r.get(5),
                partition: r.get(6),
                created_at: r.get(7),
                total: r.get(8),
                // a dead-lettered message moved the cursor too; count it once, as dead
                completed: (r.get::<_, i64>(9) - r.get::<_, i64>(11)).max(0),
                processing: r.get(10),
                dead_letter: r.get(11),
                oldest_message: r.get(12),
                newest_message: r.get(13),
                last_consumed_at: r.get(14),
            })
            .collect())
    }

    /// Lists messages, newest first, within the filter's time window.
    pub async fn list_messages(
        &self,
        f: &MessageFilter,
    ) -> Result<Vec<MessageSummary>, StoreError> {
        let client = self.client().await?;
        let sql = format!(
            "WITH messages AS (
                 SELECT s.partition_id, s.first_offset + u.n - 1 AS off, u.message_id, u.transaction_id,
                        u.trace_id, u.producer_sub, NULL::text AS payload, s.created_at
                 FROM queen.segments s
                 JOIN queen.partitions p ON p.id = s.partition_id
                 JOIN queen.queues q ON q.id = p.queue_id
                 CROSS JOIN LATERAL unnest(s.message_ids, s.transaction_ids, s.trace_ids,
                     coalesce(s.producer_subs, array_fill(NULL::text, ARRAY[cardinality(s.message_ids)])))
                     WITH ORDINALITY AS u(message_id, transaction_id, trace_id, producer_sub, n)
                 WHERE s.created_at >= $1 AND s.created_at <= $2
                   AND ($3::text IS NULL OR q.name = $3) AND ($4::text IS NULL OR p.name = $4)
                   AND ($5::text IS NULL OR q.namespace = $5) AND ($6::text IS NULL OR q.task = $6)
                   AND NOT (coalesce(s.first_offset + u.n - 1 = ANY (s.deleted_offsets), false))
             )
             SELECT * FROM ({MESSAGE_SUMMARY_SQL}) x
             WHERE ($7::text IS NULL OR x.status = $7)
             ORDER BY x.created_at DESC, x.off DESC LIMIT $8 OFFSET $9"
        );
        let rows = client
            .query(
                &sql,
                &[
                    &f.from,
                    &f.to,
                    &f.queue,
                    &f.partition,
                    &f.namespace,
                    &f.task,
                    &f.status,
                    &f.limit,
                    &f.offset,
                ],
            )
            .await?;
        Ok(rows.iter().map(summary_from_row).collect())
    }

    /// One message with payload and per-group state; `None` if unknown.
    pub async fn message_detail(
        &self,
        partition_id: Uuid,
        transaction_id: &str,
    ) -> Result<Option<MessageDetail>, StoreError> {
        let client = self.client().await?;
        let sql = format!(
            "WITH messages AS (
                 SELECT k.partition_id, k.msg_offset AS off, ma.message_id, ma.transaction_id,
                        ma.trace_id, ma.producer_sub, ma.payload, ma.created_at
                 FROM queen.message_keys k, LATERAL queen.message_at(k.partition_id, k.msg_offset) ma
                 WHERE k.partition_id = $1 AND k.transaction_id = $2
             )
             {MESSAGE_SUMMARY_SQL}"
        );
        let Some(row) = client
            .query_opt(&sql, &[&partition_id, &transaction_id])
            .await?
        else {
            return Ok(None);
        };
        let summary = summary_from_row(&row);
        let offset: i64 = row.get("off");
        let payload: String = row.get("payload");
        let queue = client
            .query_one(
                "SELECT q.lease_time, q.retry_limit, q.retry_delay, q.ttl,
                        (SELECT d.error_message FROM queen.dead_letters d
                          WHERE d.partition_id = $1 AND d.msg_offset = $2 ORDER BY d.failed_at DESC LIMIT 1),
                        coalesce((SELECT max(d.retry_count) FROM queen.dead_letters d
                          WHERE d.partition_id = $1 AND d.msg_offset = $2), 0)
                 FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE p.id = $1",
                &[&partition_id, &offset],
            )
            .await?;
        let groups = client
            .query(
                "SELECT consumer_group, committed_offset >= $2,
                        CASE WHEN lease_expires_at > now() AND lease_end_offset >= $2
                              AND committed_offset < $2 THEN lease_expires_at END
                 FROM queen.log_consumers WHERE partition_id = $1 ORDER BY consumer_group",
                &[&partition_id, &offset],
            )
            .await?
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect();
        Ok(Some(MessageDetail {
            summary,
            payload,
            lease_time: queue.get(0),
            retry_limit: queue.get(1),
            retry_delay: queue.get(2),
            ttl: queue.get(3),
            error_message: queue.get(4),
            retry_count: queue.get(5),
            groups,
        }))
    }

    /// Deletes one message; false if unknown.
    pub async fn delete_message(
        &self,
        partition_id: Uuid,
        transaction_id: &str,
    ) -> Result<bool, StoreError> {
        let client = self.client().await?;
        Ok(client
            .query_one(
                "SELECT queen.delete_message($1, $2)",
                &[&partition_id, &transaction_id],
            )
            .await?
            .get(0))
    }

    /// Messages written per minute in a window (optionally one queue).
    pub async fn ingested_per_minute(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        queue: Option<&str>,
    ) -> Result<Vec<(DateTime<Utc>, i64)>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT date_trunc('minute', s.created_at) AS minute,
                        sum(s.last_offset - s.first_offset + 1)::bigint
                 FROM queen.segments s
                 JOIN queen.partitions p ON p.id = s.partition_id
                 JOIN queen.queues q ON q.id = p.queue_id
                 WHERE s.created_at >= $1 AND s.created_at <= $2 AND ($3::text IS NULL OR q.name = $3)
                 GROUP BY 1 ORDER BY 1",
                &[&from, &to, &queue],
            )
            .await?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    /// Reads a boolean cluster flag (`{"enabled": bool}` in `queen.system_state`).
    pub async fn flag(&self, key: &str) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT coalesce((value->>'enabled')::boolean, false) FROM queen.system_state WHERE key = $1",
                &[&key],
            )
            .await?;
        Ok(row.is_some_and(|r| r.get(0)))
    }

    /// Writes a boolean cluster flag.
    pub async fn set_flag(&self, key: &str, enabled: bool) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .execute(
                "INSERT INTO queen.system_state (key, value, updated_at)
                 VALUES ($1, jsonb_build_object('enabled', $2::boolean), now())
                 ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()",
                &[&key, &enabled],
            )
            .await?;
        Ok(())
    }

    /// Queues whose namespace (and task, when given) match; for namespace pops.
    pub async fn queues_in_namespace(
        &self,
        namespace: Option<&str>,
        task: Option<&str>,
    ) -> Result<Vec<String>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT name FROM queen.queues
                 WHERE ($1::text IS NULL OR namespace = $1) AND ($2::text IS NULL OR task = $2)
                 ORDER BY name",
                &[&namespace, &task],
            )
            .await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }
}
