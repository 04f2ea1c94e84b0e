//! Streams (`/streams/v1`): the queries of the streaming SDK, their state,
//! and the cycle that commits state, sink pushes and the source ack in one
//! PostgreSQL transaction.
//!
//! Tables `queen_streams.queries` and `queen_streams.state` (migration V20).
//! A cycle takes, in this order: the query row `FOR SHARE` (a concurrent
//! reset waits for it), a transaction-scoped advisory lock on (query, source
//! partition) so two cycles of one partition never interleave, the source
//! cursor `FOR UPDATE` when it acks, and the state rows it names `FOR
//! UPDATE`. Any refusal rolls everything back.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::{DateTime, SecondsFormat, Utc};
use deadpool_postgres::GenericClient;
use uuid::Uuid;

use super::ack::ack_with;
use super::op::{with_op, DbOp, OpError};
use super::push::append_with;
use super::queues::ensure_queue_with;
use super::{col, AckItem, AckStatus, AppendOutcome, NewMessage, Store, StoreError};

/// A registered query.
#[derive(Debug, Clone)]
pub struct StreamQuery {
    pub id: Uuid,
    pub name: String,
    pub source_queue: String,
    pub sink_queue: Option<String>,
    pub config_hash: String,
}

/// What a registration did.
#[derive(Debug, Clone)]
pub enum Registration {
    /// Registered: `fresh` on first registration, `reset` when a new hash
    /// replaced the stored one and the state was cleared.
    Done {
        query: StreamQuery,
        fresh: bool,
        reset: bool,
        /// State rows removed by the reset.
        cleared: u64,
    },
    /// The stored hash differs and no reset was asked for: nothing changed.
    HashMismatch { query: StreamQuery },
}

/// One state operation of a cycle: `value` (JSON text) upserts, `None` deletes.
#[derive(Debug, Clone)]
pub struct StateOp {
    pub key: String,
    pub value: Option<String>,
}

/// The source acknowledgement of a cycle.
#[derive(Debug, Clone)]
pub struct CycleAck {
    pub group: String,
    /// The last source message the cycle processed.
    pub transaction_id: String,
    pub lease_id: Uuid,
}

/// One sink push of a cycle; the queue is resolved (and created) in the cycle.
#[derive(Debug, Clone)]
pub struct CyclePush {
    pub queue: String,
    pub namespace: String,
    pub task: String,
    /// Its `queue_id` is ignored.
    pub message: NewMessage,
}

/// A cycle, validated.
#[derive(Debug, Clone)]
pub struct CycleInput {
    pub query_id: Uuid,
    pub partition_id: Uuid,
    pub state_ops: Vec<StateOp>,
    pub pushes: Vec<CyclePush>,
    pub ack: Option<CycleAck>,
    /// False: a prefix ack that keeps the lease on the rest of the batch.
    pub release_lease: bool,
}

/// What a committed cycle did.
#[derive(Debug, Clone)]
pub struct CycleOutcome {
    pub source_queue: String,
    pub state_ops_applied: usize,
    /// State rows created and removed (for the state-rows gauge).
    pub rows_created: i64,
    pub rows_removed: i64,
    pub pushed: Vec<AppendOutcome>,
    /// Set when the cycle acked: whether the source lease was released.
    pub acked: Option<AckDone>,
}

/// The source ack of a committed cycle.
#[derive(Debug, Clone)]
pub struct AckDone {
    pub lease_released: bool,
    pub partition_name: Option<String>,
}

/// Why a cycle was refused (nothing was written).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CycleRefusal {
    UnknownQuery,
    /// Not a partition of the query's source queue.
    UnknownPartition,
    /// The acked transactionId is no message of the source partition.
    MessageNotFound,
    /// The acked message is already committed for the group (a replayed or
    /// superseded cycle).
    AlreadyAcknowledged,
    /// The lease is not the group's live lease on the partition, or does not
    /// cover the acked message.
    StaleLease,
    /// A delete names a key that holds no state (someone else emitted it).
    MissingKey(String),
}

