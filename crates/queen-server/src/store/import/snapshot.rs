//! One partition's reads from the reference, all in one REPEATABLE READ
//! snapshot: its messages in keyset pages (the order of
//! `idx_messages_partition_created`), the keys of a catch-up's overlap, its
//! cursors, dead letters and traces.

use chrono::{DateTime, Utc};
use tokio_postgres::{Row, Transaction};
use uuid::Uuid;

use super::{SourceCursor, SourceDeadLetter, SourceMessage, SourceTrace};

/// The start of keyset pages: before every key (the year 1, which
/// PostgreSQL's timestamps reach and no message predates).
fn key_or_start(after: Option<(DateTime<Utc>, Uuid)>) -> (DateTime<Utc>, Uuid) {
    // 0001-01-01T00:00:00Z in Unix seconds
    const YEAR_ONE: i64 = -62_135_596_800;
    after.unwrap_or((
        DateTime::from_timestamp(YEAR_ONE, 0).unwrap_or_default(),
        Uuid::nil(),
    ))
}

fn message_from_row(r: &Row) -> SourceMessage {
    SourceMessage {
        id: r.get("id"),
        transaction_id: r.get("transaction_id"),
        trace_id: r.get("trace_id"),
        payload: r.get("payload"),
        created_at: r.get("created_at"),
        producer_sub: r.get("producer_sub"),
    }
}

/// One partition's reads, all in one snapshot of the source.
pub struct SourceSnapshot<'a> {
    tx: Transaction<'a>,
    schema: &'a str,
}

impl std::fmt::Debug for SourceSnapshot<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SourceSnapshot")
    }
}

impl<'a> SourceSnapshot<'a> {
    pub(super) fn new(tx: Transaction<'a>, schema: &'a str) -> Self {
        Self { tx, schema }
    }

    fn t(&self, table: &str) -> String {
        format!("{}.{table}", self.schema)
    }

    /// Up to `limit` messages of `partition` after the key `after`, in key order.
    pub async fn messages_after(
        &self,
        partition: Uuid,
        after: Option<(DateTime<Utc>, Uuid)>,
        limit: i64,
    ) -> anyhow::Result<Vec<SourceMessage>> {
        let (at, id) = key_or_start(after);
        let sql = format!(
            "SELECT id, transaction_id::text AS transaction_id, trace_id, payload::text AS payload,
                    created_at, producer_sub
             FROM {} WHERE partition_id = $1 AND (created_at, id) > ($2, $3)
             ORDER BY created_at, id LIMIT $4",
            self.t("messages")
        );
        let stmt = self.tx.prepare(&sql).await?;
        let rows = self
            .tx
            .query(&stmt, &[&partition, &at, &id, &limit])
            .await?;
        Ok(rows.iter().map(message_from_row).collect())
    }

    /// How many messages of `partition` lie after the key `after`.
    pub async fn count_after(
        &self,
        partition: Uuid,
        after: Option<(DateTime<Utc>, Uuid)>,
    ) -> anyhow::Result<i64> {
        let (at, id) = key_or_start(after);
        let sql = format!(
            "SELECT count(*) AS n FROM {} WHERE partition_id = $1 AND (created_at, id) > ($2, $3)",
            self.t("messages")
        );
        Ok(self
            .tx
            .query_one(&sql, &[&partition, &at, &id])
            .await?
            .get("n"))
    }

    /// The cursor rows of `partition`, by group.
    pub async fn cursors(&self, partition: Uuid) -> anyhow::Result<Vec<SourceCursor>> {
        let sql = format!(
            "SELECT consumer_group::text AS g, last_consumed_id, last_consumed_created_at,
                    (worker_id IS NOT NULL AND lease_expires_at > now()) AS live,
                    coalesce(batch_size, 0) AS batch_size, coalesce(acked_count, 0) AS acked_count,
                    coalesce(batch_retry_count, 0) AS retries,
                    coalesce(total_messages_consumed, 0)::bigint AS total,
                    coalesce(total_batches_consumed, 0)::bigint AS batches, last_consumed_at
             FROM {} WHERE partition_id = $1 ORDER BY consumer_group",
            self.t("partition_consumers")
        );
        let rows = self.tx.query(&sql, &[&partition]).await?;
        Ok(rows
            .iter()
            .map(|r| {
                let at: Option<DateTime<Utc>> = r.get("last_consumed_created_at");
                let id: Option<Uuid> = r.get("last_consumed_id");
                SourceCursor {
                    group: r.get("g"),
                    cursor: at.map(|at| (at, id.unwrap_or_else(Uuid::nil))),
                    live_lease: r.get("live"),
                    batch_size: r.get("batch_size"),
                    acked_count: r.get("acked_count"),
                    batch_retry_count: r.get("retries"),
                    total_consumed: r.get("total"),
                    total_batches: r.get("batches"),
                    last_consumed_at: r.get("last_consumed_at"),
                }
            })
            .collect())
    }

