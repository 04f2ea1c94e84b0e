//! What the dashboard's System view reads beside the older figures:
//! PostgreSQL's own state under `database` in
//! `GET /api/v1/analytics/postgres-stats`, and this broker process under
//! `process` and `spool` in `GET /api/v1/analytics/system-metrics`
//! (docs/http-api.md, "Analytics").

use serde::Serialize;

/// PostgreSQL as the broker's database sees it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DatabaseHealth {
    /// `server_version`.
    pub version: String,
    /// The database name (`current_database()`).
    pub name: String,
    /// `pg_database_size`, bytes.
    pub size_bytes: i64,
    /// The server is a standby (`pg_is_in_recovery()`).
    pub in_recovery: bool,
    pub connections: ConnectionCounts,
    /// Buffer hits over reads of this database since its statistics were
    /// reset (`pg_stat_database`); `null` before any read.
    pub cache_hit_ratio: Option<f64>,
    /// The oldest open transaction on the server, other than the reader's.
    pub longest_transaction: Option<LongTransaction>,
    /// Standbys streaming from this server (`pg_stat_replication`); empty
    /// when none is attached.
    pub replication: Vec<StandbyLag>,
}

/// Connections (`pg_stat_activity` client backends).
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionCounts {
    /// To this database.
    pub total: i64,
    pub active: i64,
    pub idle: i64,
    pub idle_in_transaction: i64,
    /// To the whole server, every database.
    pub server_total: i64,
    /// `max_connections`.
    pub max: i64,
}

/// One open transaction.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LongTransaction {
    pub pid: i32,
    pub database: Option<String>,
    pub application: Option<String>,
    pub state: Option<String>,
    /// Since `xact_start`.
    pub seconds: f64,
    /// The statement's first 200 characters (what the server lets this role see).
    pub query: Option<String>,
}

/// One standby of `pg_stat_replication`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StandbyLag {
    pub application: Option<String>,
    pub client_addr: Option<String>,
    pub state: Option<String>,
    pub sync_state: Option<String>,
    /// `replay_lag` in seconds (`null` while the standby is idle and caught up).
    pub replay_lag_seconds: Option<f64>,
    /// WAL bytes written here and not yet replayed there.
    pub lag_bytes: Option<i64>,
}

/// This broker process.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessFigures {
    pub pid: u32,
    pub uptime_seconds: u64,
    pub rss_bytes: u64,
    pub threads: u64,
    /// CPU time since the start, seconds.
    pub cpu_user_seconds: f64,
    pub cpu_system_seconds: f64,
    /// Share of one core used since the previous read of this figure (at
    /// least half a second earlier; the first read: since the start).
    pub cpu_percent: f64,
}