/// A refused cycle, or a database failure.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CycleError {
    #[error("cycle refused: {0:?}")]
    Refused(CycleRefusal),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<tokio_postgres::Error> for CycleError {
    fn from(e: tokio_postgres::Error) -> Self {
        Self::Store(e.into())
    }
}

impl From<deadpool_postgres::PoolError> for CycleError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        Self::Store(e.into())
    }
}

impl OpError for CycleError {
    fn is_retryable(&self) -> bool {
        matches!(self, Self::Store(e) if e.is_retryable())
    }

    fn class(&self) -> &'static str {
        match self {
            Self::Refused(_) => "rejected",
            Self::Store(e) => e.class(),
        }
    }
}

/// One state row as read.
#[derive(Debug, Clone)]
pub struct StateRow {
    pub key: String,
    /// JSON text.
    pub value: String,
    pub updated_at: String,
}

/// Filters of a state read, ANDed.
#[derive(Debug, Clone, Default)]
pub struct StateFilter {
    /// Empty: every key.
    pub keys: Vec<String>,
    pub key_prefix: Option<String>,
    /// Rows whose value has a numeric `windowEnd` at or before this (epoch ms).
    pub ripe_at_or_before: Option<f64>,
}

/// Why a state read found nothing to read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateMiss {
    UnknownQuery,
    UnknownPartition,
}

const QUERY_COLUMNS: &str = "id, name, source_queue, sink_queue, config_hash";

fn query_from_row(r: &tokio_postgres::Row) -> Result<StreamQuery, StoreError> {
    Ok(StreamQuery {
        id: col(r, "id")?,
        name: col(r, "name")?,
        source_queue: col(r, "source_queue")?,
        sink_queue: col(r, "sink_queue")?,
        config_hash: col(r, "config_hash")?,
    })
}

impl Store {
    /// Registers a query by name; see [`Registration`].
    pub async fn register_stream_query(
        &self,
        name: &str,
        source_queue: &str,
        sink_queue: Option<&str>,
        config_hash: &str,
        reset: bool,
    ) -> Result<Registration, StoreError> {
        with_op!(self.db, DbOp::StreamsRegister, |client| {
            let tx = client.transaction().await?;
            let select = format!(
                "SELECT {QUERY_COLUMNS} FROM queen_streams.queries WHERE name = $1 FOR UPDATE"
            );
            let insert = format!(
                "INSERT INTO queen_streams.queries (id, name, source_queue, sink_queue, config_hash)
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (name) DO NOTHING RETURNING {QUERY_COLUMNS}"
            );
            let existing = match tx.query_opt(select.as_str(), &[&name]).await? {
                Some(r) => Some(query_from_row(&r)?),
                None => {
                    let id = Uuid::now_v7();
                    match tx
                        .query_opt(
                            insert.as_str(),
                            &[&id, &name, &source_queue, &sink_queue, &config_hash],
                        )
                        .await?
                    {
                        Some(r) => {
                            let query = query_from_row(&r)?;
                            tx.commit().await?;
                            return Ok(Registration::Done {
                                query,
                                fresh: true,
                                reset: false,
                                cleared: 0,
                            });
                        }
                        // a concurrent registration won; a new statement sees its row
                        None => Some(query_from_row(
                            &tx.query_one(select.as_str(), &[&name]).await?,
                        )?),
                    }
                }
            };
            let Some(query) = existing else {
                return Err(StoreError::unavailable("query row vanished"));
            };
            let mismatch = query.config_hash != config_hash;
            if mismatch && !reset {
                return Ok(Registration::HashMismatch { query });
            }
            let mut cleared = 0;
            if mismatch {
                cleared = tx
                    .execute(
                        "DELETE FROM queen_streams.state WHERE query_id = $1",
                        &[&query.id],
                    )
                    .await?;
            }
            let row = tx
                .query_one(
                    &format!(
                        "UPDATE queen_streams.queries
                         SET source_queue = $2, sink_queue = $3, config_hash = $4, updated_at = now()
                         WHERE id = $1 RETURNING {QUERY_COLUMNS}"
                    ),
                    &[&query.id, &source_queue, &sink_queue, &config_hash],
                )
                .await?;
            let query = query_from_row(&row)?;
            tx.commit().await?;
            Ok(Registration::Done {
                query,
                fresh: false,
                reset: mismatch,
                cleared,
            })
        })
    }

