//! Traces: recording an event on a message, and the three readers.

use chrono::{DateTime, Utc};
use tokio_postgres::Row;
use uuid::Uuid;

use crate::store::op::{with_op, DbOp};
use crate::store::{col, rows_into, Store, StoreError};

/// A trace event, with the message it belongs to.
#[derive(Debug, Clone)]
pub struct Trace {
    pub id: Uuid,
    pub partition_id: Uuid,
    pub transaction_id: String,
    pub consumer_group: String,
    pub event_type: String,
    /// The event's data as JSON text.
    pub data: String,
    pub trace_names: Vec<String>,
    pub worker_id: Option<String>,
    pub created_at: DateTime<Utc>,
    pub queue: Option<String>,
    pub partition: Option<String>,
    /// The stored payload text of the message (decrypted by the broker).
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

/// A trace event to record.
#[derive(Debug, Clone)]
pub struct NewTrace<'a> {
    pub id: Uuid,
    pub partition_id: Uuid,
    pub transaction_id: &'a str,
    pub consumer_group: &'a str,
    pub event_type: &'a str,
    /// JSON text.
    pub data: &'a str,
    pub names: &'a [String],
    pub worker_id: &'a str,
}

const TRACE_SQL: &str = "
    SELECT t.id, t.partition_id, t.transaction_id, t.consumer_group, t.event_type, t.data::text AS data,
           t.trace_names, t.worker_id, t.created_at, q.name AS queue, p.name AS partition,
           (SELECT ma.payload FROM queen.message_keys k, LATERAL queen.message_at(k.partition_id, k.msg_offset) ma
             WHERE k.partition_id = t.partition_id AND k.transaction_id = t.transaction_id) AS message_payload
    FROM queen.message_traces t
    LEFT JOIN queen.partitions p ON p.id = t.partition_id
    LEFT JOIN queen.queues q ON q.id = p.queue_id";

impl Trace {
    fn from_row(r: &Row) -> Result<Self, StoreError> {
        Ok(Self {
            id: col(r, "id")?,
            partition_id: col(r, "partition_id")?,
            transaction_id: col(r, "transaction_id")?,
            consumer_group: col(r, "consumer_group")?,
            event_type: col(r, "event_type")?,
            data: col(r, "data")?,
            trace_names: col(r, "trace_names")?,
            worker_id: col(r, "worker_id")?,
            created_at: col(r, "created_at")?,
            queue: col(r, "queue")?,
            partition: col(r, "partition")?,
            message_payload: col(r, "message_payload")?,
        })
    }
}

impl Store {
    /// Records a trace event on a message; false if the message is unknown.
    pub async fn insert_trace(&self, t: &NewTrace<'_>) -> Result<bool, StoreError> {
        with_op!(self.db, DbOp::InsertTrace, |client| {
            let n = client
                    .execute(
                        "INSERT INTO queen.message_traces
                             (id, partition_id, transaction_id, consumer_group, event_type, data, trace_names, worker_id)
                         SELECT $1, $2, $3, $4, $5, $6::text::jsonb, $7, $8
                         WHERE EXISTS (SELECT 1 FROM queen.message_keys k
                                       WHERE k.partition_id = $2 AND k.transaction_id = $3)",
                        &[
                            &t.id,
                            &t.partition_id,
                            &t.transaction_id,
                            &t.consumer_group,
                            &t.event_type,
                            &t.data,
                            &t.names,
                            &t.worker_id,
                        ],
                    )
                    .await?;
            Ok(n == 1)
        })
    }

    /// Trace events of one message, oldest first.
    pub async fn traces_of_message(
        &self,
        partition_id: Uuid,
        transaction_id: &str,
    ) -> Result<Vec<Trace>, StoreError> {
        with_op!(self.db, DbOp::Traces, |client| {
            let rows = client
                .query(
                    &format!(
                        "{TRACE_SQL} WHERE t.partition_id = $1 AND t.transaction_id = $2
                             ORDER BY t.created_at, t.id"
                    ),
                    &[&partition_id, &transaction_id],
                )
                .await?;
            rows_into(&rows, Trace::from_row)
        })
    }

    /// Trace events carrying `name`, newest first, with their total.
    pub async fn traces_by_name(
        &self,
        name: &str,
        limit: i64,
        offset: i64,
    ) -> Result<(Vec<Trace>, i64), StoreError> {
        with_op!(self.db, DbOp::Traces, |client| {
            let total: i64 = col(
                &client
                    .query_one(
                        "SELECT count(*) AS total FROM queen.message_traces
                             WHERE $1 = ANY (trace_names)",
                        &[&name],
                    )
                    .await?,
                "total",
            )?;
            let rows = client
                .query(
                    &format!(
                        "{TRACE_SQL} WHERE $1 = ANY (t.trace_names)
                             ORDER BY t.created_at DESC, t.id DESC LIMIT $2 OFFSET $3"
                    ),
                    &[&name, &limit, &offset],
                )
                .await?;
            Ok((rows_into(&rows, Trace::from_row)?, total))
        })
    }

    /// Trace names with counts, most recently seen first, with their total.
    pub async fn trace_names(
        &self,
        limit: i64,
        offset: i64,
    ) -> Result<(Vec<TraceName>, i64), StoreError> {
        with_op!(self.db, DbOp::Traces, |client| {
            let total: i64 = col(
                &client
                    .query_one(
                        "SELECT count(DISTINCT n) AS total
                             FROM queen.message_traces, unnest(trace_names) n",
                        &[],
                    )
                    .await?,
                "total",
            )?;
            let rows = client
                .query(
                    "SELECT n AS name, count(*) AS trace_count,
                                count(DISTINCT (partition_id, transaction_id)) AS message_count,
                                max(created_at) AS last_seen
                         FROM queen.message_traces, unnest(trace_names) n
                         GROUP BY n ORDER BY max(created_at) DESC, n LIMIT $1 OFFSET $2",
                    &[&limit, &offset],
                )
                .await?;
            let names = rows_into(&rows, |r| {
                Ok(TraceName {
                    name: col(r, "name")?,
                    trace_count: col(r, "trace_count")?,
                    message_count: col(r, "message_count")?,
                    last_seen: col(r, "last_seen")?,
                })
            })?;
            Ok((names, total))
        })
    }
}
