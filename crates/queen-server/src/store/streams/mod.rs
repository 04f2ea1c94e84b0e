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
//!
//! The code is split by concern: this file holds the types and the lookups
//! both sides share, `queries.rs` registration, state reads and the
//! dashboard's list, `cycle.rs` the cycle.

mod cycle;
mod queries;

use deadpool_postgres::GenericClient;
use uuid::Uuid;

use super::op::OpError;
use super::AppendOutcome;
use super::{col, NewMessage, StoreError};

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
    /// Source messages acknowledged, counted from the start of the leased
    /// batch (a prefix cycle moves the cursor by this many).
    pub count: Option<u64>,
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
