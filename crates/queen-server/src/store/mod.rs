//! PostgreSQL: the only module that knows SQL.
//!
//! [`Store`] owns the connection pool and has one typed method per statement.
//! The hot path is a handful of stored functions (migrations/V2__functions.sql),
//! so a push, a pop and an ack batch each cost one round trip.

mod admin;
mod batcher;
mod error;
pub mod jobs;
mod migrate;
mod tls;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use deadpool_postgres::{GenericClient, Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use queen_proto::QueueOptions;
use tokio_postgres::Row;
use uuid::Uuid;

pub use admin::*;
pub use error::StoreError;
pub use migrate::{migrations_fingerprint, run_migrations};

use crate::config::DbConfig;

/// Attempts for a statement that hit a serialization failure or deadlock.
const CONFLICT_ATTEMPTS: usize = 5;

/// The broker's handle on PostgreSQL.
pub struct Store {
    pool: Pool,
    pg_config: tokio_postgres::Config,
    tls: tls::Connector,
    ready: Arc<AtomicBool>,
    batcher: batcher::Batcher,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("pool", &self.pool)
            .field("ready", &self.ready)
            .finish_non_exhaustive()
    }
}

/// Connection pool occupancy.
#[derive(Debug, Clone, Copy)]
pub struct PoolStatus {
    pub max_size: usize,
    pub open: usize,
    pub idle: usize,
    pub waiting: usize,
}

impl PoolStatus {
    /// Connections in use by a request right now.
    pub fn active(&self) -> usize {
        self.open.saturating_sub(self.idle)
    }
}

/// A queue with its full option set.
#[derive(Debug, Clone)]
pub struct QueueRow {
    pub id: Uuid,
    pub name: String,
    pub namespace: String,
    pub task: String,
    pub options: QueueOptions,
    pub config_version: i64,
    pub created_at: DateTime<Utc>,
}

/// One message to append, already validated.
#[derive(Debug, Clone)]
pub struct NewMessage {
    pub queue_id: Uuid,
    pub partition: String,
    pub message_id: Uuid,
    pub transaction_id: String,
    pub trace_id: Option<Uuid>,
    /// The payload as JSON text, exactly as it will be delivered.
    pub payload: String,
    pub producer_sub: Option<String>,
}

/// What happened to one appended message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendStatus {
    Queued,
    /// The transactionId is taken; the message id is the original's.
    Duplicate,
}

/// The outcome of one [`NewMessage`], by its position in the input.
#[derive(Debug, Clone)]
pub struct AppendOutcome {
    pub index: usize,
    pub status: AppendStatus,
    pub message_id: Uuid,
    pub partition_id: Uuid,
}

/// What a pop asks for; the queue's own options supply delay, window and lease time.
#[derive(Debug, Clone)]
pub struct ClaimRequest<'a> {
    pub queue: &'a QueueRow,
    /// `None` for the wildcard route.
    pub partition: Option<&'a str>,
    pub group: &'a str,
    pub batch: i32,
    pub max_partitions: i32,
    pub lease_id: Uuid,
    pub auto_ack: bool,
    pub subscription_mode: &'a str,
    pub subscription_from: Option<&'a str>,
    pub holder: &'a str,
    /// Wildcard pops: partitions written to lately, tried before the walk.
    pub hints: &'a [String],
    /// Wildcard pops: whether the database may walk the queue when the
    /// hints do not fill the pop.
    pub walk: bool,
}

/// What a pop claimed.
#[derive(Debug, Default)]
pub struct Claim {
    pub messages: Vec<ClaimedMessage>,
    /// Wildcard pops: hinted partitions with nothing past the group's cursor.
    pub drained_hints: Vec<String>,
}

