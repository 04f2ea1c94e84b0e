//! Queen: a partitioned message queue whose only source of truth is PostgreSQL.
//!
//! Module map (dependencies point down):
//! - [`http`]: the HTTP API v1 router; parses and validates, then calls the broker.
//! - [`broker`]: use cases (push, pop, ack, transaction, lease, queues), the
//!   long-poll waker and the queue config cache. No HTTP types, no SQL.
//! - [`store`]: PostgreSQL: the pool, migrations, one typed method per statement.
//! - [`config`]: environment variables → [`config::Config`].
//! - [`spool`]: the disk spool that takes pushes while PostgreSQL is away or push
//!   maintenance is on, and replays them in order, exactly once.
//!
//! Data flow: push → `store.append` (one `queen.push_batch` call: offsets
//! allocated under the partition row lock, one segment row per partition) →
//! waker wakes parked pops. Pop → `store.claim` (`queen.claim_partition` /
//! `queen.pop_queue`: lease on the (partition, group) cursor row, messages read
//! from segments). Ack → `store.acknowledge` (`queen.ack_batch`: cursor moves).

pub mod app;
pub mod backoff;
pub mod broker;
pub mod config;
pub mod http;
pub mod jobs;
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

/// Runs the broker on `listener` until `shutdown` is cancelled.
pub async fn run(
    config: Config,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    tracing::info!(config = %config.describe(), "effective configuration");
    // built in dependency order: the broker takes the store, the spool and the mesh
    let store = Arc::new(Store::new(&config.db)?);
    let spool = Arc::new(open_spool(&config).await?);
    let mesh = if config.mesh.is_active() {
        let (mesh, inbox) = Mesh::start(
            config.mesh.clone(),
            config.server_id.clone(),
            shutdown.child_token(),
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
        shutdown.child_token(),
    );
    if let Some(inbox) = inbox {
        spawn_hint_applier(broker.clone(), inbox, shutdown.child_token());
    }
    let mut background = jobs::spawn_all(&broker, &store, &spool, &shutdown);
    let app = Arc::new(App {
        broker: broker.clone(),
    });

    let addr = listener.local_addr()?;
    tracing::info!(%addr, "{LISTENING_LINE}");
    axum::serve(listener, http::router(app)?)
        .with_graceful_shutdown({
            let s = shutdown.clone();
            async move { s.cancelled().await }
        })
        .await?;
    shutdown.cancel();
    background.abort_all();
    tracing::info!("queen stopped");
    Ok(())
}
