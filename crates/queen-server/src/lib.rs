//! Queen: a partitioned message queue whose only source of truth is PostgreSQL.
//!
//! Module map (dependencies point down; `docs/architecture.md` has the table):
//! - [`http`]: the HTTP API v1 router and its layers; parses and validates,
//!   then calls broker use cases, and answers `queen-proto` bodies.
//! - [`jobs`]: background loops (migrations, reconcile, retention, eviction,
//!   stats, spool replay); they call the broker, the store and the spool.
//! - [`broker`]: use cases, the long-poll waker, caches, hints. No HTTP, no SQL.
//! - [`store`]: PostgreSQL: the pool, `with_op!`, one method per statement.
//! - [`spool`]: the disk spool that takes pushes while PostgreSQL is away.
//! - [`mesh`]: hints between replicas; received ones leave through an inbox.
//! - [`import`]: `queen-server import` of a reference 0.15 database, through
//!   the store (and the broker's envelope code); not part of a running broker.
//! - [`config`], [`telemetry`], [`backoff`]: used by all of them.
//!
//! Push: `http::routes::push` → `Broker::push` → `Store::append` (the batcher,
//! one `queen.push_batch` call per flight) → `Broker::announce_messages`
//! wakes parked pops here and tells the peers. Pop: `http::routes::pop` →
//! `Broker::pop` (registers with the waker, then `Store::claim`:
//! `queen.pop_queue` / `queen.claim_partition`) → messages or a wait. Ack:
//! `Broker::ack` → `Store::acknowledge` (`queen.ack_batch`: cursor moves).

pub mod app;
pub mod backoff;
pub mod broker;
pub mod config;
pub mod dbcopy;
pub mod embedded_pg;
pub mod http;
pub mod import;
pub mod jobs;
pub mod memory;
pub mod mesh;
pub mod spool;
pub mod store;
pub mod telemetry;

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::broker::{spawn_hint_applier, Broker};
use crate::config::Config;
use crate::mesh::Mesh;
use crate::store::Store;

/// Opens this broker's spool directory; the error names `FILE_BUFFER_DIR`.
async fn open_spool(config: &Config) -> anyhow::Result<spool::Spool> {
    let spool_config = config.spool.clone();
    let dir = spool_config.dir.clone();
    tokio::task::spawn_blocking(move || spool::Spool::open(&spool_config))
        .await?
        .map_err(|e| {
            anyhow::anyhow!(
                "FILE_BUFFER_DIR={}: cannot use it as the push spool: {e}",
                dir.display()
            )
        })
}

/// The line logged once the HTTP listener is bound; tests and operators look for it.
pub const LISTENING_LINE: &str = "queen listening";
/// The line logged when the stop signal starts the drain.
pub const DRAINING_LINE: &str = "draining";

/// The version `queen-server --version` and `/health` report.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The git commit the binary was built from (`build.rs`), `unknown` outside a checkout.
pub const COMMIT: &str = env!("QUEEN_COMMIT");

/// Runs the broker on `listener` until `shutdown` is cancelled, then stops
/// gracefully (docs/operations.md, "Stopping a broker"):
///
/// 1. `/health` answers 503 `draining` and every answer carries `Connection:
///    close`, while every route is still served for `SHUTDOWN_DRAIN_MS`;
/// 2. the listener closes, parked long polls are answered, idle connections
///    close and requests in flight finish;
/// 3. the background jobs stop, and the spool is flushed and closed;
///
/// all within `SHUTDOWN_TIMEOUT_MS` of the cancellation: past it, connections
/// still open are dropped.
pub async fn run(
    config: Config,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    tracing::info!(config = %config.describe(), "effective configuration");
    let set: Vec<String> = std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .collect();
    for warning in config::unused_variable_warnings(set.iter().map(String::as_str)) {
        tracing::warn!("{warning}");
    }
    let stop_config = config.shutdown;
    // cancelled when the drain ends: the listener, parked pops, jobs, the mesh
    let stop = CancellationToken::new();
    // built in dependency order: the broker takes the store, the spool and the mesh
    let store = Arc::new(Store::new(&config.db)?);
    store.check_schema_owner().await?;
    let spool = Arc::new(open_spool(&config).await?);
    let mesh = if config.mesh.is_active() {
        let (mesh, inbox) = Mesh::start(
            config.mesh.clone(),
            config.server_id.clone(),
            stop.child_token(),
        )
        .await;
        Some((mesh, inbox))
    } else {
        tracing::info!("mesh off (no peers or sync disabled): local long-poll waker only");
        None
    };
    let (mesh, inbox) = mesh.unzip();
    let broker = Broker::new(
        config,
        store.clone(),
        spool.clone(),
        mesh,
        stop.child_token(),
    );
    if let Some(inbox) = inbox {
        spawn_hint_applier(broker.clone(), inbox, stop.child_token());
    }
    let mut background = jobs::spawn_all(&broker, &store, &spool, &stop);
    background.spawn(memory::run_trim(
        broker.config().limits.memory_trim_interval,
        stop.child_token(),
    ));
    let app = Arc::new(App {
        broker: broker.clone(),
        db_copy: Arc::default(),
        lifecycle: app::Lifecycle::default(),
    });

    let addr = listener.local_addr()?;
    tracing::info!(%addr, "{LISTENING_LINE}");
    let limits = broker.config().limits.clone();
    let mut serving = tokio::spawn(http::serve::serve(
        listener,
        http::router(app.clone())?,
        limits,
        stop.clone(),
    ));
    let deadline = tokio::select! {
        () = shutdown.cancelled() => tokio::time::Instant::now() + stop_config.timeout,
        served = &mut serving => {
            // the listener failed: nothing to drain
            stop.cancel();
            background.abort_all();
            served??;
            return Ok(());
        }
    };
    app.lifecycle.begin_drain();
    tracing::info!(
        drain_ms = stop_config.drain.as_millis() as u64,
        timeout_ms = stop_config.timeout.as_millis() as u64,
        "{DRAINING_LINE}: /health answers 503, every answer closes its connection"
    );
    tokio::time::sleep(stop_config.drain).await;
    tracing::info!(
        "drain over: no new connections, parked pops answered, finishing requests in flight"
    );
    stop.cancel();
    match tokio::time::timeout_at(deadline, &mut serving).await {
        Ok(served) => served??,
        Err(_) => {
            tracing::warn!(
                timeout_ms = stop_config.timeout.as_millis() as u64,
                "SHUTDOWN_TIMEOUT_MS reached with requests in flight: closing their connections"
            );
            serving.abort();
        }
    }
    background.abort_all();
    // what this replica counted since its last flush, every request now done
    match tokio::time::timeout_at(deadline, broker.stop_activity()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::debug!(error = %e, "final flush of the activity counts failed"),
        Err(_) => tracing::warn!("SHUTDOWN_TIMEOUT_MS reached while flushing the activity counts"),
    }
    match tokio::time::timeout_at(deadline, spool.close()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "failed to close the spool"),
        Err(_) => tracing::warn!("SHUTDOWN_TIMEOUT_MS reached while closing the spool"),
    }
    tracing::info!("queen stopped");
    Ok(())
}