/// A message handed out by a pop.
#[derive(Debug, Clone)]
pub struct ClaimedMessage {
    pub partition_id: Uuid,
    pub partition_name: String,
    pub offset: i64,
    pub message_id: Uuid,
    pub transaction_id: String,
    pub trace_id: Option<Uuid>,
    pub payload: String,
    pub producer_sub: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// One acknowledgement.
#[derive(Debug, Clone)]
pub struct AckItem {
    pub partition_id: Uuid,
    pub transaction_id: String,
    pub lease_id: Option<Uuid>,
    /// `completed`, `success`, `failed`, `retry` or `dlq`; anything else fails the item.
    pub status: String,
    pub error: Option<String>,
}

/// The outcome of one [`AckItem`], by its position in the input.
#[derive(Debug, Clone)]
pub struct AckOutcome {
    pub index: usize,
    pub success: bool,
    pub error: Option<String>,
    pub queue_name: Option<String>,
    pub partition_name: Option<String>,
    pub lease_released: bool,
    pub dlq: bool,
}

/// The result of a lease extension.
#[derive(Debug, Clone)]
pub struct LeaseExtension {
    pub expires_at: Option<DateTime<Utc>>,
    pub renewed: i32,
    /// Why nothing was extended.
    pub reason: Option<String>,
}

/// One operation of `/transaction`.
#[derive(Debug, Clone)]
pub enum TxOperation {
    /// Append one message; its `queue_id` is ignored, the queue is resolved (and
    /// created) inside the transaction from `queue`.
    Push {
        queue: String,
        namespace: String,
        task: String,
        message: NewMessage,
    },
    Ack {
        group: String,
        item: AckItem,
    },
}

/// The outcome of one [`TxOperation`].
#[derive(Debug, Clone)]
pub enum TxOutcome {
    Pushed(AppendOutcome),
    Acked(AckOutcome),
}

/// A transaction that failed and was rolled back.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct TxFailure {
    /// Index of the operation that failed.
    pub failed_at: usize,
    pub message: String,
    /// Outcomes of the operations before the failing one (nothing of them was kept).
    pub done: Vec<TxOutcome>,
    /// Set when the failure was the database itself, not a refused operation.
    pub store: Option<StoreError>,
}

const QUEUE_COLUMNS: &str = "id, name, namespace, task, lease_time, retry_limit, retry_delay, \
     max_size, ttl, priority, delayed_processing, window_buffer, dead_letter_queue, \
     dlq_after_max_retries, retention_enabled, retention_seconds, completed_retention_seconds, \
     encryption_enabled, max_wait_time_seconds, config_version, created_at";

fn queue_from_row(row: &Row) -> QueueRow {
    QueueRow {
        id: row.get("id"),
        name: row.get("name"),
        namespace: row.get("namespace"),
        task: row.get("task"),
        options: QueueOptions {
            priority: row.get("priority"),
            lease_time: row.get("lease_time"),
            retry_limit: row.get("retry_limit"),
            retry_delay: row.get("retry_delay"),
            max_size: row.get("max_size"),
            ttl: row.get("ttl"),
            dead_letter_queue: row.get("dead_letter_queue"),
            dlq_after_max_retries: row.get("dlq_after_max_retries"),
            delayed_processing: row.get("delayed_processing"),
            window_buffer: row.get("window_buffer"),
            retention_seconds: row.get("retention_seconds"),
            completed_retention_seconds: row.get("completed_retention_seconds"),
            retention_enabled: row.get("retention_enabled"),
            encryption_enabled: row.get("encryption_enabled"),
            max_wait_time_seconds: row.get("max_wait_time_seconds"),
        },
        config_version: row.get("config_version"),
        created_at: row.get("created_at"),
    }
}

