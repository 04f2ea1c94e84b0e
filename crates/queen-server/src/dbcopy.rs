//! Database migration (`/api/v1/migration/*`): copies this broker's schema to
//! another PostgreSQL with the machine's `pg_dump` and `pg_restore`, in the
//! background, one copy at a time across replicas.
//!
//! - `start` takes the session advisory lock [`LOCK_KEY`] on the source
//!   database and holds it until the copy ends, so a second `start` on any
//!   replica answers 409;
//! - `pg_dump -Fc` of the schema into a temporary file, then `pg_restore
//!   --clean --if-exists --no-owner --no-privileges` into the target;
//! - passwords reach the tools through `PGPASSWORD` only, never the command
//!   line, the log or an answer; tool output is kept (bounded) with any
//!   occurrence of either password masked;
//! - `validate` compares `count(*)` of every table of the schema on both sides.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::process::Command;

use crate::config::DbConfig;
use crate::store::dbcopy::{row_counts, server_version, PgEndpoint};
use crate::store::jobs::AdvisoryLockGuard;
use crate::store::{Store, StoreError};

/// Advisory lock key of a running copy ("queencpy").
pub const LOCK_KEY: i64 = 0x7175_6565_6e63_7079;
/// Most bytes of tool output kept per step.
const MAX_OUTPUT: usize = 64 * 1024;

/// Where a copy stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Idle,
    Dumping,
    Restoring,
    Complete,
    Error,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Dumping => "dumping",
            Self::Restoring => "restoring",
            Self::Complete => "complete",
            Self::Error => "error",
        }
    }

    fn running(self) -> bool {
        matches!(self, Self::Dumping | Self::Restoring)
    }
}

/// A snapshot for `GET /api/v1/migration/status`.
#[derive(Debug, Clone)]
pub struct Status {
    pub phase: Phase,
    pub current_step: String,
    pub elapsed_seconds: f64,
    pub error: Option<String>,
    pub dump_output: Option<String>,
    pub restore_output: Option<String>,
}

/// What `start` copies.
#[derive(Debug, Clone)]
pub struct Request {
    pub target: PgEndpoint,
    pub schema: String,
    pub exclude_table_data: Vec<String>,
}

#[derive(Debug)]
struct State {
    phase: Phase,
    step: String,
    started: Option<Instant>,
    finished: Option<Instant>,
    error: Option<String>,
    dump_output: Option<String>,
    restore_output: Option<String>,
    /// The last request, for `validate` without a body.
    last: Option<Request>,
}

impl Default for State {
    fn default() -> Self {
        Self {
            phase: Phase::Idle,
            step: "idle".to_owned(),
            started: None,
            finished: None,
            error: None,
            dump_output: None,
            restore_output: None,
            last: None,
        }
    }
}

/// Why a call was refused.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    #[error("A migration is already running")]
    Busy,
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("No migration target: pass the connection in the body")]
    NoTarget,
}

/// One table of `validate`.
#[derive(Debug, Clone)]
pub struct TableCount {
    pub table: String,
    pub source: i64,
    pub target: Option<i64>,
    pub excluded: bool,
}

/// The copier of one broker process.
#[derive(Debug, Default)]
pub struct DbCopy {
    state: Mutex<State>,
}

impl DbCopy {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn status(&self) -> Status {
        let s = self.lock();
        let elapsed = match (s.started, s.finished) {
            (Some(a), Some(b)) => b.duration_since(a).as_secs_f64(),
            (Some(a), None) => a.elapsed().as_secs_f64(),
            _ => 0.0,
        };
        Status {
            phase: s.phase,
            current_step: s.step.clone(),
            elapsed_seconds: (elapsed * 10.0).round() / 10.0,
            error: s.error.clone(),
            dump_output: s.dump_output.clone(),
            restore_output: s.restore_output.clone(),
        }
    }

    /// Back to idle; refused while a copy runs.
    pub fn reset(&self) -> Result<(), CopyError> {
        let mut s = self.lock();
        if s.phase.running() {
            return Err(CopyError::Busy);
        }
        *s = State::default();
        Ok(())
    }

    /// Starts a copy in the background, holding the cluster-wide lock.
    pub async fn start(
        self: &Arc<Self>,
        store: &Arc<Store>,
        req: Request,
    ) -> Result<(), CopyError> {
        if self.lock().phase.running() {
            return Err(CopyError::Busy);
        }
        let guard = store
            .try_advisory_lock(LOCK_KEY)
            .await?
            .ok_or(CopyError::Busy)?;
        {
            let mut s = self.lock();
            if s.phase.running() {
                return Err(CopyError::Busy);
            }
            *s = State {
                phase: Phase::Dumping,
                step: format!("pg_dump of schema {}", req.schema),
                started: Some(Instant::now()),
                last: Some(req.clone()),
                ..State::default()
            };
        }
        let source = store.source_endpoint();
        let me = self.clone();
        tokio::spawn(async move {
            let result = me.run(&source, &req).await;
            me.finish(result, guard).await;
        });
        Ok(())
    }

    async fn finish(&self, result: Result<(), String>, guard: AdvisoryLockGuard) {
        {
            let mut s = self.lock();
            s.finished = Some(Instant::now());
            match result {
                Ok(()) => {
                    s.phase = Phase::Complete;
                    s.step = "complete".to_owned();
                }
                Err(e) => {
                    tracing::warn!(error = %e, "database migration failed");
                    s.phase = Phase::Error;
                    s.error = Some(e);
                }
            }
        }
        if let Err(e) = guard.release().await {
            tracing::debug!(error = %e, "releasing the migration lock failed");
        }
    }

