//! Single messages: the listing of the dashboard, one message's detail with
//! its per-group state, and deleting one message.

use chrono::{DateTime, Utc};
use tokio_postgres::Row;
use uuid::Uuid;

use crate::store::op::{with_op, DbOp};
use crate::store::{col, rows_into, Store, StoreError};

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

/// One consumer group's view of a message.
#[derive(Debug, Clone)]
pub struct GroupState {
    pub group: String,
    /// The group's cursor is at or past the message.
    pub consumed: bool,
    /// When the group's lease on the message ends, if it holds one.
    pub lease_expires_at: Option<DateTime<Utc>>,
}

/// A message with its payload and per-group state.
#[derive(Debug, Clone)]
pub struct MessageDetail {
    pub summary: MessageSummary,
    /// The stored payload text (the broker decrypts it before it leaves).
    pub payload: String,
    pub error_message: Option<String>,
    pub retry_count: i32,
    pub lease_time: i32,
    pub retry_limit: i32,
    pub retry_delay: i32,
    pub retry_backoff: f64,
    pub retry_delay_max: i32,
    pub ttl: i32,
    pub groups: Vec<GroupState>,
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

impl MessageSummary {
    fn from_row(r: &Row) -> Result<Self, StoreError> {
        Ok(Self {
            message_id: col(r, "message_id")?,
            transaction_id: col(r, "transaction_id")?,
            partition_id: col(r, "partition_id")?,
            queue: col(r, "queue")?,
            partition: col(r, "partition")?,
            namespace: col(r, "namespace")?,
            task: col(r, "task")?,
            status: col(r, "status")?,
            trace_id: col(r, "trace_id")?,
            producer_sub: col(r, "producer_sub")?,
            priority: col(r, "priority")?,
            created_at: col(r, "created_at")?,
            lease_expires_at: col(r, "lease_expires_at")?,
            consumed_by: col(r, "consumed_by")?,
            bus_groups: col(r, "bus_groups")?,
            has_queue_mode: col(r, "has_queue_mode")?,
        })
    }
}

impl Store {
    /// Lists messages, newest first, within the filter's time window.
    pub async fn list_messages(
        &self,
        f: &MessageFilter,
    ) -> Result<Vec<MessageSummary>, StoreError> {
        with_op!(self.db, DbOp::Messages, |client| {
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
            rows_into(&rows, MessageSummary::from_row)
        })
    }

    /// One message with payload and per-group state; `None` if unknown.
    pub async fn message_detail(
        &self,
        partition_id: Uuid,
        transaction_id: &str,
    ) -> Result<Option<MessageDetail>, StoreError> {
        with_op!(self.db, DbOp::Messages, |client| {
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
            let summary = MessageSummary::from_row(&row)?;
            let offset: i64 = col(&row, "off")?;
            let payload: String = col(&row, "payload")?;
            let queue = client
                    .query_one(
                        "SELECT q.lease_time, q.retry_limit, q.retry_delay, q.retry_backoff, q.retry_delay_max, q.ttl,
                                (SELECT d.error_message FROM queen.dead_letters d
                                  WHERE d.partition_id = $1 AND d.msg_offset = $2
                                  ORDER BY d.failed_at DESC LIMIT 1) AS error_message,
                                coalesce((SELECT max(d.retry_count) FROM queen.dead_letters d
                                  WHERE d.partition_id = $1 AND d.msg_offset = $2), 0) AS retry_count
                         FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
                         WHERE p.id = $1",
                        &[&partition_id, &offset],
                    )
                    .await?;
            let groups = client
                .query(
                    "SELECT consumer_group, committed_offset >= $2 AS consumed,
                                CASE WHEN lease_expires_at > now() AND lease_end_offset >= $2
                                      AND committed_offset < $2 THEN lease_expires_at END
                                    AS lease_expires_at
                         FROM queen.log_consumers WHERE partition_id = $1 ORDER BY consumer_group",
                    &[&partition_id, &offset],
                )
                .await?;
            let groups = rows_into(&groups, |r| {
                Ok(GroupState {
                    group: col(r, "consumer_group")?,
                    consumed: col(r, "consumed")?,
                    lease_expires_at: col(r, "lease_expires_at")?,
                })
            })?;
            Ok(Some(MessageDetail {
                summary,
                payload,
                lease_time: col(&queue, "lease_time")?,
                retry_limit: col(&queue, "retry_limit")?,
                retry_delay: col(&queue, "retry_delay")?,
                retry_backoff: col(&queue, "retry_backoff")?,
                retry_delay_max: col(&queue, "retry_delay_max")?,
                ttl: col(&queue, "ttl")?,
                error_message: col(&queue, "error_message")?,
                retry_count: col(&queue, "retry_count")?,
                groups,
            }))
        })
    }

    /// Deletes one message; false if unknown.
    pub async fn delete_message(
        &self,
        partition_id: Uuid,
        transaction_id: &str,
    ) -> Result<bool, StoreError> {
        with_op!(self.db, DbOp::DeleteMessage, |client| {
            let row = client
                .query_one(
                    "SELECT queen.delete_message($1, $2) AS deleted",
                    &[&partition_id, &transaction_id],
                )
                .await?;
            col(&row, "deleted")
        })
    }
}
