//! Reading a reference 0.15 database: the layout and permission checks made
//! before anything is written, the queue and partition lists, and one
//! REPEATABLE READ snapshot per partition in which its messages (keyset
//! pages in the order of `idx_messages_partition_created`), cursors, dead
//! letters and traces are read together (reference-schema-0.15.md §5.6).

use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;

use anyhow::{anyhow, bail, Context as _};
use tokio_postgres::{Client, Row};

use super::snapshot::SourceSnapshot;
use super::{SourcePartition, SourceQueue, SourceSubscription};
use crate::config::DbConfig;

/// The tables and columns an importer reads, as the reference 0.15 defines
/// them (reference-schema-0.15.md §1).
const LAYOUT: &[(&str, &[&str])] = &[
    (
        "queues",
        &[
            "id",
            "name",
            "namespace",
            "task",
            "lease_time",
            "retry_limit",
            "retry_delay",
            "ttl",
            "priority",
            "dead_letter_queue",
            "dlq_after_max_retries",
            "delayed_processing",
            "window_buffer",
            "retention_enabled",
            "retention_seconds",
            "completed_retention_seconds",
            "max_wait_time_seconds",
            "encryption_enabled",
            "max_queue_size",
            "created_at",
        ],
    ),
    ("partitions", &["id", "queue_id", "name", "created_at"]),
    (
        "messages",
        &[
            "id",
            "transaction_id",
            "trace_id",
            "partition_id",
            "payload",
            "created_at",
            "is_encrypted",
            "producer_sub",
        ],
    ),
    (
        "partition_consumers",
        &[
            "partition_id",
            "consumer_group",
            "last_consumed_id",
            "last_consumed_created_at",
            "worker_id",
            "lease_expires_at",
            "batch_size",
            "acked_count",
            "batch_retry_count",
            "total_messages_consumed",
            "total_batches_consumed",
            "last_consumed_at",
        ],
    ),
    (
        "consumer_groups_metadata",
        &[
            "consumer_group",
            "queue_name",
            "partition_name",
            "namespace",
            "task",
            "subscription_mode",
            "subscription_timestamp",
            "created_at",
        ],
    ),
    (
        "dead_letter_queue",
        &[
            "id",
            "message_id",
            "partition_id",
            "consumer_group",
            "error_message",
            "retry_count",
            "failed_at",
        ],
    ),
    (
        "message_traces",
        &[
            "id",
            "message_id",
            "partition_id",
            "transaction_id",
            "consumer_group",
            "event_type",
            "data",
            "created_at",
            "worker_id",
        ],
    ),
    ("message_trace_names", &["trace_id", "trace_name"]),
    ("system_state", &["key", "value"]),
];

/// A connection to the reference database and the schema its tables are in.
pub struct Source {
    client: Client,
    /// The schema, quoted for SQL.
    schema: String,
    /// The schema as named.
    schema_name: String,
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Source({})", self.schema_name)
    }
}

/// Where `url` points, without its password.
pub fn describe_url(url: &str) -> String {
    match tokio_postgres::Config::from_str(url) {
        Ok(c) => {
            let host = c
                .get_hosts()
                .first()
                .map(|h| match h {
                    tokio_postgres::config::Host::Tcp(h) => h.clone(),
                    #[cfg(unix)]
                    tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
                })
                .unwrap_or_default();
            let port = c.get_ports().first().copied().unwrap_or(5432);
            format!("{host}:{port}/{}", c.get_dbname().unwrap_or(""))
        }
        Err(_) => "<unparsable URL>".into(),
    }
}

