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
use crate::broker::Broker;
use crate::config::Config;
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
    let store = Store::new(&config.db)?;
    let spool = open_spool(&config).await?;
    let broker = Broker::new(config, store, spool, shutdown.child_token());
    // stops by itself when `shutdown` is cancelled
    tokio::spawn(spool::drain::run(broker.clone(), shutdown.clone()));
    let app = Arc::new(App {
        broker: broker.clone(),
    });

    let mut background = jobs::spawn_all(&broker, &shutdown);
    if broker.config.mesh.is_active() {
        let mesh = mesh::Mesh::start(
            broker.config.mesh.clone(),
            broker.config.server_id.clone(),
            broker.clone(),
            shutdown.child_token(),
        )
        .await;
        let _ = broker.mesh.set(mesh);
    } else {
        tracing::info!("mesh off (no peers or sync disabled): local long-poll waker only");
    }

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
