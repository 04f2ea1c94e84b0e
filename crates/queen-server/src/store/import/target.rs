//! Writing an import into this broker's schema. Queues and subscriptions
//! are upserts that write nothing when they already match; each partition is
//! one transaction ([`ImportTx`]): its messages through `queen.push_batch`
//! (the dedup index answers a message imported before `duplicate`), its
//! cursors, dead letters and traces, and its `queen.import_progress` row.
//! A transaction dropped before `commit` closes its connection, so nothing
//! of it stays.

use chrono::{DateTime, Utc};
use deadpool_postgres::{GenericClient, Object};
use tokio_postgres::types::ToSql;
use uuid::Uuid;

use super::{
    CursorWrite, DeadLetterWrite, ImportMessage, SourceQueue, SourceSubscription, SourceTrace,
};
use crate::store::push::{append_dated, AppendStatus, NewMessage};
use crate::store::queues::{option_params, upsert_queue_sql};
use crate::store::{Store, StoreError};

/// How far a source partition was imported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Watermark {
    /// The source order key of the last message imported, `None` before any.
    pub last: Option<(DateTime<Utc>, Uuid)>,
    /// Messages appended by the importer to the partition, all runs together.
    pub messages: i64,
}

/// This broker's counts of one partition, for the final report.
#[derive(Debug, Clone, Default)]
pub struct TargetCounts {
    pub messages: i64,
    pub dead_letters: i64,
    pub traces: i64,
    /// (group, messages after its cursor), by group.
    pub pending: Vec<(String, i64)>,
}

impl Store {
    async fn import_conn(&self) -> Result<Object, StoreError> {
        Ok(self.db.pool().get().await?)
    }

    /// Creates or updates a queue with the source's options (and keeps its
    /// creation time); writes nothing when they already match. Returns the
    /// queue's id and whether anything was written.
    pub async fn import_queue(&self, q: &SourceQueue) -> Result<(Uuid, bool), StoreError> {
        let client = self.import_conn().await?;
        let id = Uuid::now_v7();
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![&id, &q.name, &q.namespace, &q.task];
        params.extend(option_params(&q.options));
        params.push(&q.created_at);
        let row = client
            .query_opt(&upsert_queue_sql(&["created_at"], true, "id"), &params)
            .await?;
        if let Some(row) = row {
            return Ok((row.try_get("id")?, true));
        }
        let row = client
            .query_one("SELECT id FROM queen.queues WHERE name = $1", &[&q.name])
            .await?;
        Ok((row.try_get("id")?, false))
    }

    /// Stores a group's subscription start on a queue unless one is stored;
    /// true when written.
    pub async fn import_subscription(&self, s: &SourceSubscription) -> Result<bool, StoreError> {
        let client = self.import_conn().await?;
        let n = client
            .execute(
                "INSERT INTO queen.consumer_subscriptions
                     (consumer_group, queue_name, partition_name, subscription_mode,
                      subscription_timestamp, created_at)
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
                &[
                    &s.group,
                    &s.queue,
                    &s.partition,
                    &s.mode,
                    &s.timestamp,
                    &s.created_at,
                ],
            )
            .await?;
        Ok(n > 0)
    }

    /// How far a source partition was imported (`None`: never, or the
    /// schema has no progress table yet: a dry run against a fresh database).
    pub async fn import_watermark(
        &self,
        source_partition: Uuid,
    ) -> Result<Option<Watermark>, StoreError> {
        let client = self.import_conn().await?;
        let exists: bool = client
            .query_one(
                "SELECT to_regclass('queen.import_progress') IS NOT NULL AS yes",
                &[],
            )
            .await?
            .try_get("yes")?;
        if !exists {
            return Ok(None);
        }
        let row = client
            .query_opt(
                "SELECT last_created_at, last_message_id, messages FROM queen.import_progress
                 WHERE source_partition_id = $1",
                &[&source_partition],
            )
            .await?;
        row.map(|r| watermark_of(&r)).transpose()
    }