impl Source {
    /// Connects to `url` (TLS as `sslmode` in it asks, with the broker's
    /// certificate settings) and checks, before anything is written, that
    /// `schema` holds the reference's layout and that every table of it can
    /// be read.
    pub async fn connect(url: &str, schema: &str, db: &DbConfig) -> anyhow::Result<Self> {
        let mut pg = tokio_postgres::Config::from_str(url)
            .map_err(|e| anyhow!("the source URL does not parse: {e}"))?;
        let mut tls_db = db.clone();
        tls_db.url = Some(url.to_owned());
        tls_db.use_ssl = false;
        let tls = crate::store::tls::configure(&tls_db, &mut pg)
            .map_err(|e| anyhow!("source TLS setup: {e}"))?;
        let (client, conn) = pg
            .connect(tls)
            .await
            .map_err(|e| anyhow!("cannot connect to the source {}: {e}", describe_url(url)))?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "source connection closed");
            }
        });
        let source = Self {
            client,
            schema: format!("\"{}\"", schema.replace('"', "\"\"")),
            schema_name: schema.to_owned(),
        };
        source.check_layout(url).await?;
        source.check_permissions().await?;
        Ok(source)
    }

    fn t(&self, table: &str) -> String {
        format!("{}.{table}", self.schema)
    }

    async fn check_layout(&self, url: &str) -> anyhow::Result<()> {
        let rows = self
            .client
            .query(
                "SELECT c.relname::text AS t, a.attname::text AS c
                 FROM pg_catalog.pg_class c
                 JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                 JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                 WHERE n.nspname = $1 AND c.relkind IN ('r', 'p')",
                &[&self.schema_name],
            )
            .await
            .context("reading the source's catalog")?;
        let mut found: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for r in &rows {
            found.entry(r.get("t")).or_default().insert(r.get("c"));
        }
        let at = format!("schema {} of {}", self.schema_name, describe_url(url));
        if found.is_empty() {
            bail!("not a reference Queen 0.15 database: {at} has no tables (name the reference's schema with --schema)");
        }
        if found.contains_key("segments") && found.contains_key("log_consumers") {
            bail!("not a reference Queen 0.15 database: {at} is this broker's own schema (segments, log_consumers), not the reference's");
        }
        for (table, columns) in LAYOUT {
            let Some(have) = found.get(*table) else {
                bail!("not a reference Queen 0.15 database: {at} has no table {table}");
            };
            if let Some(c) = columns.iter().find(|c| !have.contains(**c)) {
                bail!(
                    "not a reference Queen 0.15 database: table {table} of {at} has no column {c}"
                );
            }
        }
        Ok(())
    }

    async fn check_permissions(&self) -> anyhow::Result<()> {
        let row = self
            .client
            .query_one(
                "SELECT current_user::text AS who, has_schema_privilege($1, 'USAGE') AS usage",
                &[&self.schema_name],
            )
            .await
            .context("checking the source's permissions")?;
        let who: String = row.get("who");
        if !row.get::<_, bool>("usage") {
            bail!(
                "no permission to read the source: role {who} lacks USAGE on schema {} (GRANT USAGE ON SCHEMA {} TO {who})",
                self.schema_name, self.schema
            );
        }
        for (table, _) in LAYOUT {
            let qualified = self.t(table);
            let ok: bool = self
                .client
                .query_one(
                    "SELECT has_table_privilege($1, 'SELECT') AS ok",
                    &[&qualified],
                )
                .await?
                .get("ok");
            if !ok {
                bail!(
                    "no permission to read the source: role {who} cannot SELECT from {qualified} (GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {who})",
                    self.schema
                );
            }
        }
        Ok(())
    }

    /// The first stored envelope found, as (queue, partition, transactionId,
    /// payload text), to check the key on before writing anything.
    pub async fn first_envelope(&self) -> anyhow::Result<Option<(String, String, String, String)>> {
        let sql = format!(
            "SELECT q.name::text AS q, p.name::text AS p, m.transaction_id::text AS t, m.payload::text AS body
             FROM {m} m JOIN {p} p ON p.id = m.partition_id JOIN {q} q ON q.id = p.queue_id
             WHERE jsonb_typeof(m.payload) = 'object'
               AND m.payload ? 'authTag' AND m.payload ? 'iv' AND m.payload ? 'encrypted'
             LIMIT 1",
            m = self.t("messages"),
            p = self.t("partitions"),
            q = self.t("queues")
        );
        let row = self.client.query_opt(&sql, &[]).await?;
        Ok(row.map(|r| (r.get("q"), r.get("p"), r.get("t"), r.get("body"))))
    }

    /// Every queue, by name.
    pub async fn queues(&self) -> anyhow::Result<Vec<SourceQueue>> {
        let sql = format!(
            "SELECT name::text, coalesce(namespace, '')::text AS namespace, coalesce(task, '')::text AS task,
                    lease_time, retry_limit, retry_delay, ttl, priority, dead_letter_queue,
                    dlq_after_max_retries, delayed_processing, window_buffer, retention_enabled,
                    retention_seconds, completed_retention_seconds, max_wait_time_seconds,
                    encryption_enabled, max_queue_size, created_at
             FROM {} ORDER BY name",
            self.t("queues")
        );
        let rows = self.client.query(&sql, &[]).await?;
        rows.iter().map(queue_from_row).collect()
    }

    /// Every partition, by queue and name.
    pub async fn partitions(&self) -> anyhow::Result<Vec<SourcePartition>> {
        let sql = format!(
            "SELECT p.id, q.name::text AS queue, p.name::text AS name, p.created_at
             FROM {} p JOIN {} q ON q.id = p.queue_id ORDER BY q.name, p.name",
            self.t("partitions"),
            self.t("queues")
        );
        let rows = self.client.query(&sql, &[]).await?;
        Ok(rows
            .iter()
            .map(|r| SourcePartition {
                id: r.get("id"),
                queue: r.get("queue"),
                name: r.get("name"),
                created_at: r.get("created_at"),
            })
            .collect())
    }

    /// Every stored subscription start (mode `new` / `timestamp`).
    pub async fn subscriptions(&self) -> anyhow::Result<Vec<SourceSubscription>> {
        let sql = format!(
            "SELECT consumer_group::text AS g, coalesce(queue_name, '')::text AS q,
                    coalesce(partition_name, '')::text AS p, coalesce(namespace, '')::text AS ns,
                    coalesce(task, '')::text AS task, coalesce(subscription_mode, '')::text AS mode,
                    subscription_timestamp, created_at
             FROM {} ORDER BY consumer_group, queue_name, partition_name",
            self.t("consumer_groups_metadata")
        );
        let rows = self.client.query(&sql, &[]).await?;
        Ok(rows
            .iter()
            .map(|r| SourceSubscription {
                group: r.get("g"),
                queue: r.get("q"),
                partition: r.get("p"),
                namespace: r.get("ns"),
                task: r.get("task"),
                mode: r.get("mode"),
                timestamp: r.get("subscription_timestamp"),
                created_at: r.get("created_at"),
            })
            .collect())
    }

    /// The maintenance flags (`maintenance_mode`, `pop_maintenance_mode`) set in the source.
    pub async fn maintenance_flags(&self) -> anyhow::Result<Vec<(String, bool)>> {
        let sql = format!(
            "SELECT key::text AS key, coalesce((value->>'enabled')::boolean, false) AS enabled
             FROM {} WHERE key IN ('maintenance_mode', 'pop_maintenance_mode') ORDER BY key",
            self.t("system_state")
        );
        let rows = self.client.query(&sql, &[]).await?;
        Ok(rows
            .iter()
            .map(|r| (r.get("key"), r.get("enabled")))
            .collect())
    }

    /// The queries of the streams engine (`<schema>_streams.queries`, the
    /// reference's `queen_streams`), which are not imported; 0 without that schema.
    pub async fn stream_queries(&self) -> anyhow::Result<i64> {
        let streams = format!("{}_streams", self.schema_name);
        let row = self
            .client
            .query_one(
                "SELECT to_regclass(quote_ident($1) || '.queries') IS NOT NULL AS yes",
                &[&streams],
            )
            .await?;
        if !row.get::<_, bool>("yes") {
            return Ok(0);
        }
        let sql = format!(
            "SELECT count(*) AS n FROM \"{}\".queries",
            streams.replace('"', "\"\"")
        );
        Ok(self.client.query_one(&sql, &[]).await?.get("n"))
    }

    /// Opens a read-only snapshot (REPEATABLE READ) for one partition.
    pub async fn snapshot(&mut self) -> anyhow::Result<SourceSnapshot<'_>> {
        let tx = self
            .client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .context("opening a snapshot of the source")?;
        Ok(SourceSnapshot::new(tx, &self.schema))
    }
}

fn queue_from_row(r: &Row) -> anyhow::Result<SourceQueue> {
    Ok(SourceQueue {
        name: r.get("name"),
        namespace: r.get("namespace"),
        task: r.get("task"),
        options: queen_proto::QueueOptions {
            priority: r.get("priority"),
            lease_time: r.get("lease_time"),
            retry_limit: r.get("retry_limit"),
            retry_delay: r.get("retry_delay"),
            // the reference has no backoff: constant, uncapped (the defaults)
            retry_backoff: 1.0,
            retry_delay_max: 0,
            max_size: r.get("max_queue_size"),
            ttl: r.get("ttl"),
            dead_letter_queue: r.get("dead_letter_queue"),
            dlq_after_max_retries: r.get("dlq_after_max_retries"),
            delayed_processing: r.get("delayed_processing"),
            window_buffer: r.get("window_buffer"),
            retention_seconds: r.get("retention_seconds"),
            completed_retention_seconds: r.get("completed_retention_seconds"),
            retention_enabled: r.get("retention_enabled"),
            encryption_enabled: r.get("encryption_enabled"),
            max_wait_time_seconds: r.get("max_wait_time_seconds"),
        },
        created_at: r.get("created_at"),
    })
}
