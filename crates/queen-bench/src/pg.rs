//! PostgreSQL side of the benchmark: scratch databases and `pg_stat_database`
//! deltas. The monitoring connection lives in database `postgres`, so its own
//! statements never count in the measured database.

use std::time::Duration;

use anyhow::{Context as _, Result};
use serde::Serialize;
use tokio::time::Instant;
use tokio_postgres::{Client, NoTls};

#[derive(Debug, Clone, clap::Args, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PgArgs {
    /// PostgreSQL host (the broker is given the same).
    #[arg(long, default_value = "127.0.0.1")]
    pub pg_host: String,
    #[arg(long, default_value_t = 5432)]
    pub pg_port: u16,
    #[arg(long, default_value = "postgres")]
    pub pg_user: String,
    /// Password, if the server asks for one (trust auth needs none).
    #[arg(long, default_value = "")]
    #[serde(skip)]
    pub pg_password: String,
}

impl PgArgs {
    pub fn conn_string(&self, db: &str) -> String {
        let mut s = format!(
            "host={} port={} user={} dbname={db} application_name=queen-bench",
            self.pg_host, self.pg_port, self.pg_user
        );
        if !self.pg_password.is_empty() {
            s.push_str(&format!(
                " password='{}'",
                self.pg_password.replace('\'', "\\'")
            ));
        }
        s
    }

    pub async fn connect(&self, db: &str) -> Result<Client> {
        let (client, conn) = tokio_postgres::connect(&self.conn_string(db), NoTls)
            .await
            .with_context(|| {
                format!(
                    "connecting to PostgreSQL {}:{} db {db}",
                    self.pg_host, self.pg_port
                )
            })?;
        tokio::spawn(async move {
            // Ends with the client; errors surface on the client's next call.
            let _ = conn.await;
        });
        Ok(client)
    }
}

/// Counters of one database at one moment.
#[derive(Debug, Clone, Copy, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DbCounters {
    pub xact_commit: i64,
    pub xact_rollback: i64,
    pub rows_written: i64,
    pub blks_read: i64,
}

impl DbCounters {
    pub fn delta(self, before: DbCounters) -> DbCounters {
        DbCounters {
            xact_commit: self.xact_commit - before.xact_commit,
            xact_rollback: self.xact_rollback - before.xact_rollback,
            rows_written: self.rows_written - before.rows_written,
            blks_read: self.blks_read - before.blks_read,
        }
    }
}

/// Rows written to one table (`pg_stat_user_tables`, TOAST tables folded in
/// under their own names).
#[derive(Debug, Clone, Copy, Default, Serialize, serde::Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TableWrites {
    pub inserted: i64,
    pub updated: i64,
    pub hot_updated: i64,
    pub deleted: i64,
}

pub type TableCounters = std::collections::BTreeMap<String, TableWrites>;

/// Per-table write counters of the database `client` is connected to.
pub async fn table_counters(client: &Client) -> Result<TableCounters> {
    client
        .batch_execute("SELECT pg_stat_clear_snapshot()")
        .await?;
    let rows = client
        .query(
            "SELECT schemaname || '.' || relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del \
             FROM pg_stat_all_tables \
             WHERE schemaname NOT IN ('pg_catalog', 'information_schema')",
            &[],
        )
        .await
        .context("reading pg_stat_all_tables")?;
    Ok(rows
        .into_iter()
        .map(|r| {
            (
                r.get::<_, String>(0),
                TableWrites {
                    inserted: r.get(1),
                    updated: r.get(2),
                    hot_updated: r.get(3),
                    deleted: r.get(4),
                },
            )
        })
        .collect())
}

