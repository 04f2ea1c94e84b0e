//! Queues: lookup by name, creation on first push, `/configure`, deletion,
//! and the queue list of a namespace pop.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use queen_proto::QueueOptions;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;
use uuid::Uuid;

use super::op::{with_op, DbOp};
use super::{col, rows_into, Store, StoreError};

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

const QUEUE_COLUMNS: &str = "id, name, namespace, task, lease_time, retry_limit, retry_delay, \
     retry_backoff, retry_delay_max, max_size, ttl, priority, delayed_processing, window_buffer, dead_letter_queue, \
     dlq_after_max_retries, retention_enabled, retention_seconds, completed_retention_seconds, \
     encryption_enabled, max_wait_time_seconds, config_version, created_at";

impl QueueRow {
    fn from_row(row: &Row) -> Result<Self, StoreError> {
        Ok(Self {
            id: col(row, "id")?,
            name: col(row, "name")?,
            namespace: col(row, "namespace")?,
            task: col(row, "task")?,
            options: QueueOptions {
                priority: col(row, "priority")?,
                lease_time: col(row, "lease_time")?,
                retry_limit: col(row, "retry_limit")?,
                retry_delay: col(row, "retry_delay")?,
                retry_backoff: col(row, "retry_backoff")?,
                retry_delay_max: col(row, "retry_delay_max")?,
                max_size: col(row, "max_size")?,
                ttl: col(row, "ttl")?,
                dead_letter_queue: col(row, "dead_letter_queue")?,
                dlq_after_max_retries: col(row, "dlq_after_max_retries")?,
                delayed_processing: col(row, "delayed_processing")?,
                window_buffer: col(row, "window_buffer")?,
                retention_seconds: col(row, "retention_seconds")?,
                completed_retention_seconds: col(row, "completed_retention_seconds")?,
                retention_enabled: col(row, "retention_enabled")?,
                encryption_enabled: col(row, "encryption_enabled")?,
                max_wait_time_seconds: col(row, "max_wait_time_seconds")?,
            },
            config_version: col(row, "config_version")?,
            created_at: col(row, "created_at")?,
        })
    }
}

impl Store {
    /// Loads a queue by name.
    pub async fn find_queue(&self, name: &str) -> Result<Option<QueueRow>, StoreError> {
        with_op!(self.db, DbOp::FindQueue, |client| {
            let sql = format!("SELECT {QUEUE_COLUMNS} FROM queen.queues WHERE name = $1");
            let stmt = client.prepare_cached(&sql).await?;
            let row = client.query_opt(&stmt, &[&name]).await?;
            row.as_ref().map(QueueRow::from_row).transpose()
        })
    }

    /// Creates a queue with default options unless it exists; returns it either way.
    pub async fn ensure_queue(
        &self,
        name: &str,
        namespace: &str,
        task: &str,
    ) -> Result<QueueRow, StoreError> {
        with_op!(self.db, DbOp::EnsureQueue, |client| {
            ensure_queue_with(&*client, name, namespace, task).await
        })
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
        with_op!(self.db, DbOp::ConfigureQueue, |client| {
            let tx = client.transaction().await?;
            let sql = upsert_queue_sql(&[], false, QUEUE_COLUMNS);
            let id = Uuid::now_v7();
            let mut params: Vec<&(dyn ToSql + Sync)> = vec![&id, &name, &namespace, &task];
            params.extend(option_params(o));
            let row = tx.query_one(&sql, &params).await?;
            let queue = QueueRow::from_row(&row)?;
            // as in ensure_queue_with: the fallback SELECT is its own statement
            let inserted = tx
                    .query_opt(
                        "INSERT INTO queen.partitions (id, queue_id, name) VALUES (gen_random_uuid(), $1, 'Default')
                         ON CONFLICT (queue_id, name) DO NOTHING RETURNING id",
                        &[&queue.id],
                    )
                    .await?;
            let partition_id: Uuid = match inserted {
                Some(row) => col(&row, "id")?,
                None => col(
                    &tx.query_one(
                        "SELECT id FROM queen.partitions WHERE queue_id = $1 AND name = 'Default'",
                        &[&queue.id],
                    )
                    .await?,
                    "id",
                )?,
            };
            tx.commit().await?;
            Ok((queue, partition_id))
        })
    }

