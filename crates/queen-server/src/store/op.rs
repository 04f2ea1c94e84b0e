//! The one wrapper around every database call: `with_op!`.
//!
//! Each call names its [`DbOp`]. The wrapper checks that the schema is ready,
//! takes a connection (from the pool, or the one a push-flight slot keeps, or
//! a job's dedicated connection), runs the caller's statements, retries them a
//! bounded number of times when PostgreSQL reports a serialization failure or
//! deadlock, records the latency in `queen_db_op_duration_seconds{op}` and
//! errors in `queen_db_op_errors_total{op,class}`, and runs all of it inside
//! the span `store.<op>`.
//!
//! Deadlines (issue 16) live here too: one around the checkout in
//! [`Db::checkout`], one around the whole call in `with_op!` (the statement
//! timeout plus a margin; the health check's `SELECT 1` gets the probe
//! timeout), after which the connection is taken out of its slot and dropped
//! (`Object::take`) instead of going back to the pool. A call also ends at
//! once when the liveness probe declares the database lost
//! ([`Db::declare_lost`]): every connection opened before that moment is
//! discarded, and until a health check answers again every call but that
//! check fails at once as unavailable, so a broker whose database hangs keeps
//! answering.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use deadpool_postgres::{Object, Pool};
use prometheus::{Histogram, HistogramOpts, HistogramVec, IntCounterVec, Opts};
use tracing::Instrument;

use super::{StoreError, TxFailure};

/// Attempts for a call that hit a serialization failure or deadlock.
pub(crate) const CONFLICT_ATTEMPTS: usize = 5;

/// Latency buckets in seconds: from a sub-millisecond cached lookup to a
/// statement that ran into `statement_timeout` (30 s by default).
const LATENCY_BUCKETS: [f64; 15] = [
    0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
    30.0,
];