    /// Begins the import of one source partition into `(queue_id, name)`:
    /// creates the partition if needed (with the source's creation time) and
    /// locks its progress row, so two imports of one partition take turns.
    pub async fn import_begin(
        &self,
        queue_id: Uuid,
        name: &str,
        created_at: DateTime<Utc>,
        source_partition: Uuid,
    ) -> Result<ImportTx, StoreError> {
        let client = self.import_conn().await?;
        let mut tx = ImportTx {
            client: Some(client),
            queue_id,
            partition: name.to_owned(),
            partition_id: Uuid::nil(),
            source_partition,
            start: Watermark::default(),
            watermark: Watermark::default(),
        };
        let c = tx.client()?;
        // a large partition is one long transaction, and it may wait for a
        // live broker's partition lock: neither is a reason to give up
        c.batch_execute("BEGIN; SET LOCAL lock_timeout = 0; SET LOCAL statement_timeout = 0")
            .await?;
        c.execute(
            "INSERT INTO queen.partitions (id, queue_id, name, created_at)
             VALUES (gen_random_uuid(), $1, $2, $3) ON CONFLICT (queue_id, name) DO NOTHING",
            &[&queue_id, &name, &created_at],
        )
        .await?;
        let pid: Uuid = c
            .query_one(
                "SELECT id FROM queen.partitions WHERE queue_id = $1 AND name = $2",
                &[&queue_id, &name],
            )
            .await?
            .try_get("id")?;
        c.execute(
            "INSERT INTO queen.import_progress (source_partition_id, partition_id)
             VALUES ($1, $2) ON CONFLICT (source_partition_id) DO NOTHING",
            &[&source_partition, &pid],
        )
        .await?;
        let row = c
            .query_one(
                "SELECT last_created_at, last_message_id, messages FROM queen.import_progress
                 WHERE source_partition_id = $1 FOR UPDATE",
                &[&source_partition],
            )
            .await?;
        let mark = watermark_of(&row)?;
        tx.partition_id = pid;
        tx.start = mark;
        tx.watermark = mark;
        Ok(tx)
    }

    /// This broker's counts of a partition.
    pub async fn import_counts(&self, partition_id: Uuid) -> Result<TargetCounts, StoreError> {
        let client = self.import_conn().await?;
        let row = client
            .query_one(
                "SELECT p.next_offset - p.low_offset AS messages,
                        (SELECT count(*) FROM queen.dead_letters d WHERE d.partition_id = p.id) AS dead,
                        (SELECT count(*) FROM queen.message_traces t WHERE t.partition_id = p.id) AS traces
                 FROM queen.partitions p WHERE p.id = $1",
                &[&partition_id],
            )
            .await?;
        let pending = client
            .query(
                "SELECT lc.consumer_group, greatest(p.next_offset - 1 - lc.committed_offset, 0) AS pending
                 FROM queen.log_consumers lc JOIN queen.partitions p ON p.id = lc.partition_id
                 WHERE lc.partition_id = $1 ORDER BY lc.consumer_group",
                &[&partition_id],
            )
            .await?;
        Ok(TargetCounts {
            messages: row.try_get("messages")?,
            dead_letters: row.try_get("dead")?,
            traces: row.try_get("traces")?,
            pending: pending
                .iter()
                .map(|r| Ok((r.try_get("consumer_group")?, r.try_get("pending")?)))
                .collect::<Result<_, StoreError>>()?,
        })
    }
}

fn watermark_of(row: &tokio_postgres::Row) -> Result<Watermark, StoreError> {
    let at: Option<DateTime<Utc>> = row.try_get("last_created_at")?;
    let id: Option<Uuid> = row.try_get("last_message_id")?;
    Ok(Watermark {
        last: at.zip(id),
        messages: row.try_get("messages")?,
    })
}

/// The open transaction of one partition's import.
pub struct ImportTx {
    client: Option<Object>,
    queue_id: Uuid,
    partition: String,
    partition_id: Uuid,
    source_partition: Uuid,
    /// As the run found it.
    start: Watermark,
    watermark: Watermark,
}

impl std::fmt::Debug for ImportTx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ImportTx({})", self.partition)
    }
}