    /// Deletes a queue with everything stored for it; false if it did not exist.
    pub async fn delete_queue(&self, name: &str) -> Result<bool, StoreError> {
        with_op!(self.db, DbOp::DeleteQueue, |client| {
            let row = client
                .query_one("SELECT queen.delete_queue($1) AS existed", &[&name])
                .await?;
            col(&row, "existed")
        })
    }

    /// Queues whose namespace (and task, when given) match, with their
    /// priority, by name; for namespace pops (`broker/priority.rs` orders them).
    pub async fn queues_in_namespace(
        &self,
        namespace: Option<&str>,
        task: Option<&str>,
    ) -> Result<Vec<(String, i32)>, StoreError> {
        with_op!(self.db, DbOp::NamespaceQueues, |client| {
            let rows = client
                    .query(
                        "SELECT name, priority FROM queen.queues
                         WHERE ($1::text IS NULL OR namespace = $1) AND ($2::text IS NULL OR task = $2)
                         ORDER BY name",
                        &[&namespace, &task],
                    )
                    .await?;
            rows_into(&rows, |r| Ok((col(r, "name")?, col(r, "priority")?)))
        })
    }
}

/// Creates a queue with default options unless it exists, on `client` (a
/// pooled connection or an open transaction).
pub(super) async fn ensure_queue_with(
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
        return QueueRow::from_row(&row);
    }
    let select = format!("SELECT {QUEUE_COLUMNS} FROM queen.queues WHERE name = $1");
    let stmt = client.prepare_cached(&select).await?;
    let row = client.query_one(&stmt, &[&name]).await?;
    QueueRow::from_row(&row)
}

/// The columns of [`option_params`], in its order.
const OPTION_COLUMNS: [&str; 17] = [
    "lease_time",
    "retry_limit",
    "retry_delay",
    "retry_backoff",
    "retry_delay_max",
    "max_size",
    "ttl",
    "priority",
    "delayed_processing",
    "window_buffer",
    "dead_letter_queue",
    "dlq_after_max_retries",
    "retention_enabled",
    "retention_seconds",
    "completed_retention_seconds",
    "encryption_enabled",
    "max_wait_time_seconds",
];

/// The one statement that creates or reconfigures a queue: parameters `$1`
/// id, `$2` name, `$3` namespace, `$4` task, then [`option_params`], then one
/// per `extra` column (written on insert only). A conflict on the name
/// replaces namespace, task and every option and bumps `config_version`;
/// with `only_changed`, only when one of them differs (else no row comes back).
pub(super) fn upsert_queue_sql(extra: &[&str], only_changed: bool, returning: &str) -> String {
    let updated: Vec<&str> = ["namespace", "task"]
        .into_iter()
        .chain(OPTION_COLUMNS)
        .collect();
    let columns: Vec<&str> = ["id", "name"]
        .into_iter()
        .chain(updated.iter().copied())
        .chain(extra.iter().copied())
        .collect();
    let values: Vec<String> = (1..=columns.len()).map(|i| format!("${i}")).collect();
    let set: Vec<String> = updated
        .iter()
        .map(|c| format!("{c} = EXCLUDED.{c}"))
        .collect();
    let changed = if only_changed {
        let tuple = |prefix: &str| {
            let cols: Vec<String> = updated.iter().map(|c| format!("{prefix}.{c}")).collect();
            cols.join(", ")
        };
        format!(
            " WHERE ({}) IS DISTINCT FROM ({})",
            tuple("qu"),
            tuple("EXCLUDED")
        )
    } else {
        String::new()
    };
    format!(
        "INSERT INTO queen.queues AS qu ({}) VALUES ({}) ON CONFLICT (name) DO UPDATE SET {}, \
         config_version = qu.config_version + 1, updated_at = now(){changed} RETURNING {returning}",
        columns.join(", "),
        values.join(", "),
        set.join(", ")
    )
}

/// The 17 options of a queue as statement parameters, in this order:
/// `lease_time`, `retry_limit`, `retry_delay`, `retry_backoff`,
/// `retry_delay_max`, then the column order of `queen.queues` (`max_size` ..
/// `max_wait_time_seconds`).
pub(super) fn option_params(o: &QueueOptions) -> [&(dyn ToSql + Sync); 17] {
    [
        &o.lease_time,
        &o.retry_limit,
        &o.retry_delay,
        &o.retry_backoff,
        &o.retry_delay_max,
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
    ]
}
