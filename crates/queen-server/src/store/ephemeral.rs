//! Ephemeral queues (issue 21): contents in UNLOGGED tables, declarations in a
//! logged one. One stored function per verb (`queen.ephemeral_push`, `_pop`,
//! `_ack`, `_reset`, `_delete`); the status reads are plain queries.

use serde_json::Value;

use super::op::{with_op, DbOp};
use super::{col, rows_into, Store, StoreError};

/// Effective options of an ephemeral queue (defaults filled in).
#[derive(Debug, Clone)]
pub struct EphemeralSettings {
    pub max_bytes: i64,
    pub max_length: i32,
    pub policy: String,
    pub ttl_seconds: i32,
    pub lease_seconds: i32,
    pub retry_limit: i32,
    pub window_ms: i32,
    pub window_count: i32,
    pub declared: bool,
}

/// What a push did.
#[derive(Debug, Clone, Copy)]
pub struct EphemeralPushed {
    pub pushed: i32,
    /// Messages evicted from the head to make room (policy `dropOldest`).
    pub evicted: i64,
    /// Over the queue's bounds with policy `reject`: nothing was appended.
    pub refused: bool,
    /// Over the broker-wide bound of every ephemeral queue: nothing was appended.
    pub over_budget: bool,
}

/// What one sweep of the ephemeral collector did.
#[derive(Debug, Clone, Copy)]
pub struct EphemeralCollected {
    /// Idle implicit queues forgotten.
    pub collected: i64,
    /// Queues whose byte count was set to what they hold.
    pub refreshed: i64,
}

/// One message handed out by a pop; `payload` is the pushed JSON text.
#[derive(Debug, Clone)]
pub struct EphemeralMessage {
    pub partition: String,
    pub seq: i64,
    pub attempts: i32,
    pub payload: String,
    pub epoch: i64,
}

/// One ack, parsed from its message id.
#[derive(Debug, Clone)]
pub struct EphemeralAck {
    pub epoch: i64,
    pub partition: String,
    pub seq: i64,
    /// `completed`; otherwise `failed`/`retry`.
    pub completed: bool,
}

/// Per (group, partition) backlog of a queue.
#[derive(Debug, Clone)]
pub struct EphemeralGroupDepth {
    pub group: String,
    pub partition: String,
    pub pending: i64,
    /// Messages this group dropped after the retry limit (whole queue).
    pub dropped: i64,
}

/// One ring of a queue.
#[derive(Debug, Clone)]
pub struct EphemeralRing {
    pub partition: String,
    pub length: i64,
    pub bytes: i64,
}

/// The status of one queue.
#[derive(Debug, Clone)]
pub struct EphemeralStatus {
    pub queue: String,
    pub settings: EphemeralSettings,
    /// Holds contents (or did since the last restart of PostgreSQL's data).
    pub live: bool,
    pub rings: Vec<EphemeralRing>,
    pub groups: Vec<EphemeralGroupDepth>,
    pub group_count: i64,
    pub drops_bounds: i64,
    pub drops_ttl: i64,
    pub drops_retry: i64,
}

fn settings_from(r: &tokio_postgres::Row) -> Result<EphemeralSettings, StoreError> {
    Ok(EphemeralSettings {
        max_bytes: col(r, "max_bytes")?,
        max_length: col(r, "max_length")?,
        policy: col(r, "policy")?,
        ttl_seconds: col(r, "ttl_seconds")?,
        lease_seconds: col(r, "lease_seconds")?,
        retry_limit: col(r, "retry_limit")?,
        window_ms: col(r, "window_ms")?,
        window_count: col(r, "window_count")?,
        declared: col(r, "declared")?,
    })
}

const SETTINGS_COLUMNS: &str =
    "s.max_bytes, s.max_length, s.policy, s.ttl_seconds, s.lease_seconds,
     s.retry_limit, s.window_ms, s.window_count, s.declared";

