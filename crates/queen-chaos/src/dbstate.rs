//! The final state, read from the `queen.*` tables directly (not through a
//! broker), so the checker does not trust the code it checks.

use anyhow::{Context as _, Result};
use tokio_postgres::Client;

#[derive(Debug, Clone)]
pub struct PartitionRow {
    pub id: String,
    pub name: String,
    pub next_offset: i64,
    pub low_offset: i64,
}

/// One message as stored in a segment.
#[derive(Debug, Clone)]
pub struct StoredMessage {
    pub partition_id: String,
    pub offset: i64,
    pub message_id: String,
    pub txid: String,
    pub payload: String,
    pub deleted: bool,
}

#[derive(Debug, Clone)]
pub struct KeyRow {
    pub partition_id: String,
    pub txid: String,
    pub offset: i64,
    pub message_id: String,
}

#[derive(Debug, Clone)]
pub struct CursorRow {
    pub partition_id: String,
    pub group: String,
    pub committed: i64,
    /// The lease has not expired yet.
    pub live_lease: bool,
    /// A lease expiry is still set (live or expired).
    pub lease_set: bool,
}

#[derive(Debug, Clone)]
pub struct DeadLetterRow {
    pub partition_id: String,
    pub group: String,
    pub offset: i64,
    pub message_id: String,
    pub txid: String,
    pub retry_count: i32,
}

#[derive(Debug, Default)]
pub struct DbState {
    pub partitions: Vec<PartitionRow>,
    pub messages: Vec<StoredMessage>,
    pub keys: Vec<KeyRow>,
    pub cursors: Vec<CursorRow>,
    pub dead_letters: Vec<DeadLetterRow>,
}

/// Reads everything stored for `queue`.
pub async fn snapshot(db: &Client, queue: &str) -> Result<DbState> {
    let partitions = db
        .query(
            "SELECT pt.id::text, pt.name, pt.next_offset, pt.low_offset
               FROM queen.partitions pt JOIN queen.queues q ON q.id = pt.queue_id
              WHERE q.name = $1",
            &[&queue],
        )
        .await
        .context("read partitions")?
        .iter()
        .map(|r| PartitionRow {
            id: r.get(0),
            name: r.get(1),
            next_offset: r.get(2),
            low_offset: r.get(3),
        })
        .collect::<Vec<_>>();
    let ids: Vec<String> = partitions.iter().map(|p| p.id.clone()).collect();
    let messages = db
        .query(
            "SELECT s.partition_id::text, s.first_offset + u.n - 1, u.mid::text, u.txn, u.pl,
                    coalesce((s.first_offset + u.n - 1) = ANY (s.deleted_offsets), false)
               FROM queen.segments s
               CROSS JOIN LATERAL unnest(s.message_ids, s.transaction_ids, s.payloads)
                          WITH ORDINALITY AS u(mid, txn, pl, n)
              WHERE s.partition_id::text = ANY ($1)
              ORDER BY 1, 2",
            &[&ids],
        )
        .await
        .context("read segments")?
        .iter()
        .map(|r| StoredMessage {
            partition_id: r.get(0),
            offset: r.get(1),
            message_id: r.get(2),
            txid: r.get(3),
            payload: r.get(4),
            deleted: r.get(5),
        })
        .collect();
    let keys = db
        .query(
            "SELECT partition_id::text, transaction_id, msg_offset, message_id::text
               FROM queen.message_keys WHERE partition_id::text = ANY ($1)",
            &[&ids],
        )
        .await
        .context("read message keys")?
        .iter()
        .map(|r| KeyRow {
            partition_id: r.get(0),
            txid: r.get(1),
            offset: r.get(2),
            message_id: r.get(3),
        })
        .collect();
    let cursors = db
        .query(
            "SELECT partition_id::text, consumer_group, committed_offset,
                    coalesce(lease_expires_at > now(), false), lease_expires_at IS NOT NULL
               FROM queen.log_consumers WHERE partition_id::text = ANY ($1)",
            &[&ids],
        )
        .await
        .context("read cursors")?
        .iter()
        .map(|r| CursorRow {
            partition_id: r.get(0),
            group: r.get(1),
            committed: r.get(2),
            live_lease: r.get(3),
            lease_set: r.get(4),
        })
        .collect();
    let dead_letters = db
        .query(
            "SELECT partition_id::text, consumer_group, msg_offset, message_id::text,
                    transaction_id, retry_count
               FROM queen.dead_letters WHERE partition_id::text = ANY ($1)",
            &[&ids],
        )
        .await
        .context("read dead letters")?
        .iter()
        .map(|r| DeadLetterRow {
            partition_id: r.get(0),
            group: r.get(1),
            offset: r.get(2),
            message_id: r.get(3),
            txid: r.get(4),
            retry_count: r.get(5),
        })
        .collect();
    Ok(DbState {
        partitions,
        messages,
        keys,
        cursors,
        dead_letters,
    })
}

/// Drain progress: whether every group's cursor is at the end of every
/// partition with no lease live (quiet), and the sum of all cursors (to tell a
/// slow drain from a stuck one).
pub async fn drain_state(db: &Client, queue: &str, groups: &[String]) -> Result<(bool, i64)> {
    let row = db
        .query_one(
            "SELECT count(*) FILTER (WHERE lc.committed_offset IS DISTINCT FROM pt.next_offset - 1
                                        OR lc.lease_expires_at > now()),
                    coalesce(sum(lc.committed_offset), 0)::bigint
               FROM queen.partitions pt
               JOIN queen.queues q ON q.id = pt.queue_id
               CROSS JOIN unnest($2::text[]) AS g(name)
               LEFT JOIN queen.log_consumers lc
                      ON lc.partition_id = pt.id AND lc.consumer_group = g.name
              WHERE q.name = $1 AND pt.next_offset > 1",
            &[&queue, &groups],
        )
        .await
        .context("check drain progress")?;
    Ok((row.get::<_, i64>(0) == 0, row.get(1)))
}

/// One message stored in a queue, read from its segments.
#[derive(Debug, Clone)]
pub struct QueueMessage {
    pub partition: String,
    pub offset: i64,
    pub message_id: String,
    pub txid: String,
    pub payload: String,
    /// The segment's `created_at`, in µs since the epoch (the database's clock).
    pub created_us: i64,
}

/// Every message stored in `queue`, by partition name then offset.
pub async fn queue_messages(db: &Client, queue: &str) -> Result<Vec<QueueMessage>> {
    Ok(db
        .query(
            "SELECT pt.name, s.first_offset + u.n - 1, u.mid::text, u.txn, u.pl,
                    (extract(epoch FROM s.created_at) * 1000000)::bigint
               FROM queen.segments s
               JOIN queen.partitions pt ON pt.id = s.partition_id
               JOIN queen.queues q ON q.id = pt.queue_id
               CROSS JOIN LATERAL unnest(s.message_ids, s.transaction_ids, s.payloads)
                          WITH ORDINALITY AS u(mid, txn, pl, n)
              WHERE q.name = $1 ORDER BY 1, 2",
            &[&queue],
        )
        .await
        .with_context(|| format!("read the messages of {queue}"))?
        .iter()
        .map(|r| QueueMessage {
            partition: r.get(0),
            offset: r.get(1),
            message_id: r.get(2),
            txid: r.get(3),
            payload: r.get(4),
            created_us: r.get(5),
        })
        .collect())
}