/// `after - before`, keeping only tables that were written.
pub fn table_delta(before: &TableCounters, after: &TableCounters) -> TableCounters {
    after
        .iter()
        .filter_map(|(name, a)| {
            let b = before.get(name).copied().unwrap_or_default();
            let d = TableWrites {
                inserted: a.inserted - b.inserted,
                updated: a.updated - b.updated,
                hot_updated: a.hot_updated - b.hot_updated,
                deleted: a.deleted - b.deleted,
            };
            (d != TableWrites::default()).then(|| (name.clone(), d))
        })
        .collect()
}

/// Counters of one statement (`pg_stat_statements`, `track = all` counts
/// the statements inside functions too) or one function
/// (`pg_stat_user_functions`, `track_functions = pl`).
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StatementCounters {
    /// The statement's text, or the function's name.
    pub name: String,
    pub calls: i64,
    /// Execution time, including what it called (wall clock, ms).
    pub total_ms: f64,
    /// Functions only: time outside the functions it called (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_ms: Option<f64>,
    pub rows: i64,
}

/// By `queryid` (statements) or `oid` (functions).
pub type StatementSnapshot = std::collections::HashMap<i64, StatementCounters>;

/// `after - before` of the entries that ran, busiest first, at most `top`.
pub fn statement_delta(
    before: &StatementSnapshot,
    after: &StatementSnapshot,
    top: usize,
) -> Vec<StatementCounters> {
    let mut out: Vec<StatementCounters> = after
        .iter()
        .filter_map(|(id, a)| {
            let b = before.get(id).cloned().unwrap_or_default();
            let d = StatementCounters {
                name: a.name.clone(),
                calls: a.calls - b.calls,
                total_ms: a.total_ms - b.total_ms,
                self_ms: a.self_ms.map(|s| s - b.self_ms.unwrap_or(0.0)),
                rows: a.rows - b.rows,
            };
            (d.calls > 0).then_some(d)
        })
        .collect();
    out.sort_by(|a, b| b.total_ms.total_cmp(&a.total_ms));
    out.truncate(top);
    out
}

/// PL/pgSQL functions of the database `client` is connected to.
pub async fn function_counters(client: &Client) -> Result<StatementSnapshot> {
    client
        .batch_execute("SELECT pg_stat_clear_snapshot()")
        .await?;
    let rows = client
        .query(
            "SELECT funcid::bigint, schemaname || '.' || funcname, calls, total_time, self_time, \
                    0::bigint \
             FROM pg_stat_user_functions",
            &[],
        )
        .await
        .context("reading pg_stat_user_functions")?;
    Ok(snapshot(&rows))
}

/// Rows of (id, name, calls, total ms, self ms or NULL, rows) by id.
fn snapshot(rows: &[tokio_postgres::Row]) -> StatementSnapshot {
    rows.iter()
        .map(|r| {
            (
                r.get(0),
                StatementCounters {
                    name: r.get(1),
                    calls: r.get(2),
                    total_ms: r.get(3),
                    self_ms: r.get(4),
                    rows: r.get(5),
                },
            )
        })
        .collect()
}

/// Connection to database `postgres` for administration and statistics.
pub struct Monitor {
    client: Client,
    /// Whether `pg_stat_statements` can be read (`--pg-statements`).
    statements: bool,
}

impl Monitor {
    pub async fn connect(args: &PgArgs) -> Result<Self> {
        Ok(Self {
            client: args.connect("postgres").await?,
            statements: false,
        })
    }

    /// Turns on per-statement counters: creates the `pg_stat_statements`
    /// view in database `postgres` if the server preloads the module.
    pub async fn enable_statements(&mut self) -> Result<()> {
        self.client
            .batch_execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            .await
            .context("CREATE EXTENSION pg_stat_statements")?;
        self.client
            .query_one("SELECT count(*) FROM pg_stat_statements", &[])
            .await
            .context("reading pg_stat_statements (is it in shared_preload_libraries?)")?;
        self.statements = true;
        Ok(())
    }