impl Store {
    /// Stores a declaration (options already validated and clamped, defaults
    /// omitted) and answers the effective options.
    pub async fn ephemeral_configure(
        &self,
        queue: &str,
        options: &Value,
    ) -> Result<EphemeralSettings, StoreError> {
        with_op!(self.db, DbOp::EphemeralAdmin, |client| {
            client
                .execute(
                    "INSERT INTO queen.ephemeral_declarations (queue, options) VALUES ($1, $2::text::jsonb)
                     ON CONFLICT (queue) DO UPDATE SET options = EXCLUDED.options, updated_at = now()",
                    &[&queue, &options.to_string()],
                )
                .await?;
            let row = client
                .query_one(
                    &format!("SELECT {SETTINGS_COLUMNS} FROM queen.ephemeral_settings($1) s"),
                    &[&queue],
                )
                .await?;
            settings_from(&row)
        })
    }

    /// Appends payloads to one ring, all or nothing, within the broker-wide
    /// bound of `total_max` bytes.
    pub async fn ephemeral_push(
        &self,
        queue: &str,
        partition: &str,
        payloads: &[String],
        total_max: i64,
    ) -> Result<EphemeralPushed, StoreError> {
        with_op!(self.db, DbOp::Ephemeral, |client| {
            let row = client
                .query_one(
                    "SELECT pushed, evicted, refused, over_budget
                     FROM queen.ephemeral_push($1, $2, $3, $4)",
                    &[&queue, &partition, &payloads, &total_max],
                )
                .await?;
            Ok(EphemeralPushed {
                pushed: col(&row, "pushed")?,
                evicted: col(&row, "evicted")?,
                refused: col(&row, "refused")?,
                over_budget: col(&row, "over_budget")?,
            })
        })
    }

    /// One sweep of the ephemeral collector (`queen.ephemeral_collect`).
    pub async fn ephemeral_collect(
        &self,
        idle_seconds: i32,
    ) -> Result<EphemeralCollected, StoreError> {
        with_op!(self.db, DbOp::EphemeralAdmin, |client| {
            let row = client
                .query_one(
                    "SELECT collected, refreshed FROM queen.ephemeral_collect($1)",
                    &[&idle_seconds],
                )
                .await?;
            Ok(EphemeralCollected {
                collected: col(&row, "collected")?,
                refreshed: col(&row, "refreshed")?,
            })
        })
    }

    /// Hands out up to `batch` messages to `group`.
    pub async fn ephemeral_pop(
        &self,
        queue: &str,
        partition: Option<&str>,
        group: &str,
        batch: i32,
        auto_ack: bool,
    ) -> Result<Vec<EphemeralMessage>, StoreError> {
        with_op!(self.db, DbOp::Ephemeral, |client| {
            let rows = client
                .query(
                    "SELECT partition, seq, attempts, payload, epoch
                     FROM queen.ephemeral_pop($1, $2, $3, $4, $5)",
                    &[&queue, &partition, &group, &batch, &auto_ack],
                )
                .await?;
            rows_into(&rows, |r| {
                Ok(EphemeralMessage {
                    partition: col(r, "partition")?,
                    seq: col(r, "seq")?,
                    attempts: col(r, "attempts")?,
                    payload: col(r, "payload")?,
                    epoch: col(r, "epoch")?,
                })
            })
        })
    }

    /// Acks; one outcome per ack, in order.
    pub async fn ephemeral_ack(
        &self,
        queue: &str,
        group: &str,
        acks: &[EphemeralAck],
    ) -> Result<Vec<String>, StoreError> {
        let epochs: Vec<i64> = acks.iter().map(|a| a.epoch).collect();
        let partitions: Vec<&str> = acks.iter().map(|a| a.partition.as_str()).collect();
        let seqs: Vec<i64> = acks.iter().map(|a| a.seq).collect();
        let completed: Vec<bool> = acks.iter().map(|a| a.completed).collect();
        with_op!(self.db, DbOp::Ephemeral, |client| {
            let rows = client
                .query(
                    "SELECT idx, outcome FROM queen.ephemeral_ack($1, $2, $3, $4, $5, $6) ORDER BY idx",
                    &[&queue, &group, &epochs, &partitions, &seqs, &completed],
                )
                .await?;
            rows_into(&rows, |r| col(r, "outcome"))
        })
    }