    /// Reads state rows of (query, source partition).
    pub async fn stream_state(
        &self,
        query_id: Uuid,
        partition_id: Uuid,
        filter: &StateFilter,
    ) -> Result<Result<Vec<StateRow>, StateMiss>, StoreError> {
        with_op!(self.db, DbOp::StreamsState, |client| {
            let Some(source) = query_source(&*client, query_id).await? else {
                return Ok(Err(StateMiss::UnknownQuery));
            };
            if !is_source_partition(&*client, partition_id, &source).await? {
                return Ok(Err(StateMiss::UnknownPartition));
            }
            let stmt = client
                .prepare_cached(
                    "SELECT key, value::text AS value, updated_at FROM queen_streams.state
                     WHERE query_id = $1 AND partition_id = $2
                       AND (cardinality($3::text[]) = 0 OR key = ANY ($3))
                       AND ($4::text IS NULL OR starts_with(key, $4))
                       AND ($5::float8 IS NULL
                            OR (jsonb_typeof(value -> 'windowEnd') = 'number'
                                AND (value ->> 'windowEnd')::float8 <= $5))
                     ORDER BY key",
                )
                .await?;
            let rows = client
                .query(
                    &stmt,
                    &[
                        &query_id,
                        &partition_id,
                        &filter.keys,
                        &filter.key_prefix,
                        &filter.ripe_at_or_before,
                    ],
                )
                .await?;
            let mut out = Vec::with_capacity(rows.len());
            for r in &rows {
                let at: DateTime<Utc> = col(r, "updated_at")?;
                out.push(StateRow {
                    key: col(r, "key")?,
                    value: col(r, "value")?,
                    updated_at: at.to_rfc3339_opts(SecondsFormat::Millis, true),
                });
            }
            Ok(Ok(out))
        })
    }

    /// Commits one cycle, all of it or nothing; see the module docs.
    pub async fn stream_cycle(&self, input: &CycleInput) -> Result<CycleOutcome, CycleError> {
        with_op!(self.db, DbOp::StreamsCycle, |client| {
            let tx = client.transaction().await?;
            let outcome = cycle_in(&tx, input).await?;
            tx.commit().await?;
            Ok(outcome)
        })
    }

    /// Registered queries by name, with their state row counts and the lag
    /// of their default consumer group (`streams.<name>`) on the source.
    pub async fn stream_queries(&self) -> Result<Vec<StreamQueryStats>, StoreError> {
        with_op!(self.db, DbOp::StreamsState, |client| {
            let rows = client
                .query(
                    "SELECT q.id, q.name, q.source_queue, q.sink_queue, q.config_hash,
                            (SELECT count(*) FROM queen_streams.state s
                             WHERE s.query_id = q.id) AS state_rows,
                            (SELECT coalesce(sum(greatest(p.next_offset - 1
                                     - coalesce(lc.committed_offset, 0), 0)), 0)::bigint
                             FROM queen.queues sq
                             JOIN queen.partitions p ON p.queue_id = sq.id
                             LEFT JOIN queen.log_consumers lc
                               ON lc.partition_id = p.id
                              AND lc.consumer_group = 'streams.' || q.name
                             WHERE sq.name = q.source_queue) AS lag
                     FROM queen_streams.queries q ORDER BY q.name",
                    &[],
                )
                .await?;
            rows.iter()
                .map(|r| {
                    Ok(StreamQueryStats {
                        query: query_from_row(r)?,
                        state_rows: col(r, "state_rows")?,
                        lag: col(r, "lag")?,
                    })
                })
                .collect()
        })
    }
}

/// A query as listed: its state rows and the lag of its default group.
#[derive(Debug, Clone)]
pub struct StreamQueryStats {
    pub query: StreamQuery,
    pub state_rows: i64,
    /// Source messages not yet acknowledged by `streams.<name>`.
    pub lag: i64,
}