impl Store {
    /// Builds the pool; no connection is opened until the first statement.
    pub fn new(db: &DbConfig) -> Result<Self, StoreError> {
        let mut pg = match &db.url {
            Some(url) => url
                .parse::<tokio_postgres::Config>()
                .map_err(|e| StoreError::Other(format!("invalid DATABASE_URL: {e}")))?,
            None => {
                let mut c = tokio_postgres::Config::new();
                c.host(&db.host)
                    .port(db.port)
                    .user(&db.user)
                    .password(&db.password)
                    .dbname(&db.dbname);
                c
            }
        };
        pg.connect_timeout(db.connect_timeout)
            .application_name("queen-server")
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(60))
            .options(format!(
                "-c statement_timeout={} -c lock_timeout={}",
                db.statement_timeout.as_millis(),
                db.lock_timeout.as_millis()
            ));
        let tls = tls::configure(db, &mut pg)?;
        let manager = Manager::from_config(
            pg.clone(),
            tls.clone(),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(db.pool_size)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(db.connect_timeout.max(Duration::from_secs(5))))
            .create_timeout(Some(db.connect_timeout))
            .recycle_timeout(Some(db.connect_timeout))
            .build()
            .map_err(|e| StoreError::Other(format!("building pool: {e}")))?;
        let ready = Arc::new(AtomicBool::new(false));
        Ok(Self {
            batcher: batcher::Batcher::start(pool.clone(), ready.clone()),
            pool,
            pg_config: pg,
            tls,
            ready,
        })
    }

    /// Opens a dedicated connection outside the pool (migrations, advisory locks).
    pub async fn connect_direct(&self) -> Result<tokio_postgres::Client, StoreError> {
        let (client, conn) = self.pg_config.connect(self.tls.clone()).await?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "direct connection closed");
            }
        });
        Ok(client)
    }

    /// Applies pending migrations and marks the store ready.
    pub async fn migrate(&self) -> Result<usize, StoreError> {
        let mut client = self.connect_direct().await?;
        let applied = run_migrations(&mut client).await?;
        self.ready.store(true, Ordering::Release);
        Ok(applied)
    }

    /// True once the schema is known to be migrated.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    async fn client(&self) -> Result<deadpool_postgres::Client, StoreError> {
        if !self.is_ready() {
            return Err(StoreError::NotReady);
        }
        Ok(self.pool.get().await?)
    }

    /// Closes pooled connections idle for longer than `idle`; returns how many.
    pub fn close_idle_connections(&self, idle: Duration) -> usize {
        self.pool
            .retain(|_, metrics| metrics.last_used() < idle)
            .removed
            .len()
    }

    /// The pool's limit, open connections, idle connections and waiting requests.
    pub fn pool_status(&self) -> PoolStatus {
        let s = self.pool.status();
        PoolStatus {
            max_size: s.max_size,
            open: s.size,
            idle: s.available,
            waiting: s.waiting,
        }
    }

    /// Answers whether the database takes a trivial query.
    pub async fn ping(&self) -> Result<(), StoreError> {
        let client = self.pool.get().await?;
        client.simple_query("SELECT 1").await?;
        Ok(())
    }

    /// Reads `max_connections` of the server.
    pub async fn max_connections(&self) -> Result<i64, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_one("SELECT current_setting('max_connections')::bigint", &[])
            .await?;
        Ok(row.get(0))
    }

    /// Loads a queue by name.
    pub async fn find_queue(&self, name: &str) -> Result<Option<QueueRow>, StoreError> {
        let client = self.client().await?;
        let sql = format!("SELECT {QUEUE_COLUMNS} FROM queen.queues WHERE name = $1");
        let stmt = client.prepare_cached(&sql).await?;
        let row = client.query_opt(&stmt, &[&name]).await?;
        Ok(row.as_ref().map(queue_from_row))
    }

    /// Creates a queue with default options unless it exists; returns it either way.
    pub async fn ensure_queue(
        &self,
        name: &str,
        namespace: &str,
        task: &str,
    ) -> Result<QueueRow, StoreError> {
        let client = self.client().await?;
        ensure_queue_with(&client, name, namespace, task).await
    }

    /// Creates or fully reconfigures a queue and makes sure its `Default`
    /// partition exists. Returns the queue and that partition's id.
    pub async fn configure_queue(
        &self,
        name: &str,
        namespace: &str,
        task: &str,
        o: &QueueOptions,
    ) -> Result<(QueueRow, Uuid), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let sql = format!(
            "INSERT INTO queen.queues (id, name, namespace, task, lease_time, retry_limit, retry_delay,
                 max_size, ttl, priority, delayed_processing, window_buffer, dead_letter_queue,
                 dlq_after_max_retries, retention_enabled, retention_seconds,
                 completed_retention_seconds, encryption_enabled, max_wait_time_seconds)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)
             ON CONFLICT (name) DO UPDATE SET
                 namespace = EXCLUDED.namespace, task = EXCLUDED.task,
                 lease_time = EXCLUDED.lease_time, retry_limit = EXCLUDED.retry_limit,
                 retry_delay = EXCLUDED.retry_delay, max_size = EXCLUDED.max_size, ttl = EXCLUDED.ttl,
                 priority = EXCLUDED.priority, delayed_processing = EXCLUDED.delayed_processing,
                 window_buffer = EXCLUDED.window_buffer, dead_letter_queue = EXCLUDED.dead_letter_queue,
                 dlq_after_max_retries = EXCLUDED.dlq_after_max_retries,
                 retention_enabled = EXCLUDED.retention_enabled,
                 retention_seconds = EXCLUDED.retention_seconds,
                 completed_retention_seconds = EXCLUDED.completed_retention_seconds,
                 encryption_enabled = EXCLUDED.encryption_enabled,
                 max_wait_time_seconds = EXCLUDED.max_wait_time_seconds,
                 config_version = queen.queues.config_version + 1,
                 updated_at = now()
             RETURNING {QUEUE_COLUMNS}"
        );
        let row = tx
            .query_one(
                &sql,
                &[
                    &Uuid::now_v7(),
                    &name,
                    &namespace,
                    &task,
                    &o.lease_time,
                    &o.retry_limit,
                    &o.retry_delay,
                    &o.max_size,
                    &o.ttl,
                    &o.priority,
                    &o.delayed_processing,
                    &o.window_buffer,
                    &o.dead_letter_queue,
                    &o.dlq_after_max_retries,
                    &o.retention_enabled,
                    &o.retention_seconds,
                    &o.completed_retention_seconds,
                    &o.encryption_enabled,
                    &o.max_wait_time_seconds,
                ],
            )
            .await?;
        let queue = queue_from_row(&row);
        // as in ensure_queue_with: the fallback SELECT is its own statement
        let inserted = tx
            .query_opt(
                "INSERT INTO queen.partitions (id, queue_id, name) VALUES (gen_random_uuid(), $1, 'Default')
                 ON CONFLICT (queue_id, name) DO NOTHING RETURNING id",
                &[&queue.id],
            )
            .await?;
        let partition_id: Uuid = match inserted {
            Some(row) => row.get(0),
            None => tx
                .query_one(
                    "SELECT id FROM queen.partitions WHERE queue_id = $1 AND name = 'Default'",
                    &[&queue.id],
                )
                .await?
                .get(0),
        };
        tx.commit().await?;
        Ok((queue, partition_id))
    }

    /// Appends messages; see `queen.push_batch`. Items must be free of repeated
    /// (queue, partition, transactionId) keys. Concurrent calls share a
    /// transaction (group commit, see `store/batcher.rs`).
    pub async fn append(&self, items: &[NewMessage]) -> Result<Vec<AppendOutcome>, StoreError> {
        if !self.is_ready() {
            return Err(StoreError::NotReady);
        }
        if items.is_empty() {
            return Ok(Vec::new());
        }
        self.batcher.append(items.to_vec()).await
    }

    /// Claims messages for a consumer group; see `queen.claim_partition`/`queen.pop_queue`.
    pub async fn claim(&self, req: &ClaimRequest<'_>) -> Result<Claim, StoreError> {
        let client = self.client().await?;
        let o = &req.queue.options;
        let rows = match req.partition {
            Some(partition) => {
                let stmt = client
                    .prepare_cached(
                        "SELECT pt.id, pt.name, m.*
                         FROM queen.partitions pt,
                              LATERAL queen.claim_partition(pt.id, $3, pt.name, $4, $5, $6, $7, $8,
                                                            $9, $10, pt.name, $11, $12, $13) m
                         WHERE pt.queue_id = $1 AND pt.name = $2",
                    )
                    .await?;
                client
                    .query(
                        &stmt,
                        &[
                            &req.queue.id,
                            &partition,
                            &req.queue.name,
                            &req.group,
                            &req.batch,
                            &req.lease_id,
                            &o.lease_time,
                            &req.auto_ack,
                            &o.delayed_processing,
                            &o.window_buffer,
                            &req.subscription_mode,
                            &req.subscription_from,
                            &req.holder,
                        ],
                    )
                    .await?
            }
            None => {
                let stmt = client
                    .prepare_cached(
                        "SELECT * FROM queen.pop_queue($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, true, $15)",
                    )
                    .await?;
                client
                    .query(
                        &stmt,
                        &[
                            &req.queue.id,
                            &req.queue.name,
                            &req.group,
                            &req.batch,
                            &req.max_partitions,
                            &req.lease_id,
                            &o.lease_time,
                            &req.auto_ack,
                            &o.delayed_processing,
                            &o.window_buffer,
                            &req.subscription_mode,
                            &req.subscription_from,
                            &req.holder,
                            &req.hints,
                            &req.walk,
                        ],
                    )
                    .await?
            }
        };
        let mut claim = Claim::default();
        for r in &rows {
            // a wildcard pop's marker row: a hinted partition found drained
            let Some(offset) = r.get::<_, Option<i64>>(2) else {
                claim.drained_hints.push(r.get(1));
                continue;
            };
            claim.messages.push(ClaimedMessage {
                partition_id: r.get(0),
                partition_name: r.get(1),
                offset,
                message_id: r.get(3),
                transaction_id: r.get(4),
                trace_id: r.get(5),
                payload: r.get(6),
                producer_sub: r.get(7),
                created_at: r.get(8),
            });
        }
        Ok(claim)
    }

    /// Applies acknowledgements for one group; see `queen.ack_batch`.
    pub async fn acknowledge(
        &self,
        group: &str,
        items: &[AckItem],
    ) -> Result<Vec<AckOutcome>, StoreError> {
        let client = self.client().await?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            match ack_with(&client, group, items, false).await {
                Err(e) if e.is_retryable() && attempt < CONFLICT_ATTEMPTS => continue,
                other => return other,
            }
        }
    }

    /// Extends every unexpired partition lease held under `lease_id`.
    pub async fn extend_lease(
        &self,
        lease_id: Uuid,
        seconds: i32,
    ) -> Result<LeaseExtension, StoreError> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached("SELECT expires_at, renewed, reason FROM queen.extend_lease($1, $2)")
            .await?;
        let row = client.query_one(&stmt, &[&lease_id, &seconds]).await?;
        Ok(LeaseExtension {
            expires_at: row.get(0),
            renewed: row.get(1),
            reason: row.get(2),
        })
    }

    /// Deletes a queue with everything stored for it; false if it did not exist.
    pub async fn delete_queue(&self, name: &str) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_one("SELECT queen.delete_queue($1)", &[&name])
            .await?;
        Ok(row.get(0))
    }

    /// Runs acks and pushes in one PostgreSQL transaction: all commit or none.
    pub async fn run_transaction(&self, ops: &[TxOperation]) -> Result<Vec<TxOutcome>, TxFailure> {
        let as_failure = |e: StoreError| TxFailure {
            failed_at: 0,
            message: e.to_string(),
            done: Vec::new(),
            store: Some(e),
        };
        let mut client = self.client().await.map_err(as_failure)?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let tx = client
                .transaction()
                .await
                .map_err(|e| as_failure(e.into()))?;
            match run_operations(&tx, ops).await {
                Ok(done) => {
                    tx.commit().await.map_err(|e| as_failure(e.into()))?;
                    return Ok(done);
                }
                Err(failure) => {
                    drop(tx); // rolls back
                    let retry = failure.store.as_ref().is_some_and(StoreError::is_retryable);
                    if !(retry && attempt < CONFLICT_ATTEMPTS) {
                        return Err(failure);
                    }
                }
            }
        }
    }
}