    /// The statements run in `db` so far; empty when not enabled.
    pub async fn statements(&self, db: &str) -> Result<StatementSnapshot> {
        if !self.statements || db.is_empty() {
            return Ok(StatementSnapshot::new());
        }
        let rows = self
            .client
            .query(
                "SELECT s.queryid, s.query, s.calls, s.total_exec_time, NULL::float8, s.rows \
                 FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid \
                 WHERE d.datname = $1 AND s.queryid IS NOT NULL",
                &[&db],
            )
            .await
            .context("reading pg_stat_statements")?;
        Ok(snapshot(&rows))
    }

    pub async fn create_database(&self, db: &str) -> Result<()> {
        self.client
            .batch_execute(&format!("CREATE DATABASE \"{db}\""))
            .await
            .with_context(|| format!("CREATE DATABASE {db}"))
    }

    pub async fn drop_database(&self, db: &str) -> Result<()> {
        self.client
            .batch_execute(&format!("DROP DATABASE IF EXISTS \"{db}\" WITH (FORCE)"))
            .await
            .with_context(|| format!("DROP DATABASE {db}"))
    }

    pub async fn counters(&self, db: &str) -> Result<DbCounters> {
        // A fresh snapshot each time (stats are cached per transaction otherwise).
        self.client
            .batch_execute("SELECT pg_stat_clear_snapshot()")
            .await?;
        let row = self
            .client
            .query_opt(
                "SELECT xact_commit, xact_rollback, tup_inserted + tup_updated + tup_deleted, blks_read \
                 FROM pg_stat_database WHERE datname = $1",
                &[&db],
            )
            .await
            .context("reading pg_stat_database")?;
        Ok(row.map_or_else(DbCounters::default, |r| DbCounters {
            xact_commit: r.get(0),
            xact_rollback: r.get(1),
            rows_written: r.get(2),
            blks_read: r.get(3),
        }))
    }

    /// Waits until the counters of `db` stop moving: backends flush their
    /// statistics at most once a second, an idle one within about a second of
    /// going idle. Bounded by `max`.
    pub async fn settle(&self, db: &str, max: Duration) -> Result<DbCounters> {
        let started = Instant::now();
        let mut last = self.counters(db).await?;
        let mut stable_since = Instant::now();
        while started.elapsed() < max {
            tokio::time::sleep(Duration::from_millis(250)).await;
            let now = self.counters(db).await?;
            if now.xact_commit != last.xact_commit || now.rows_written != last.rows_written {
                last = now;
                stable_since = Instant::now();
            } else if stable_since.elapsed() >= Duration::from_millis(1250)
                && started.elapsed() >= Duration::from_millis(1250)
            {
                break;
            }
        }
        Ok(last)
    }

    pub async fn server_setting(&self, name: &str) -> Result<String> {
        let row = self
            .client
            .query_one("SELECT current_setting($1)", &[&name])
            .await?;
        Ok(row.get(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(name: &str, calls: i64, total_ms: f64, self_ms: Option<f64>) -> StatementCounters {
        StatementCounters {
            name: name.into(),
            calls,
            total_ms,
            self_ms,
            rows: calls,
        }
    }

    #[test]
    fn statement_deltas_keep_what_ran_busiest_first() {
        let before = StatementSnapshot::from([
            (1, counters("a", 10, 5.0, Some(4.0))),
            (2, counters("b", 3, 1.0, None)),
        ]);
        let after = StatementSnapshot::from([
            (1, counters("a", 15, 7.0, Some(5.0))),
            (2, counters("b", 3, 1.0, None)),
            (3, counters("c", 4, 9.0, None)),
        ]);
        let d = statement_delta(&before, &after, 10);
        assert_eq!(d.len(), 2, "b did not run: {d:?}");
        assert_eq!(d[0], counters("c", 4, 9.0, None));
        assert_eq!(d[1].calls, 5);
        assert_eq!(d[1].total_ms, 2.0);
        assert_eq!(d[1].self_ms, Some(1.0));
        assert_eq!(statement_delta(&before, &after, 1).len(), 1);
    }
}
