//! PostgreSQL: the only module that knows SQL.
//!
//! [`Store`] owns the connection pool and has one typed method per statement,
//! in one file per use case: `queues`, `push` (with the group-commit
//! `batcher` next to it), `pop` and `ack` (with their group commit,
//! `flights` and `consume`), `transaction`, `maintenance`, the
//! admin reads and writes under [`admin`], and the statements of the
//! background jobs in [`jobs`]. Every call goes through one wrapper,
//! `with_op!(db, DbOp::…, |client| …)` in `op.rs`: readiness, connection, the bounded
//! retry of serialization failures and deadlocks, a latency histogram and a
//! `store.<op>` span. `error.rs` turns SQLSTATEs into [`StoreError`].
//!
//! The hot path is a handful of stored functions of the schema, so a push, a
//! pop and an ack batch each cost one round trip. Rows are read by column
//! name.

mod ack;
pub mod admin;
mod batcher;
mod browse;
mod bundle;
mod connect;
mod consume;
pub mod dbcopy;
mod ephemeral;
mod error;
mod flights;
pub mod import;
pub mod jobs;
mod kv;
mod linger;
mod liveness;
mod locks;
mod maintenance;
mod migrate;
mod op;
mod pool;
mod pop;
mod push;
mod queues;
mod reads;
pub mod recurrence;
mod streams;
mod timer_fire;
mod timers;
pub(crate) mod tls;
mod transaction;

pub use ack::{AckItem, AckOutcome, AckStatus, Acked};
pub use admin::*;
pub use browse::{KvEntry, KvNamespace, TimerQueue};
pub use bundle::BundleOutcome;
pub use ephemeral::*;
pub use error::{DbError, StoreError};
pub use kv::{KvKind, KvOp, KvOutcome, KvPrecondition, KvResult, KvRow};
pub use liveness::Probe;
pub use locks::{permit_key, LockOutcome, Permit, LOCKS_NS};
pub use migrate::{is_foreign_schema, migrations_fingerprint, run_migrations};
pub use op::DbOp;
pub use pool::PoolStatus;
pub use pop::{Claim, ClaimRequest, ClaimedMessage, LeaseExtension};
pub use push::{fold_repeats, full_queue_error, AppendOutcome, AppendStatus, Folded, NewMessage};
pub use queues::QueueRow;
pub use reads::*;
pub use streams::{
    AckDone, CycleAck, CycleError, CycleInput, CycleOutcome, CyclePush, CycleRefusal, Registration,
    StateFilter, StateMiss, StateOp, StateRow, StreamQuery, StreamQueryStats,
};
pub use timers::{FiredTimer, Sweep, TimerRow, TimerSchedule, TimerVerdict, TimerWrite};
pub use transaction::{TxFailure, TxOperation, TxOutcome};

use tokio_postgres::types::FromSql;
use tokio_postgres::Row;

/// The broker's handle on PostgreSQL.
pub struct Store {
    db: op::Db,
    hosts: connect::Hosts,
    batcher: batcher::Batcher,
    consume_flights: flights::Flights<consume::ConsumeFly>,
    flight_metrics: flights::FlightMetrics,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("pool", self.db.pool())
            .field("ready", &self.db.is_ready())
            .finish_non_exhaustive()
    }
}

/// Reads column `name` of `row`; a missing column or a type mismatch is an
/// error, not a panic.
fn col<'a, T: FromSql<'a>>(row: &'a Row, name: &str) -> Result<T, StoreError> {
    Ok(row.try_get(name)?)
}

/// Converts every row with `f`.
fn rows_into<T>(
    rows: &[Row],
    f: impl Fn(&Row) -> Result<T, StoreError>,
) -> Result<Vec<T>, StoreError> {
    rows.iter().map(f).collect()
}
