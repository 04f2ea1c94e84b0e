//! Queen: a partitioned message queue whose only source of truth is PostgreSQL.
//!
//! Module map (dependencies point down):
//! - [`http`]: the HTTP API v1 router; parses and validates, then calls the broker.
//! - [`broker`]: use cases (push, pop, ack, transaction, lease, queues), the
//!   long-poll waker and the queue config cache. No HTTP types, no SQL.
//! - [`store`]: PostgreSQL: the pool, migrations, one typed method per statement.
//! - [`config`]: environment variables → [`config::Config`].
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
pub mod store;
pub mod telemetry;

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::broker::Broker;
use crate::config::Config;
use crate::store::Store;

/// The line logged once the HTTP listener is bound; tests and operators look for it.
pub const LISTENING_LINE: &str = "queen listening";

/// Pause between attempts to reach the database at start (and to migrate).
const MIGRATE_RETRY: Duration = Duration::from_secs(2);

/// Runs the broker on `listener` until `shutdown` is cancelled.
pub async fn run(
    config: Config,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    if config.db.use_ssl {
        anyhow::bail!(
            "PG_USE_SSL=true: TLS connections to PostgreSQL are not supported by this build yet"
        );
    }
    tracing::info!(config = %config.describe(), "effective configuration");
    let store = Store::new(&config.db)?;
    let broker = Broker::new(config, store, shutdown.child_token());
    let app = Arc::new(App {
        broker: broker.clone(),
    });

    let migrator = tokio::spawn(migrate_until_ready(broker.clone(), shutdown.clone()));
    let housekeeping = tokio::spawn(housekeeping(broker.clone(), shutdown.clone()));
    let reconciler = tokio::spawn(reconcile(broker.clone(), shutdown.clone()));

    let addr = listener.local_addr()?;
    tracing::info!(%addr, "{LISTENING_LINE}");
    axum::serve(listener, http::router(app))
        .with_graceful_shutdown({
            let s = shutdown.clone();
            async move { s.cancelled().await }
        })
        .await?;
    migrator.abort();
    housekeeping.abort();
    reconciler.abort();
    tracing::info!("queen stopped");
    Ok(())
}

/// Applies migrations, retrying while the database is unreachable. Logs one
/// clear message on the first failure saying how to point the broker at PostgreSQL.
async fn migrate_until_ready(broker: Arc<Broker>, shutdown: CancellationToken) {
    let mut warned = false;
    loop {
        match broker.store.migrate().await {
            Ok(applied) => {
                if warned {
                    tracing::info!("database reachable again");
                }
                tracing::info!(applied, "database schema ready");
                check_connection_budget(&broker).await;
                return;
            }
            Err(e) => {
                if !warned {
                    tracing::warn!(
                        error = %e,
                        "cannot reach PostgreSQL; set PG_HOST, PG_PORT, PG_USER, PG_PASSWORD, PG_DB \
                         or DATABASE_URL to point the broker at a database; retrying every 2s"
                    );
                    warned = true;
                } else {
                    tracing::debug!(error = %e, "database still unreachable");
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(MIGRATE_RETRY) => {}
            _ = shutdown.cancelled() => return,
        }
    }
}

/// Warns when the pool cannot fit in the server's `max_connections`.
async fn check_connection_budget(broker: &Broker) {
    match broker.store.max_connections().await {
        Ok(max) => {
            let pool = broker.config.db.pool_size as i64;
            if pool > max {
                tracing::warn!(
                    pool_size = pool,
                    max_connections = max,
                    "DB_POOL_SIZE exceeds PostgreSQL max_connections; lower DB_POOL_SIZE"
                );
            }
        }
        Err(e) => tracing::debug!(error = %e, "could not read max_connections"),
    }
}

/// Re-reads persisted cluster state on a fixed cadence, so a flag changed on
/// another replica reaches this one even without any hint.
async fn reconcile(broker: Arc<Broker>, shutdown: CancellationToken) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(broker.config.reconcile_interval) => {
                if broker.store.is_ready() {
                    if let Err(e) = broker.reconcile().await {
                        tracing::debug!(error = %e, "reconcile failed");
                    }
                }
            }
            _ = shutdown.cancelled() => return,
        }
    }
}

/// Every 10 s: closes connections idle past `DB_IDLE_TIMEOUT` and drops
/// long-poll notifiers nobody waits on.
async fn housekeeping(broker: Arc<Broker>, shutdown: CancellationToken) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(10)) => {
                broker.waker.prune();
                broker.store.close_idle_connections(broker.config.db.idle_timeout);
            }
            _ = shutdown.cancelled() => return,
        }
    }
}