macro_rules! db_ops {
    ($($(#[$doc:meta])* $variant:ident => $label:literal, $span:literal;)*) => {
        /// Every kind of database call: the label of its metrics and the name of its span.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum DbOp {
            $($(#[$doc])* $variant,)*
        }

        impl DbOp {
            /// Every operation, in declaration order.
            pub const ALL: &'static [DbOp] = &[$(DbOp::$variant,)*];

            /// The `op` label of the metrics.
            pub fn label(self) -> &'static str {
                match self {
                    $(DbOp::$variant => $label,)*
                }
            }

            /// The span the call runs in (`store.<op>`).
            fn span(self) -> tracing::Span {
                match self {
                    $(DbOp::$variant => tracing::info_span!($span),)*
                }
            }
        }
    };
}

db_ops! {
    /// `queen.push_batch`: one flight of the push batcher.
    Push => "push", "store.push";
    /// `queen.claim_partition` / `queen.pop_queue`.
    Pop => "pop", "store.pop";
    /// `queen.ack_batch`.
    Ack => "ack", "store.ack";
    /// `sql/statements/consume_flight.sql`: one flight of the consumer group commit.
    Consume => "consume", "store.consume";
    /// `/transaction`: acks and pushes in one PostgreSQL transaction.
    Transaction => "transaction", "store.transaction";
    /// `queen.extend_lease`.
    ExtendLease => "extend_lease", "store.extend_lease";
    /// `sql/statements/discover_partitions.sql`: a queue's partitions with
    /// work for a group, for the wildcard pops' hint list.
    Discover => "discover", "store.discover";
    /// `queen.group_policy`: a consumer group's stored delivery policy.
    GroupPolicy => "group_policy", "store.group_policy";
    /// One queue's configuration by name.
    FindQueue => "find_queue", "store.find_queue";
    /// Creating a queue with default options on first push.
    EnsureQueue => "ensure_queue", "store.ensure_queue";
    /// `/configure`.
    ConfigureQueue => "configure_queue", "store.configure_queue";
    /// `queen.delete_queue`.
    DeleteQueue => "delete_queue", "store.delete_queue";
    /// The queues of a namespace (namespace pops).
    NamespaceQueues => "namespace_queues", "store.namespace_queues";
    /// Dead-letter listing.
    DeadLetters => "dead_letters", "store.dead_letters";
    /// Writing a trace event.
    InsertTrace => "insert_trace", "store.insert_trace";
    /// Reading trace events and names.
    Traces => "traces", "store.traces";
    /// Consumer cursors and subscriptions.
    Groups => "groups", "store.groups";
    /// Deleting a group's cursors, moving them, rewriting a subscription.
    GroupWrite => "group_write", "store.group_write";
    /// Per-partition counts and ingest history.
    Stats => "stats", "store.stats";
    /// Message listing and detail.
    Messages => "messages", "store.messages";
    /// `queen.delete_message`.
    DeleteMessage => "delete_message", "store.delete_message";
    /// Maintenance flags in `queen.system_state`.
    Flags => "flags", "store.flags";
    /// `SELECT 1` of the health check.
    Ping => "ping", "store.ping";
    /// Server settings read at start.
    Settings => "settings", "store.settings";
    /// `queen.refresh_planner_stats`.
    PlannerStats => "planner_stats", "store.planner_stats";
    /// This replica's throughput row.
    ReplicaStats => "replica_stats", "store.replica_stats";
    /// Claiming and finishing a leader-gated job cycle.
    JobCycle => "job_cycle", "store.job_cycle";
    /// One retention step.
    Retention => "retention", "store.retention";
    /// One eviction pass.
    Eviction => "eviction", "store.eviction";
    /// Reads by offset, partition discovery, queue depth (issue 21).
    Reads => "reads", "store.reads";
    /// Moving a dead letter back to its partition.
    RetryDeadLetter => "retry_dead_letter", "store.retry_dead_letter";
    /// Ephemeral queues: push, pop, ack.
    Ephemeral => "ephemeral", "store.ephemeral";
    /// Ephemeral queues: configure, reset, delete and the status reads.
    EphemeralAdmin => "ephemeral_admin", "store.ephemeral_admin";
    /// `POST /api/v1/kv`: one call in one transaction.
    Kv => "kv", "store.kv";
    /// One lock or semaphore operation.
    Locks => "locks", "store.locks";
    /// Timer schedules, cancels, peeks and lists.
    Timers => "timers", "store.timers";
    /// One sweep firing due timers (and pruning expired KV rows).
    TimerSweep => "timer_sweep", "store.timer_sweep";
    /// `/streams/v1/queries`: registering a stream query.
    StreamsRegister => "streams_register", "store.streams_register";
    /// `/streams/v1/cycle`: state, sink pushes and source ack in one transaction.
    StreamsCycle => "streams_cycle", "store.streams_cycle";
    /// `/streams/v1/state/get` and the query listing.
    StreamsState => "streams_state", "store.streams_state";
    /// Writing and reading the metrics history (analytics routes).
    Analytics => "analytics", "store.analytics";
}

impl DbOp {
    /// Whether the call needs the migrated schema; the health check does not.
    fn needs_schema(self) -> bool {
        !matches!(self, Self::Ping)
    }

    /// Position in [`DbOp::ALL`] (declaration order).
    fn index(self) -> usize {
        self as usize
    }
}

/// What the wrapper needs to know of a call's error.
pub(crate) trait OpError: From<StoreError> {
    /// True when running the call again may succeed.
    fn is_retryable(&self) -> bool;
    /// The `class` label of the error counter.
    fn class(&self) -> &'static str;
}

impl OpError for StoreError {
    fn is_retryable(&self) -> bool {
        StoreError::is_retryable(self)
    }

    fn class(&self) -> &'static str {
        StoreError::class(self)
    }
}

impl OpError for TxFailure {
    fn is_retryable(&self) -> bool {
        self.store.as_ref().is_some_and(StoreError::is_retryable)
    }

    fn class(&self) -> &'static str {
        self.store.as_ref().map_or("rejected", StoreError::class)
    }
}

/// Per-operation latency and errors, registered in the broker's registry.
#[derive(Clone)]
struct OpMetrics {
    durations: HistogramVec,
    /// `durations` resolved per operation, indexed like [`DbOp::ALL`].
    by_op: Arc<Vec<Histogram>>,
    errors: IntCounterVec,
}