    /// Drops every message; answers how many.
    pub async fn ephemeral_reset(&self, queue: &str) -> Result<i64, StoreError> {
        with_op!(self.db, DbOp::EphemeralAdmin, |client| {
            let row = client
                .query_one("SELECT queen.ephemeral_reset($1) AS dropped", &[&queue])
                .await?;
            col(&row, "dropped")
        })
    }

    /// Forgets a queue; answers (deleted, declared).
    pub async fn ephemeral_delete(&self, queue: &str) -> Result<(bool, bool), StoreError> {
        with_op!(self.db, DbOp::EphemeralAdmin, |client| {
            let row = client
                .query_one(
                    "SELECT deleted, declared FROM queen.ephemeral_delete($1)",
                    &[&queue],
                )
                .await?;
            Ok((col(&row, "deleted")?, col(&row, "declared")?))
        })
    }

    /// The status of every queue, declared or with contents, sorted by name,
    /// in three statements whatever their number: the queues with their
    /// settings and counters, their rings, their group counts. `groups`
    /// (per-group backlogs) is left empty: only `depth` reads it.
    pub async fn ephemeral_statuses(&self) -> Result<Vec<EphemeralStatus>, StoreError> {
        with_op!(self.db, DbOp::EphemeralAdmin, |client| {
            let queues = client
                .query(
                    &format!(
                        "WITH names AS (SELECT queue FROM queen.ephemeral_queues
                                        UNION SELECT queue FROM queen.ephemeral_declarations)
                         SELECT n.queue, {SETTINGS_COLUMNS}, q.queue IS NOT NULL AS live,
                                coalesce(q.drops_bounds, 0) AS drops_bounds,
                                coalesce(q.drops_ttl, 0) AS drops_ttl,
                                coalesce(q.drops_retry, 0) AS drops_retry,
                                coalesce(g.n, 0) AS group_count
                         FROM names n
                         CROSS JOIN LATERAL queen.ephemeral_settings(n.queue) s
                         LEFT JOIN queen.ephemeral_queues q ON q.queue = n.queue
                         LEFT JOIN (SELECT g.queue, count(*) AS n FROM queen.ephemeral_groups g
                                    GROUP BY g.queue) g ON g.queue = n.queue
                         ORDER BY n.queue"
                    ),
                    &[],
                )
                .await?;
            let rings = client
                .query(
                    "SELECT p.queue, p.partition, count(m.seq) AS length,
                            coalesce(sum(m.bytes), 0)::bigint AS bytes
                     FROM queen.ephemeral_partitions p
                     LEFT JOIN queen.ephemeral_messages m
                            ON m.queue = p.queue AND m.partition = p.partition
                     GROUP BY p.queue, p.partition ORDER BY p.queue, p.partition",
                    &[],
                )
                .await?;
            let mut by_queue: std::collections::HashMap<String, Vec<EphemeralRing>> =
                std::collections::HashMap::new();
            for r in &rings {
                by_queue
                    .entry(col(r, "queue")?)
                    .or_default()
                    .push(EphemeralRing {
                        partition: col(r, "partition")?,
                        length: col(r, "length")?,
                        bytes: col(r, "bytes")?,
                    });
            }
            let mut out = Vec::with_capacity(queues.len());
            for r in &queues {
                let queue: String = col(r, "queue")?;
                out.push(EphemeralStatus {
                    rings: by_queue.remove(&queue).unwrap_or_default(),
                    queue,
                    settings: settings_from(r)?,
                    live: col(r, "live")?,
                    groups: Vec::new(),
                    group_count: col(r, "group_count")?,
                    drops_bounds: col(r, "drops_bounds")?,
                    drops_ttl: col(r, "drops_ttl")?,
                    drops_retry: col(r, "drops_retry")?,
                });
            }
            Ok(out)
        })
    }

    /// The status of one queue; `None` when it is neither declared nor holds
    /// contents.
    pub async fn ephemeral_status(
        &self,
        queue: &str,
    ) -> Result<Option<EphemeralStatus>, StoreError> {
        with_op!(self.db, DbOp::EphemeralAdmin, |client| {
            let row = client
                .query_one(
                    &format!(
                        "SELECT {SETTINGS_COLUMNS}, q.queue IS NOT NULL AS live,
                                coalesce(q.drops_bounds, 0) AS drops_bounds,
                                coalesce(q.drops_ttl, 0) AS drops_ttl,
                                coalesce(q.drops_retry, 0) AS drops_retry,
                                (SELECT count(*) FROM queen.ephemeral_groups g WHERE g.queue = $1) AS group_count
                         FROM queen.ephemeral_settings($1) s
                         LEFT JOIN queen.ephemeral_queues q ON q.queue = $1"
                    ),
                    &[&queue],
                )
                .await?;
            let settings = settings_from(&row)?;
            let live: bool = col(&row, "live")?;
            if !live && !settings.declared {
                return Ok(None);
            }
            let rings = client
                .query(
                    "SELECT p.partition, count(m.seq) AS length, coalesce(sum(m.bytes), 0)::bigint AS bytes
                     FROM queen.ephemeral_partitions p
                     LEFT JOIN queen.ephemeral_messages m ON m.queue = p.queue AND m.partition = p.partition
                     WHERE p.queue = $1 GROUP BY p.partition ORDER BY p.partition",
                    &[&queue],
                )
                .await?;
            let rings = rows_into(&rings, |r| {
                Ok(EphemeralRing {
                    partition: col(r, "partition")?,
                    length: col(r, "length")?,
                    bytes: col(r, "bytes")?,
                })
            })?;
            // a group's backlog: what it can still be handed (past its cursor,
            // and its redeliveries); leased messages are not pending
            let groups = client
                .query(
                    "SELECT g.grp, p.partition, g.dropped,
                            (SELECT count(*) FROM queen.ephemeral_messages m
                              WHERE m.queue = p.queue AND m.partition = p.partition
                                AND m.seq > coalesce(c.cursor, -1))
                          + (SELECT count(*) FROM queen.ephemeral_leases l
                              WHERE l.queue = p.queue AND l.partition = p.partition AND l.grp = g.grp
                                AND (l.expires_at IS NULL
                                     OR (l.expires_at <= clock_timestamp() AND l.attempts < $2))) AS pending
                     FROM queen.ephemeral_groups g
                     JOIN queen.ephemeral_partitions p ON p.queue = g.queue
                     LEFT JOIN queen.ephemeral_cursors c
                            ON c.queue = p.queue AND c.partition = p.partition AND c.grp = g.grp
                     WHERE g.queue = $1
                     ORDER BY g.grp, p.partition",
                    &[&queue, &settings.retry_limit],
                )
                .await?;
            let groups = rows_into(&groups, |r| {
                Ok(EphemeralGroupDepth {
                    group: col(r, "grp")?,
                    partition: col(r, "partition")?,
                    pending: col(r, "pending")?,
                    dropped: col(r, "dropped")?,
                })
            })?;
            Ok(Some(EphemeralStatus {
                queue: queue.to_owned(),
                settings,
                live,
                rings,
                groups,
                group_count: col(&row, "group_count")?,
                drops_bounds: col(&row, "drops_bounds")?,
                drops_ttl: col(&row, "drops_ttl")?,
                drops_retry: col(&row, "drops_retry")?,
            }))
        })
    }
}