async fn query_source(
    client: &impl GenericClient,
    query_id: Uuid,
) -> Result<Option<String>, StoreError> {
    let stmt = client
        .prepare_cached("SELECT source_queue FROM queen_streams.queries WHERE id = $1")
        .await?;
    Ok(match client.query_opt(&stmt, &[&query_id]).await? {
        Some(r) => Some(col(&r, "source_queue")?),
        None => None,
    })
}

async fn is_source_partition(
    client: &impl GenericClient,
    partition_id: Uuid,
    source_queue: &str,
) -> Result<bool, StoreError> {
    let stmt = client
        .prepare_cached(
            "SELECT 1 FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
             WHERE p.id = $1 AND q.name = $2",
        )
        .await?;
    Ok(client
        .query_opt(&stmt, &[&partition_id, &source_queue])
        .await?
        .is_some())
}

fn refused(r: CycleRefusal) -> CycleError {
    CycleError::Refused(r)
}

async fn cycle_in(
    tx: &deadpool_postgres::Transaction<'_>,
    input: &CycleInput,
) -> Result<CycleOutcome, CycleError> {
    let (qid, pid) = (input.query_id, input.partition_id);
    // 1. the query (a reset waits for this cycle) and the source partition
    let stmt = tx
        .prepare_cached("SELECT source_queue FROM queen_streams.queries WHERE id = $1 FOR SHARE")
        .await?;
    let Some(row) = tx.query_opt(&stmt, &[&qid]).await? else {
        return Err(refused(CycleRefusal::UnknownQuery));
    };
    let source_queue: String = col(&row, "source_queue")?;
    if !is_source_partition(tx, pid, &source_queue).await? {
        return Err(refused(CycleRefusal::UnknownPartition));
    }
    // 2. cycles of one (query, partition) commit one after the other
    let stmt = tx
        .prepare_cached(
            "SELECT pg_advisory_xact_lock(hashtextextended($1::uuid::text || '/' || $2::uuid::text, 20))",
        )
        .await?;
    tx.execute(&stmt, &[&qid, &pid]).await?;

    // 3. the state: every delete must find its row
    let keys: BTreeSet<&str> = input.state_ops.iter().map(|o| o.key.as_str()).collect();
    let mut created = 0i64;
    let mut removed = 0i64;
    if !keys.is_empty() {
        let key_list: Vec<&str> = keys.iter().copied().collect();
        let stmt = tx
            .prepare_cached(
                "SELECT key FROM queen_streams.state
                 WHERE query_id = $1 AND partition_id = $2 AND key = ANY ($3)
                 ORDER BY key FOR UPDATE",
            )
            .await?;
        let existing: BTreeSet<String> = tx
            .query(&stmt, &[&qid, &pid, &key_list])
            .await?
            .iter()
            .map(|r| col::<String>(r, "key"))
            .collect::<Result<_, _>>()?;
        // replay the ops in order: the final value of each key
        let mut last: BTreeMap<&str, Option<&str>> = BTreeMap::new();
        for op in &input.state_ops {
            let present = match last.get(op.key.as_str()) {
                Some(v) => v.is_some(),
                None => existing.contains(&op.key),
            };
            if op.value.is_none() && !present {
                return Err(refused(CycleRefusal::MissingKey(op.key.clone())));
            }
            last.insert(op.key.as_str(), op.value.as_deref());
        }
        let gone: Vec<&str> = last
            .iter()
            .filter(|(k, v)| v.is_none() && existing.contains(**k))
            .map(|(k, _)| *k)
            .collect();
        let (up_keys, up_values): (Vec<&str>, Vec<&str>) =
            last.iter().filter_map(|(k, v)| v.map(|v| (*k, v))).unzip();
        created = i64::try_from(up_keys.iter().filter(|k| !existing.contains(**k)).count())
            .unwrap_or_default();
        removed = i64::try_from(gone.len()).unwrap_or_default();
        if !gone.is_empty() {
            let stmt = tx
                .prepare_cached(
                    "DELETE FROM queen_streams.state
                     WHERE query_id = $1 AND partition_id = $2 AND key = ANY ($3)",
                )
                .await?;
            tx.execute(&stmt, &[&qid, &pid, &gone]).await?;
        }
        if !up_keys.is_empty() {
            let stmt = tx
                .prepare_cached(
                    "INSERT INTO queen_streams.state (query_id, partition_id, key, value, updated_at)
                     SELECT $1, $2, t.k, t.v::jsonb, now()
                     FROM unnest($3::text[], $4::text[]) AS t(k, v)
                     ON CONFLICT (query_id, partition_id, key)
                     DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at",
                )
                .await?;
            tx.execute(&stmt, &[&qid, &pid, &up_keys, &up_values])
                .await?;
        }
    }

    // 4. the source ack, through the ack path's own SQL
    let mut acked = None;
    if let Some(ack) = &input.ack {
        let stmt = tx
            .prepare_cached(
                "SELECT k.msg_offset FROM queen.message_keys k
                 WHERE k.partition_id = $1 AND k.transaction_id = $2",
            )
            .await?;
        let Some(row) = tx.query_opt(&stmt, &[&pid, &ack.transaction_id]).await? else {
            return Err(refused(CycleRefusal::MessageNotFound));
        };
        let offset: i64 = col(&row, "msg_offset")?;
        let stmt = tx
            .prepare_cached(
                "SELECT committed_offset, lease_id, lease_end_offset,
                        coalesce(lease_expires_at > now(), false) AS live
                 FROM queen.log_consumers
                 WHERE partition_id = $1 AND consumer_group = $2 FOR UPDATE",
            )
            .await?;
        let Some(cur) = tx.query_opt(&stmt, &[&pid, &ack.group]).await? else {
            return Err(refused(CycleRefusal::StaleLease));
        };
        let committed: i64 = col(&cur, "committed_offset")?;
        let lease: Option<Uuid> = col(&cur, "lease_id")?;
        let lease_end: Option<i64> = col(&cur, "lease_end_offset")?;
        let live: bool = col(&cur, "live")?;
        if offset <= committed {
            return Err(refused(CycleRefusal::AlreadyAcknowledged));
        }
        if !live || lease != Some(ack.lease_id) || lease_end.is_none_or(|end| offset > end) {
            return Err(refused(CycleRefusal::StaleLease));
        }
        let item = AckItem {
            partition_id: pid,
            transaction_id: ack.transaction_id.clone(),
            lease_id: Some(ack.lease_id),
            status: AckStatus::Completed,
            error: None,
        };
        let out = ack_with(tx, &ack.group, std::slice::from_ref(&item), true).await?;
        let mut lease_released = out.first().is_some_and(|o| o.lease_released);
        if input.release_lease && !lease_released {
            // the rest of the batch was not processed: it is delivered again
            let stmt = tx
                .prepare_cached(
                    "UPDATE queen.log_consumers SET lease_expires_at = NULL
                     WHERE partition_id = $1 AND consumer_group = $2",
                )
                .await?;
            tx.execute(&stmt, &[&pid, &ack.group]).await?;
            lease_released = true;
        }
        acked = Some(AckDone {
            lease_released,
            partition_name: out.first().and_then(|o| o.partition_name.clone()),
        });
    }

    // 5. the sink pushes, through the push path's own SQL
    let mut pushed = Vec::new();
    if !input.pushes.is_empty() {
        let mut queue_ids: HashMap<&str, Uuid> = HashMap::new();
        let mut messages = Vec::with_capacity(input.pushes.len());
        for p in &input.pushes {
            let queue_id = match queue_ids.get(p.queue.as_str()) {
                Some(id) => *id,
                None => {
                    let row = ensure_queue_with(tx, &p.queue, &p.namespace, &p.task).await?;
                    queue_ids.insert(p.queue.as_str(), row.id);
                    row.id
                }
            };
            messages.push(NewMessage {
                queue_id,
                ..p.message.clone()
            });
        }
        pushed = append_with(tx, &messages, false).await?;
    }

    Ok(CycleOutcome {
        source_queue,
        state_ops_applied: input.state_ops.len(),
        rows_created: created,
        rows_removed: removed,
        pushed,
        acked,
    })
}