impl OpMetrics {
    fn new() -> Self {
        let durations = HistogramVec::new(
            HistogramOpts::new(
                "queen_db_op_duration_seconds",
                "time of one database operation, retries and pool checkout included",
            )
            .buckets(LATENCY_BUCKETS.to_vec()),
            &["op"],
        )
        .expect("valid metric");
        let errors = IntCounterVec::new(
            Opts::new(
                "queen_db_op_errors_total",
                "database operations that failed, by class",
            ),
            &["op", "class"],
        )
        .expect("valid metric");
        let by_op = DbOp::ALL
            .iter()
            .map(|op| durations.with_label_values(&[op.label()]))
            .collect();
        Self {
            durations,
            by_op: Arc::new(by_op),
            errors,
        }
    }
}

/// The client-side deadlines of database calls.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadlines {
    /// One whole operation (all its statements and retries).
    pub(crate) op: Duration,
    /// Getting a connection from the pool (waiting and connecting included).
    pub(crate) checkout: Duration,
    /// The health check's `SELECT 1`.
    pub(crate) probe: Duration,
}

/// Whether the liveness probe declared the database lost, and since when.
#[derive(Debug, Default)]
struct Lost {
    /// Set by [`Db::declare_lost`], cleared by a health check that answers.
    down: AtomicBool,
    /// Connections created before this instant are discarded, not used.
    since: Mutex<Option<Instant>>,
    /// Bumped on every declaration: in-flight calls watch it and give up.
    epoch: tokio::sync::watch::Sender<u64>,
}

/// The pool, the readiness flag and the per-operation metrics: what every
/// database call needs. Cheap to clone (the push batcher holds one).
#[derive(Clone)]
pub(crate) struct Db {
    pool: Pool,
    ready: Arc<AtomicBool>,
    metrics: OpMetrics,
    deadlines: Deadlines,
    lost: Arc<Lost>,
}

impl Db {
    pub(super) fn new(pool: Pool, deadlines: Deadlines) -> Self {
        Self {
            pool,
            ready: Arc::new(AtomicBool::new(false)),
            metrics: OpMetrics::new(),
            deadlines,
            lost: Arc::default(),
        }
    }

    /// The deadline of one call of `op`.
    pub(crate) fn deadline(&self, op: DbOp) -> Duration {
        match op {
            DbOp::Ping => self.deadlines.probe,
            _ => self.deadlines.op,
        }
    }

    /// Declares the database lost: in-flight calls end now as unavailable,
    /// their connections and the idle ones are dropped, and new calls fail at
    /// once until [`Db::mark_answering`]. Returns whether it was up.
    pub(crate) fn declare_lost(&self) -> bool {
        let was_up = !self.lost.down.swap(true, Ordering::AcqRel);
        *self.lost.since.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        self.lost.epoch.send_modify(|e| *e += 1);
        self.pool.retain(|_, _| false);
        was_up
    }

    /// A health check answered: calls go to the database again.
    pub(crate) fn mark_answering(&self) {
        self.lost.down.store(false, Ordering::Release);
    }

    /// True while the database is declared lost.
    pub(crate) fn is_lost(&self) -> bool {
        self.lost.down.load(Ordering::Acquire)
    }

    /// A receiver that changes when the database is declared lost.
    pub(crate) fn lost_signal(&self) -> tokio::sync::watch::Receiver<u64> {
        self.lost.epoch.subscribe()
    }

    /// True for a connection opened before the database was last declared lost.
    fn is_stale(&self, conn: &Object) -> bool {
        let since = *self.lost.since.lock().unwrap_or_else(|e| e.into_inner());
        since.is_some_and(|s| Object::metrics(conn).created < s)
    }

    /// Drops the connection of `slot` for good: it does not go back to the pool.
    pub(crate) fn discard(slot: &mut Option<Object>) {
        if let Some(conn) = slot.take() {
            drop(Object::take(conn));
        }
    }

    /// The error of a call that outlived its deadline or was abandoned.
    pub(crate) fn gave_up(op: DbOp, abandoned: bool) -> StoreError {
        tracing::debug!(op = op.label(), abandoned, "database call abandoned");
        if abandoned {
            StoreError::unavailable("PostgreSQL stopped answering; call abandoned")
        } else {
            StoreError::unavailable("PostgreSQL did not answer within the deadline")
        }
    }

    pub(super) fn pool(&self) -> &Pool {
        &self.pool
    }