async fn run_operations(
    tx: &deadpool_postgres::Transaction<'_>,
    ops: &[TxOperation],
) -> Result<Vec<TxOutcome>, TxFailure> {
    let mut done = Vec::with_capacity(ops.len());
    for (i, op) in ops.iter().enumerate() {
        let outcome = match op {
            TxOperation::Push {
                queue,
                namespace,
                task,
                message,
            } => match ensure_queue_with(tx, queue, namespace, task).await {
                Ok(row) => {
                    let msg = NewMessage {
                        queue_id: row.id,
                        ..message.clone()
                    };
                    append_with(tx, std::slice::from_ref(&msg), true)
                        .await
                        .map(|mut v| TxOutcome::Pushed(v.remove(0)))
                }
                Err(e) => Err(e),
            },
            TxOperation::Ack { group, item } => {
                ack_with(tx, group, std::slice::from_ref(item), true)
                    .await
                    .map(|mut v| TxOutcome::Acked(v.remove(0)))
            }
        };
        match outcome {
            Ok(o) => done.push(o),
            Err(e) => {
                let message = match &e {
                    StoreError::Rejected(m) | StoreError::UniqueViolation(m) => m.clone(),
                    other => other.to_string(),
                };
                let store =
                    (!matches!(e, StoreError::Rejected(_) | StoreError::UniqueViolation(_)))
                        .then_some(e);
                return Err(TxFailure {
                    failed_at: i,
                    message,
                    done,
                    store,
                });
            }
        }
    }
    Ok(done)
}