impl Drop for ImportTx {
    fn drop(&mut self) {
        // not committed: the connection must not go back to the pool inside
        // the transaction; closing it rolls the transaction back
        if let Some(c) = self.client.take() {
            drop(Object::take(c));
        }
    }
}

impl ImportTx {
    fn client(&self) -> Result<&Object, StoreError> {
        self.client
            .as_ref()
            .ok_or_else(|| StoreError::internal("import transaction already ended"))
    }

    /// The partition written to.
    pub fn partition_id(&self) -> Uuid {
        self.partition_id
    }

    /// The progress as this run found it.
    pub fn start(&self) -> Watermark {
        self.start
    }

    /// Appends messages in the given order with their own ids and times;
    /// returns how many were new (the others were imported before). The
    /// progress moves to the last message's key.
    pub async fn append(&mut self, messages: &[ImportMessage]) -> Result<i64, StoreError> {
        if messages.is_empty() {
            return Ok(0);
        }
        let items: Vec<NewMessage> = messages
            .iter()
            .map(|m| NewMessage {
                queue_id: self.queue_id,
                partition: self.partition.clone(),
                message_id: m.id,
                transaction_id: m.transaction_id.clone(),
                trace_id: m.trace_id,
                payload: m.payload.clone(),
                producer_sub: m.producer_sub.clone(),
            })
            .collect();
        let times: Vec<DateTime<Utc>> = messages.iter().map(|m| m.created_at).collect();
        let out = append_dated(self.client()?, &items, &times).await?;
        let fresh = out
            .iter()
            .filter(|o| o.status == AppendStatus::Queued)
            .count() as i64;
        if let Some(last) = messages.last() {
            let key = (last.created_at, last.id);
            if self.watermark.last.is_none_or(|w| key > w) {
                self.watermark.last = Some(key);
            }
        }
        self.watermark.messages += fresh;
        Ok(fresh)
    }

    /// Of `transaction_ids`, those this partition does not hold (one index
    /// probe each in the dedup index): what a catch-up's overlap must fetch.
    pub async fn unknown(&self, transaction_ids: &[String]) -> Result<Vec<String>, StoreError> {
        if transaction_ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows = self
            .client()?
            .query(
                "SELECT t FROM unnest($2::text[]) AS t
                 WHERE NOT EXISTS (SELECT 1 FROM queen.message_keys k
                                   WHERE k.partition_id = $1 AND k.transaction_id = t)",
                &[&self.partition_id, &transaction_ids],
            )
            .await?;
        rows.iter()
            .map(|r| Ok(r.try_get::<_, String>("t")?))
            .collect()
    }