    /// True once the schema is known to be migrated.
    pub(super) fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    pub(super) fn set_ready(&self) {
        self.ready.store(true, Ordering::Release);
    }

    /// The metrics of every operation, for the broker's registry.
    pub(super) fn collectors(&self) -> Vec<Box<dyn prometheus::core::Collector>> {
        vec![
            Box::new(self.metrics.durations.clone()),
            Box::new(self.metrics.errors.clone()),
        ]
    }

    /// Takes the connection of `slot`, or one from the pool when it holds
    /// none, a closed one or one opened before the database was declared
    /// lost; waiting and connecting are bounded by the checkout deadline.
    pub(crate) async fn checkout<'s>(
        &self,
        op: DbOp,
        slot: &'s mut Option<Object>,
    ) -> Result<&'s mut Object, StoreError> {
        self.check_ready(op)?;
        if op != DbOp::Ping && self.is_lost() {
            return Err(StoreError::unavailable(
                "PostgreSQL is not answering (liveness probe)",
            ));
        }
        if slot.as_ref().is_some_and(|c| c.is_closed()) {
            *slot = None;
        }
        if slot.as_ref().is_some_and(|c| self.is_stale(c)) {
            Self::discard(slot);
        }
        if slot.is_none() {
            let get = async {
                loop {
                    let conn = self.pool.get().await?;
                    if !self.is_stale(&conn) {
                        return Ok::<_, StoreError>(conn);
                    }
                    drop(Object::take(conn));
                }
            };
            let conn = tokio::time::timeout(self.deadlines.checkout, get)
                .await
                .map_err(|_| {
                    StoreError::unavailable("no PostgreSQL connection within the deadline")
                })??;
            *slot = Some(conn);
        }
        slot.as_mut()
            .ok_or_else(|| StoreError::internal("connection slot empty"))
    }

    /// Forgets the connection of `slot` when it closed during a call.
    pub(crate) fn forget_closed(slot: &mut Option<Object>) {
        if slot.as_ref().is_some_and(|c| c.is_closed()) {
            *slot = None;
        }
    }

    pub(crate) fn check_ready(&self, op: DbOp) -> Result<(), StoreError> {
        if op.needs_schema() && !self.is_ready() {
            return Err(StoreError::NotReady);
        }
        Ok(())
    }

    /// Runs `call` in the operation's span and records its latency and outcome.
    pub(crate) async fn observe<T, E: OpError>(
        &self,
        op: DbOp,
        call: impl Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        let started = Instant::now();
        let result = call.instrument(op.span()).await;
        if let Some(h) = self.metrics.by_op.get(op.index()) {
            h.observe(started.elapsed().as_secs_f64());
        }
        if let Err(e) = &result {
            self.metrics
                .errors
                .with_label_values(&[op.label(), e.class()])
                .inc();
        }
        result
    }
}

/// Evaluates the future expression `$attempt` until it succeeds, fails for
/// good, or has failed [`CONFLICT_ATTEMPTS`] times with a retryable error.
macro_rules! retry_conflicts {
    ($attempt:expr) => {{
        let mut tries = 0;
        loop {
            tries += 1;
            match $attempt.await {
                Err(e)
                    if $crate::store::op::OpError::is_retryable(&e)
                        && tries < $crate::store::op::CONFLICT_ATTEMPTS =>
                {
                    continue
                }
                other => break other,
            }
        }
    }};
}