async fn ensure_queue_with(
    client: &impl GenericClient,
    name: &str,
    namespace: &str,
    task: &str,
) -> Result<QueueRow, StoreError> {
    // two statements: after a conflict with a concurrent insert, only a new
    // statement's snapshot sees the row the other transaction committed
    let insert = format!(
        "INSERT INTO queen.queues (id, name, namespace, task) VALUES ($1, $2, $3, $4)
         ON CONFLICT (name) DO NOTHING RETURNING {QUEUE_COLUMNS}"
    );
    let stmt = client.prepare_cached(&insert).await?;
    if let Some(row) = client
        .query_opt(&stmt, &[&Uuid::now_v7(), &name, &namespace, &task])
        .await?
    {
        return Ok(queue_from_row(&row));
    }
    let select = format!("SELECT {QUEUE_COLUMNS} FROM queen.queues WHERE name = $1");
    let stmt = client.prepare_cached(&select).await?;
    let row = client.query_one(&stmt, &[&name]).await?;
    Ok(queue_from_row(&row))
}

async fn append_with(
    client: &impl GenericClient,
    items: &[NewMessage],
    strict: bool,
) -> Result<Vec<AppendOutcome>, StoreError> {
    if items.is_empty() {
        return Ok(Vec::new());
    }
    let queue_ids: Vec<Uuid> = items.iter().map(|m| m.queue_id).collect();
    let partitions: Vec<&str> = items.iter().map(|m| m.partition.as_str()).collect();
    let message_ids: Vec<Uuid> = items.iter().map(|m| m.message_id).collect();
    let txn_ids: Vec<&str> = items.iter().map(|m| m.transaction_id.as_str()).collect();
    let trace_ids: Vec<Option<Uuid>> = items.iter().map(|m| m.trace_id).collect();
    let payloads: Vec<&str> = items.iter().map(|m| m.payload.as_str()).collect();
    let subs: Vec<Option<&str>> = items.iter().map(|m| m.producer_sub.as_deref()).collect();
    let stmt = client
        .prepare_cached(
            "SELECT idx, status, message_id, partition_id
             FROM queen.push_batch($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .await?;
    let rows = client
        .query(
            &stmt,
            &[
                &queue_ids,
                &partitions,
                &message_ids,
                &txn_ids,
                &trace_ids,
                &payloads,
                &subs,
                &strict,
            ],
        )
        .await?;
    let mut out: Vec<AppendOutcome> = rows
        .iter()
        .map(|r| {
            let idx: i32 = r.get(0);
            let status: &str = r.get(1);
            AppendOutcome {
                index: usize::try_from(idx - 1).unwrap_or_default(),
                status: if status == "queued" {
                    AppendStatus::Queued
                } else {
                    AppendStatus::Duplicate
                },
                message_id: r.get(2),
                partition_id: r.get(3),
            }
        })
        .collect();
    out.sort_by_key(|o| o.index);
    Ok(out)
}

async fn ack_with(
    client: &impl GenericClient,
    group: &str,
    items: &[AckItem],
    in_tx: bool,
) -> Result<Vec<AckOutcome>, StoreError> {
    if items.is_empty() {
        return Ok(Vec::new());
    }
    let partition_ids: Vec<Uuid> = items.iter().map(|a| a.partition_id).collect();
    let txn_ids: Vec<&str> = items.iter().map(|a| a.transaction_id.as_str()).collect();
    let lease_ids: Vec<Option<Uuid>> = items.iter().map(|a| a.lease_id).collect();
    let statuses: Vec<&str> = items.iter().map(|a| a.status.as_str()).collect();
    let errors: Vec<Option<&str>> = items.iter().map(|a| a.error.as_deref()).collect();
    let stmt = client
        .prepare_cached(
            "SELECT idx, success, error, queue_name, partition_name, lease_released, dlq
             FROM queen.ack_batch($1, $2, $3, $4, $5, $6, $7)",
        )
        .await?;
    let rows = client
        .query(
            &stmt,
            &[
                &group,
                &partition_ids,
                &txn_ids,
                &lease_ids,
                &statuses,
                &errors,
                &in_tx,
            ],
        )
        .await?;
    let mut out: Vec<AckOutcome> = rows
        .iter()
        .map(|r| {
            let idx: i32 = r.get(0);
            AckOutcome {
                index: usize::try_from(idx - 1).unwrap_or_default(),
                success: r.get(1),
                error: r.get(2),
                queue_name: r.get(3),
                partition_name: r.get(4),
                lease_released: r.get(5),
                dlq: r.get(6),
            }
        })
        .collect();
    out.sort_by_key(|o| o.index);
    Ok(out)
}