    /// Writes a group's cursor: committed up to the message before the first
    /// one imported after `position`. Never moves an existing cursor back;
    /// true when something was written.
    pub async fn write_cursor(&mut self, c: &CursorWrite) -> Result<bool, StoreError> {
        let (at, id) = match c.position {
            Some((at, id)) => (Some(at), id),
            None => (None, Uuid::nil()),
        };
        let client = self.client()?;
        // whoever makes a cursor row holds this lock (docs/architecture.md, the consume fast path)
        client
            .execute(
                "SELECT pg_advisory_xact_lock(21023, queen.cursor_lock_key($1, $2))",
                &[&self.partition_id, &c.group],
            )
            .await?;
        let n = client
            .execute(
                "WITH pos AS (
                     SELECT CASE WHEN $3::timestamptz IS NULL
                         THEN (SELECT low_offset - 1 FROM queen.partitions WHERE id = $1)
                         ELSE coalesce(
                             (SELECT min(s.first_offset + u.ord - 1) - 1
                              FROM queen.segments s
                              CROSS JOIN LATERAL unnest(s.message_ids) WITH ORDINALITY AS u(id, ord)
                              WHERE s.partition_id = $1 AND s.created_at >= $3
                                AND (s.created_at, u.id) > ($3, $4)),
                             (SELECT next_offset - 1 FROM queen.partitions WHERE id = $1))
                     END AS off)
                 INSERT INTO queen.log_consumers AS lc (partition_id, consumer_group, committed_offset,
                     retry_count, total_consumed, batches_consumed, last_consumed_at)
                 SELECT $1, $2, pos.off, $5, $6, $7, $8 FROM pos
                 ON CONFLICT (partition_id, consumer_group) DO UPDATE SET
                     committed_offset = EXCLUDED.committed_offset, retry_count = EXCLUDED.retry_count,
                     total_consumed = EXCLUDED.total_consumed,
                     batches_consumed = EXCLUDED.batches_consumed,
                     last_consumed_at = EXCLUDED.last_consumed_at
                 WHERE EXCLUDED.committed_offset >= lc.committed_offset
                   AND (lc.committed_offset, lc.retry_count, lc.total_consumed, lc.batches_consumed,
                        lc.last_consumed_at)
                       IS DISTINCT FROM
                       (EXCLUDED.committed_offset, EXCLUDED.retry_count, EXCLUDED.total_consumed,
                        EXCLUDED.batches_consumed, EXCLUDED.last_consumed_at)",
                &[
                    &self.partition_id,
                    &c.group,
                    &at,
                    &id,
                    &c.retry_count,
                    &c.total_consumed,
                    &c.batches_consumed,
                    &c.last_consumed_at,
                ],
            )
            .await?;
        Ok(n > 0)
    }

    /// Writes a dead letter for the imported message of its transactionId,
    /// unless the group has one for that message; true when written.
    pub async fn write_dead_letter(&mut self, d: &DeadLetterWrite) -> Result<bool, StoreError> {
        let m = &d.message;
        let n = self
            .client()?
            .execute(
                "INSERT INTO queen.dead_letters (partition_id, consumer_group, msg_offset, message_id,
                     transaction_id, trace_id, payload, producer_sub, error_message, retry_count,
                     original_created_at, failed_at)
                 SELECT $1, $2, k.msg_offset, k.message_id, $3, $4, $5, $6, $7, $8, $9, $10
                 FROM queen.message_keys k WHERE k.partition_id = $1 AND k.transaction_id = $3
                 ON CONFLICT (partition_id, consumer_group, msg_offset) DO NOTHING",
                &[
                    &self.partition_id,
                    &d.group,
                    &m.transaction_id,
                    &m.trace_id,
                    &m.payload,
                    &m.producer_sub,
                    &d.error,
                    &d.retry_count,
                    &m.created_at,
                    &d.failed_at,
                ],
            )
            .await?;
        Ok(n > 0)
    }

    /// Writes a trace under its source id unless it is there; true when written.
    pub async fn write_trace(&mut self, t: &SourceTrace) -> Result<bool, StoreError> {
        let n = self
            .client()?
            .execute(
                "INSERT INTO queen.message_traces (id, partition_id, transaction_id, consumer_group,
                     event_type, data, trace_names, worker_id, created_at)
                 VALUES ($1, $2, $3, $4, $5, $6::text::jsonb, $7, $8, $9)
                 ON CONFLICT (id) DO NOTHING",
                &[
                    &t.id,
                    &self.partition_id,
                    &t.transaction_id,
                    &t.group,
                    &t.event_type,
                    &t.data,
                    &t.names,
                    &t.worker_id,
                    &t.created_at,
                ],
            )
            .await?;
        Ok(n > 0)
    }

    /// Records the progress and commits: the partition is imported up to
    /// its watermark, all of it or (on any error before) none of it.
    pub async fn commit(mut self) -> Result<Watermark, StoreError> {
        let client = self.client()?;
        if self.watermark != self.start {
            let (at, id) = (
                self.watermark.last.map(|w| w.0),
                self.watermark.last.map(|w| w.1),
            );
            client
                .execute(
                    "UPDATE queen.import_progress
                     SET last_created_at = $2, last_message_id = $3, messages = $4, imported_at = now()
                     WHERE source_partition_id = $1",
                    &[&self.source_partition, &at, &id, &self.watermark.messages],
                )
                .await?;
        }
        client.batch_execute("COMMIT").await?;
        // committed: the connection may go back to the pool
        drop(self.client.take());
        Ok(self.watermark)
    }
}