/// Runs `$body` as database operation `$op` of `$db` (a [`Db`]), with
/// `$client` bound to the connection:
///
/// - `with_op!(db, DbOp::Ack, |client| …)`: a pooled connection;
/// - `with_op!(db, DbOp::Push, slot = &mut conn, |client| …)`: the connection
///   `conn: Option<Object>` keeps between calls (the push batcher's slots),
///   taken from the pool when it holds none and forgotten when it closed;
/// - `with_op!(db, DbOp::Retention, on = &client, |client| …)`: a dedicated
///   connection outside the pool (a leader-gated job's lock connection).
///
/// `$body` is an expression of type `Result<T, E>` with `E:` [`OpError`]
/// (`?` works inside it); it runs again after a serialization failure or
/// deadlock, up to [`CONFLICT_ATTEMPTS`] times. A macro rather than a
/// function taking an async closure: the futures stay concrete, so the
/// compiler can see that they are `Send`.
macro_rules! with_op {
    ($db:expr, $op:expr, |$client:ident| $body:expr) => {{
        let mut slot = None;
        $crate::store::op::with_op!($db, $op, slot = &mut slot, |$client| $body)
    }};
    ($db:expr, $op:expr, slot = $slot:expr, |$client:ident| $body:expr) => {{
        let (db, op): (&$crate::store::op::Db, $crate::store::op::DbOp) = (&$db, $op);
        let slot: &mut Option<deadpool_postgres::Object> = $slot;
        db.observe(op, async {
            let mut lost = db.lost_signal();
            let conn = db.checkout(op, &mut *slot).await?;
            let call = async {
                $crate::store::op::retry_conflicts!(async {
                    let $client = &mut *conn;
                    $body
                })
            };
            let outcome = tokio::select! {
                r = tokio::time::timeout(db.deadline(op), call) => r.map_err(|_| false),
                _ = lost.changed() => Err(true),
            };
            match outcome {
                Ok(result) => {
                    if result
                        .as_ref()
                        .is_err_and(|e| $crate::store::op::OpError::class(e) == "unavailable")
                    {
                        // a lost link, or a server that stopped taking writes
                        $crate::store::op::Db::discard(slot);
                    }
                    $crate::store::op::Db::forget_closed(slot);
                    result
                }
                Err(abandoned) => {
                    $crate::store::op::Db::discard(slot);
                    Err($crate::store::op::Db::gave_up(op, abandoned).into())
                }
            }
        })
        .await
    }};
    ($db:expr, $op:expr, on = $conn:expr, |$client:ident| $body:expr) => {{
        let (db, op): (&$crate::store::op::Db, $crate::store::op::DbOp) = (&$db, $op);
        let conn: &tokio_postgres::Client = $conn;
        db.observe(op, async {
            db.check_ready(op)?;
            let call = async {
                $crate::store::op::retry_conflicts!(async {
                    let $client = conn;
                    $body
                })
            };
            // the dedicated connection is its owner's: on a timeout the
            // owner sees the error and drops it
            match tokio::time::timeout(db.deadline(op), call).await {
                Ok(result) => result,
                Err(_) => Err($crate::store::op::Db::gave_up(op, false).into()),
            }
        })
        .await
    }};
}

pub(crate) use {retry_conflicts, with_op};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::DbError;

    async fn attempts_until(
        succeed_at: Option<usize>,
        error: fn() -> StoreError,
    ) -> (Result<usize, StoreError>, usize) {
        let mut calls = 0;
        let result: Result<usize, StoreError> = retry_conflicts!(async {
            calls += 1;
            match succeed_at {
                Some(n) if calls >= n => Ok(calls),
                _ => Err(error()),
            }
        });
        (result, calls)
    }

    fn conflict() -> StoreError {
        StoreError::Conflict(DbError::message("deadlock detected"))
    }

    #[tokio::test]
    async fn conflicts_are_retried_a_bounded_number_of_times() {
        let (r, calls) = attempts_until(None, conflict).await;
        assert!(matches!(r, Err(StoreError::Conflict(_))));
        assert_eq!(calls, CONFLICT_ATTEMPTS);
        let (r, calls) = attempts_until(Some(3), conflict).await;
        assert_eq!(r.unwrap(), 3);
        assert_eq!(calls, 3);
    }

    #[tokio::test]
    async fn other_errors_are_not_retried() {
        let (r, calls) =
            attempts_until(None, || StoreError::Rejected(DbError::message("refused"))).await;
        assert!(r.is_err());
        assert_eq!(calls, 1);
    }

    #[test]
    fn every_operation_has_its_own_label_and_histogram() {
        let metrics = OpMetrics::new();
        assert_eq!(metrics.by_op.len(), DbOp::ALL.len());
        let mut labels: Vec<&str> = DbOp::ALL.iter().map(|o| o.label()).collect();
        labels.sort_unstable();
        labels.dedup();
        assert_eq!(labels.len(), DbOp::ALL.len());
        for (i, op) in DbOp::ALL.iter().enumerate() {
            assert_eq!(op.index(), i);
        }
    }
}