    async fn run(&self, source: &PgEndpoint, req: &Request) -> Result<(), String> {
        let bin = pg_bin_dir();
        let dir = tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?;
        let file = dir.path().join("queen.dump");
        let secrets = [source.password.clone(), req.target.password.clone()];
        tracing::info!(
            schema = %req.schema,
            target_host = %req.target.host,
            target_port = req.target.port,
            target_database = %req.target.database,
            "database migration: dumping"
        );
        let mut dump = Command::new(tool(&bin, "pg_dump"));
        endpoint_args(&mut dump, source);
        dump.arg("--format=custom")
            .arg("--no-owner")
            .arg("--no-privileges")
            .arg(format!("--schema={}", req.schema))
            .arg(format!("--file={}", file.display()));
        for t in &req.exclude_table_data {
            let t = if t.contains('.') {
                t.clone()
            } else {
                format!("{}.{t}", req.schema)
            };
            dump.arg(format!("--exclude-table-data={t}"));
        }
        let (ok, out) = run_tool(dump, &secrets).await?;
        self.lock().dump_output = Some(out.clone());
        if !ok {
            return Err(format!("pg_dump failed: {}", last_line(&out)));
        }
        {
            let mut s = self.lock();
            s.phase = Phase::Restoring;
            s.step = format!(
                "pg_restore into {}:{}/{}",
                req.target.host, req.target.port, req.target.database
            );
        }
        tracing::info!("database migration: restoring");
        let mut restore = Command::new(tool(&bin, "pg_restore"));
        endpoint_args(&mut restore, &req.target);
        restore
            .arg("--clean")
            .arg("--if-exists")
            .arg("--no-owner")
            .arg("--no-privileges")
            .arg("--exit-on-error")
            .arg(&file);
        let (ok, out) = run_tool(restore, &secrets).await?;
        self.lock().restore_output = Some(out.clone());
        if !ok {
            return Err(format!("pg_restore failed: {}", last_line(&out)));
        }
        tracing::info!("database migration: complete");
        Ok(())
    }

    /// Row counts of every table of the schema on both sides.
    pub async fn validate(
        &self,
        store: &Store,
        base: &DbConfig,
        target: Option<PgEndpoint>,
        schema: Option<String>,
    ) -> Result<Vec<TableCount>, CopyError> {
        let last = self.lock().last.clone();
        let (target, schema, excluded) = match (target, last) {
            (Some(t), last) => {
                let schema = schema
                    .or_else(|| last.as_ref().map(|l| l.schema.clone()))
                    .unwrap_or_else(|| "queen".to_owned());
                let excluded = last.map(|l| l.exclude_table_data).unwrap_or_default();
                (t, schema, excluded)
            }
            (None, Some(l)) => (l.target, schema.unwrap_or(l.schema), l.exclude_table_data),
            (None, None) => return Err(CopyError::NoTarget),
        };
        let source = store.source_client().await?;
        let target = target.connect(base).await?;
        let src = row_counts(&source, &schema).await?;
        let dst = row_counts(&target, &schema).await?;
        Ok(src
            .into_iter()
            .map(|(table, n)| TableCount {
                target: dst.iter().find(|(t, _)| *t == table).map(|(_, n)| *n),
                excluded: excluded
                    .iter()
                    .any(|e| *e == table || *e == format!("{schema}.{table}")),
                table,
                source: n,
            })
            .collect())
    }
}

/// Connects to a target and answers its server version.
pub async fn test_connection(base: &DbConfig, target: &PgEndpoint) -> Result<String, StoreError> {
    let client = target.connect(base).await?;
    server_version(&client).await
}

fn endpoint_args(cmd: &mut Command, e: &PgEndpoint) {
    cmd.arg(format!("--host={}", e.host))
        .arg(format!("--port={}", e.port))
        .arg(format!("--username={}", e.user))
        .arg(format!("--dbname={}", e.database))
        .arg("--no-password")
        .env("PGSSLMODE", if e.ssl { "require" } else { "disable" })
        .env("PGCONNECT_TIMEOUT", "10")
        .env_remove("PGPASSWORD");
    if let Some(p) = &e.password {
        cmd.env("PGPASSWORD", p);
    }
}

/// Runs a tool; answers whether it succeeded and its (masked, bounded) output.
async fn run_tool(mut cmd: Command, secrets: &[Option<String>]) -> Result<(bool, String), String> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let out = cmd
        .output()
        .await
        .map_err(|e| format!("cannot run {:?}: {e}", cmd.as_std().get_program()))?;
    let mut text = String::from_utf8_lossy(&out.stderr).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stdout));
    for s in secrets.iter().flatten().filter(|s| !s.is_empty()) {
        text = text.replace(s.as_str(), "***");
    }
    if text.len() > MAX_OUTPUT {
        let mut cut = text.len() - MAX_OUTPUT;
        while !text.is_char_boundary(cut) {
            cut += 1;
        }
        text = format!("…{}", &text[cut..]);
    }
    Ok((out.status.success(), text))
}

fn last_line(out: &str) -> String {
    out.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no output")
        .to_owned()
}

/// The newest `/usr/lib/postgresql/<n>/bin`, or none (the tools from `PATH`).
fn pg_bin_dir() -> Option<PathBuf> {
    let mut best: Option<(u32, PathBuf)> = None;
    for entry in std::fs::read_dir("/usr/lib/postgresql").ok()?.flatten() {
        let Some(v) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let bin = entry.path().join("bin");
        if bin.join("pg_dump").exists() && best.as_ref().is_none_or(|(b, _)| v > *b) {
            best = Some((v, bin));
        }
    }
    best.map(|(_, p)| p)
}

fn tool(bin: &Option<PathBuf>, name: &str) -> PathBuf {
    bin.as_deref()
        .map_or_else(|| PathBuf::from(name), |b: &Path| b.join(name))
}
