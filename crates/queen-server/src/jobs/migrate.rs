//! Applies migrations at start, retrying while PostgreSQL cannot be reached.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::backoff::Backoff;
use crate::broker::Broker;
use crate::store::Store;

/// Pause between attempts to reach the database at start.
const RETRY: Duration = Duration::from_secs(2);

/// Logs one clear message on the first failure saying how to point the broker
/// at PostgreSQL, then retries quietly until it works or the broker stops.
pub(super) async fn run(broker: Arc<Broker>, store: Arc<Store>, cancel: CancellationToken) {
    let mut warned = false;
    let mut retry = Backoff::fixed(RETRY);
    loop {
        match store.migrate().await {
            Ok(applied) => {
                if warned {
                    tracing::info!("database reachable again");
                }
                tracing::info!(applied, "database schema ready");
                check_connection_budget(&broker, &store).await;
                if let Err(e) = broker.reconcile().await {
                    tracing::debug!(error = %e, "first reconcile failed");
                }
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
            _ = tokio::time::sleep(retry.next_delay()) => {}
            _ = cancel.cancelled() => return,
        }
    }
}

/// Warns when this replica's pool, times the replicas configured, cannot fit in
/// the server's `max_connections`.
async fn check_connection_budget(broker: &Broker, store: &Store) {
    match store.max_connections().await {
        Ok(max) => {
            let replicas = broker.config().mesh.peers.len() as i64 + 1;
            let pool = broker.config().db.pool_size as i64;
            // each replica also opens a few direct connections (jobs, migrations)
            let needed = replicas * (pool + 2);
            if needed > max {
                tracing::warn!(
                    pool_size = pool,
                    replicas,
                    max_connections = max,
                    "DB_POOL_SIZE x replicas does not fit PostgreSQL max_connections; lower DB_POOL_SIZE"
                );
            }
        }
        Err(e) => tracing::debug!(error = %e, "could not read max_connections"),
    }
}
