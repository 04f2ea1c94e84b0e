//! Dead letters: the filtered, paginated listing.

use chrono::{DateTime, Utc};
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;
use uuid::Uuid;

use crate::store::op::{with_op, DbOp};
use crate::store::{col, rows_into, Store, StoreError};

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
    /// The stored payload text (the broker decrypts it before it leaves).
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

const FILTER: &str = "FROM queen.dead_letters d
     JOIN queen.partitions p ON p.id = d.partition_id
     JOIN queen.queues q ON q.id = p.queue_id
     WHERE ($1::text IS NULL OR q.name = $1) AND ($2::text IS NULL OR d.consumer_group = $2)
       AND ($3::text IS NULL OR p.name = $3)
       AND ($4::timestamptz IS NULL OR d.failed_at >= $4)
       AND ($5::timestamptz IS NULL OR d.failed_at <= $5)";

impl DeadLetter {
    fn from_row(r: &Row) -> Result<Self, StoreError> {
        Ok(Self {
            message_id: col(r, "message_id")?,
            transaction_id: col(r, "transaction_id")?,
            partition_id: col(r, "partition_id")?,
            queue: col(r, "queue")?,
            partition: col(r, "partition")?,
            consumer_group: col(r, "consumer_group")?,
            error_message: col(r, "error_message")?,
            retry_count: col(r, "retry_count")?,
            payload: col(r, "payload")?,
            producer_sub: col(r, "producer_sub")?,
            created_at: col(r, "original_created_at")?,
            failed_at: col(r, "failed_at")?,
        })
    }
}

impl Store {
    /// Lists dead letters, newest first, with the total matching the filters.
    pub async fn list_dead_letters(
        &self,
        f: &DeadLetterFilter,
    ) -> Result<(Vec<DeadLetter>, i64), StoreError> {
        with_op!(self.db, DbOp::DeadLetters, |client| {
            let filters: [&(dyn ToSql + Sync); 5] =
                [&f.queue, &f.consumer_group, &f.partition, &f.from, &f.to];
            let total: i64 = col(
                &client
                    .query_one(&format!("SELECT count(*) AS total {FILTER}"), &filters)
                    .await?,
                "total",
            )?;
            let sql = format!(
                "SELECT d.message_id, d.transaction_id, d.partition_id, q.name AS queue,
                            p.name AS partition, d.consumer_group, d.error_message, d.retry_count,
                            d.payload, d.producer_sub, d.original_created_at, d.failed_at
                     {FILTER} ORDER BY d.failed_at DESC, d.id DESC LIMIT $6 OFFSET $7"
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
            Ok((rows_into(&rows, DeadLetter::from_row)?, total))
        })
    }
}