#[cfg(test)]
mod layering {
    //! The dependency rules of the module map (`docs/architecture.md`),
    //! checked on the source text.

    use std::path::Path;

    /// `(file, forbidden text)` for every file below `dir` that names one of `forbidden`.
    fn violations(dir: &Path, forbidden: &[&str]) -> Vec<(String, String)> {
        let mut found = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(&d).expect("readable source dir") {
                let path = entry.expect("dir entry").path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let text = std::fs::read_to_string(&path).expect("readable source");
                    found.extend(
                        forbidden
                            .iter()
                            .filter(|f| text.contains(**f))
                            .map(|f| (path.display().to_string(), (*f).to_owned())),
                    );
                }
            }
        }
        found
    }

    #[test]
    fn modules_only_call_down_the_map() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let upper = ["crate::broker", "crate::http", "crate::jobs", "crate::app"];
        for lower in ["mesh", "spool", "store"] {
            assert_eq!(violations(&src.join(lower), &upper), [], "{lower}/");
        }
        let above_broker = ["crate::http", "crate::jobs", "crate::app", "axum"];
        assert_eq!(
            violations(&src.join("broker"), &above_broker),
            [],
            "broker/"
        );
        assert_eq!(
            violations(
                &src.join("http"),
                &["crate::jobs", "crate::mesh", "crate::spool"]
            ),
            [],
            "http/"
        );
    }

    #[test]
    fn the_check_sees_a_forbidden_import() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("x.rs"), "use crate::broker::Broker;\n").expect("write");
        assert_eq!(violations(dir.path(), &["crate::broker"]).len(), 1);
    }

    /// The most lines a source file may hold.
    const MAX_LINES: usize = 600;

    /// `(file, lines)` for every `.rs` file below `dir` longer than
    /// [`MAX_LINES`]; files that are tests (`tests.rs`, `*_tests.rs`) are left
    /// out, so inline tests past the limit move to a `tests.rs` of their own.
    fn oversized(dir: &Path) -> Vec<(String, usize)> {
        let mut found = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(&d).expect("readable source dir") {
                let path = entry.expect("dir entry").path();
                let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
                if path.is_dir() {
                    stack.push(path);
                } else if name.ends_with(".rs")
                    && name != "tests.rs"
                    && !name.ends_with("_tests.rs")
                {
                    let text = std::fs::read_to_string(&path).expect("readable source");
                    let lines = text.lines().count();
                    if lines > MAX_LINES {
                        found.push((path.display().to_string(), lines));
                    }
                }
            }
        }
        found
    }

    #[test]
    fn no_source_file_is_past_what_one_person_holds() {
        let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        for entry in std::fs::read_dir(&crates).expect("crates dir") {
            let src = entry.expect("dir entry").path().join("src");
            if src.is_dir() {
                assert_eq!(oversized(&src), [], "split these files by concern");
            }
        }
    }

    #[test]
    fn the_size_check_sees_a_long_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let long = "fn f() {}\n".repeat(MAX_LINES + 1);
        std::fs::write(dir.path().join("x.rs"), &long).expect("write");
        assert_eq!(oversized(dir.path()).len(), 1);
        std::fs::rename(dir.path().join("x.rs"), dir.path().join("tests.rs")).expect("rename");
        assert_eq!(oversized(dir.path()), []);
    }
}
