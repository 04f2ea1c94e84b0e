//! The ephemeral collector (issue 33, client-surface-2.6.md §10.5): every
//! `EPHEMERAL_SWEEP_INTERVAL_MS`, on every replica, one call of
//! `queen.ephemeral_collect` forgets the implicit queues that held nothing and
//! saw no push or pop for `EPHEMERAL_IDLE_SECONDS`, and sets each queue's byte
//! count to what it holds (the count the broker-wide bound
//! `EPHEMERAL_MAX_BYTES` is checked against). Replicas sweeping at the same
//! moment skip each other's rows (`SKIP LOCKED`), so no lock gates the job.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::broker::Broker;
use crate::store::Store;

pub(super) async fn run(broker: Arc<Broker>, store: Arc<Store>, cancel: CancellationToken) {
    let period = broker.config().jobs.ephemeral_sweep_interval;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(period) => {}
            _ = cancel.cancelled() => return,
        }
        if !store.is_ready() {
            continue;
        }
        match broker.ephemeral_collect().await {
            Ok(done) if done.collected > 0 => {
                tracing::debug!(
                    collected = done.collected,
                    refreshed = done.refreshed,
                    "ephemeral collector: idle implicit queues forgotten"
                );
            }
            Ok(_) => {}
            Err(e) => tracing::debug!(error = %e, "ephemeral collector failed"),
        }
    }
}
