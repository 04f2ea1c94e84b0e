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
/// at PostgreSQL (or, when the server refused the credentials, that it did
/// and why), then retries quietly until it works or the broker stops.
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
            Err(e) if crate::store::is_foreign_schema(&e) => {
                tracing::error!(error = %e, "refusing to start");
                cancel.cancel();
                return;
            }
            Err(e) => {
                if let (false, Some(why)) = (warned, e.credentials_refused()) {
                    tracing::warn!(
                        "PostgreSQL at {} refused the broker's credentials ({why}): set the user and \
                         password it has a role for (PG_USER and PG_PASSWORD, or user:password@ in \
                         DATABASE_URL; the URI `pg_autoctl show uri` prints names no user, so the \
                         operating-system user is tried); /health reports it until it works; \
                         retrying every 2s",
                        broker.config().db.target()
                    );
                    warned = true;
                } else if !warned {
                    tracing::warn!(
                        "cannot reach PostgreSQL at {} ({e}): point the broker at a running server \
                         (PG_HOST, PG_PORT, PG_USER, PG_PASSWORD, PG_DB or DATABASE_URL), or let it run \
                         its own with `queen-server serve --embedded-pg DIR`; retrying every 2s",
                        broker.config().db.target()
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

/// Fits the pool into the server's `max_connections`: unset `DB_POOL_SIZE`
/// is sized from it (said once), a set one that does not fit is warned about.
async fn check_connection_budget(broker: &Broker, store: &Store) {
    match store.max_connections().await {
        Ok(max) => {
            let replicas = broker.config().mesh.peers.len() as i64 + 1;
            let pool = broker.config().db.pool_size as i64;
            // each replica also opens a few direct connections (jobs, migrations, the probe)
            let needed = replicas * (pool + DIRECT_CONNECTIONS);
            if needed <= max {
                return;
            }
            if broker.config().db.pool_size_explicit {
                tracing::warn!(
                    pool_size = pool,
                    replicas,
                    max_connections = max,
                    "DB_POOL_SIZE x replicas does not fit PostgreSQL max_connections; lower DB_POOL_SIZE"
                );
            } else {
                let fitted = fitted_pool_size(max, replicas);
                store.resize_pool(fitted);
                tracing::info!(
                    "DB_POOL_SIZE unset: the pool holds {fitted} connections (not {pool}), so that \
                     {replicas} replica(s) fit PostgreSQL max_connections={max} with a quarter left \
                     to other clients; set DB_POOL_SIZE to choose"
                );
            }
        }
        Err(e) => tracing::debug!(error = %e, "could not read max_connections"),
    }
}

/// Direct connections of one replica besides its pool.
const DIRECT_CONNECTIONS: i64 = 3;

/// The pool size per replica that leaves a quarter of `max_connections`
/// (after the superuser reserve of 3) to other clients; at least 2.
fn fitted_pool_size(max_connections: i64, replicas: i64) -> usize {
    let usable = (max_connections - 3).max(0) * 3 / 4;
    let per_replica = usable / replicas.max(1) - DIRECT_CONNECTIONS;
    per_replica.max(2) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_pool_fits_the_server() {
        // a stock PostgreSQL (100) with one broker, with three
        assert_eq!(fitted_pool_size(100, 1), 69);
        assert_eq!(fitted_pool_size(100, 3), 21);
        assert!(3 * (fitted_pool_size(100, 3) as i64 + DIRECT_CONNECTIONS) <= 100);
        assert_eq!(fitted_pool_size(5, 4), 2);
    }
}