    /// The dead letters of `partition` with their messages, oldest failure first.
    pub async fn dead_letters(&self, partition: Uuid) -> anyhow::Result<Vec<SourceDeadLetter>> {
        let sql = format!(
            "SELECT d.consumer_group::text AS g, d.error_message, coalesce(d.retry_count, 0) AS retries,
                    d.failed_at, m.id, m.transaction_id::text AS transaction_id, m.trace_id,
                    m.payload::text AS payload, m.created_at, m.producer_sub
             FROM {} d JOIN {} m ON m.id = d.message_id
             WHERE d.partition_id = $1 ORDER BY d.failed_at, d.id",
            self.t("dead_letter_queue"),
            self.t("messages")
        );
        let rows = self.tx.query(&sql, &[&partition]).await?;
        Ok(rows
            .iter()
            .map(|r| SourceDeadLetter {
                group: r.get("g"),
                message: message_from_row(r),
                error: r.get("error_message"),
                retry_count: r.get("retries"),
                failed_at: r.get("failed_at"),
            })
            .collect())
    }

    /// The traces of `partition` with their names, oldest first.
    pub async fn traces(&self, partition: Uuid) -> anyhow::Result<Vec<SourceTrace>> {
        let sql = format!(
            "SELECT t.id, t.transaction_id::text AS transaction_id,
                    coalesce(t.consumer_group, '__QUEUE_MODE__')::text AS g,
                    coalesce(t.event_type, 'info')::text AS event_type,
                    coalesce(t.data, 'null'::jsonb)::text AS data, t.worker_id::text AS worker_id,
                    t.created_at,
                    coalesce((SELECT array_agg(n.trace_name::text ORDER BY n.trace_name)
                              FROM {} n WHERE n.trace_id = t.id), '{{}}') AS names
             FROM {} t WHERE t.partition_id = $1 ORDER BY t.created_at, t.id",
            self.t("message_trace_names"),
            self.t("message_traces")
        );
        let rows = self.tx.query(&sql, &[&partition]).await?;
        Ok(rows
            .iter()
            .map(|r| SourceTrace {
                id: r.get("id"),
                transaction_id: r.get("transaction_id"),
                group: r.get("g"),
                event_type: r.get("event_type"),
                data: r.get("data"),
                names: r.get("names"),
                worker_id: r.get("worker_id"),
                created_at: r.get("created_at"),
            })
            .collect())
    }

    /// The keys and transactionIds of `partition`'s messages after `from`
    /// up to and including `to`, in key order (no payloads).
    pub async fn keys_between(
        &self,
        partition: Uuid,
        from: (DateTime<Utc>, Uuid),
        to: (DateTime<Utc>, Uuid),
    ) -> anyhow::Result<Vec<(Uuid, String)>> {
        let sql = format!(
            "SELECT id, transaction_id::text AS transaction_id FROM {}
             WHERE partition_id = $1 AND (created_at, id) > ($2, $3) AND (created_at, id) <= ($4, $5)
             ORDER BY created_at, id",
            self.t("messages")
        );
        let rows = self
            .tx
            .query(&sql, &[&partition, &from.0, &from.1, &to.0, &to.1])
            .await?;
        Ok(rows
            .iter()
            .map(|r| (r.get("id"), r.get("transaction_id")))
            .collect())
    }

    /// The messages of `partition` with these ids, in key order.
    pub async fn messages_by_id(
        &self,
        partition: Uuid,
        ids: &[Uuid],
    ) -> anyhow::Result<Vec<SourceMessage>> {
        let sql = format!(
            "SELECT id, transaction_id::text AS transaction_id, trace_id, payload::text AS payload,
                    created_at, producer_sub
             FROM {} WHERE partition_id = $1 AND id = ANY($2) ORDER BY created_at, id",
            self.t("messages")
        );
        let rows = self.tx.query(&sql, &[&partition, &ids]).await?;
        Ok(rows.iter().map(message_from_row).collect())
    }

    /// Ends the snapshot.
    pub async fn close(self) -> anyhow::Result<()> {
        self.tx.commit().await?;
        Ok(())
    }
}
