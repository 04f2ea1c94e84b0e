//! Every replica writes its own throughput row each stats interval (not
//! gated), with the queues it has a long-poll pop parked on. Then, under the
//! metrics advisory lock, one replica per interval writes the per-queue
//! metrics history that `/api/v1/analytics/*` reads (the SQL skips the write
//! when another replica already wrote one this interval).

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::METRICS_LOCK_KEY;
use crate::broker::Broker;
use crate::store::Store;

pub(super) async fn run(broker: Arc<Broker>, store: Arc<Store>, cancel: CancellationToken) {
    let mut last = broker.throughput_totals();
    loop {
        let period = broker.config().jobs.stats_interval;
        tokio::select! {
            _ = tokio::time::sleep(period) => {}
            _ = cancel.cancelled() => return,
        }
        if !store.is_ready() {
            continue;
        }
        let now = broker.throughput_totals();
        let delta = |a: u64, b: u64| i64::try_from(a.saturating_sub(b)).unwrap_or(i64::MAX);
        match store
            .write_replica_stats(
                &broker.config().server_id,
                delta(now.0, last.0),
                delta(now.1, last.1),
                delta(now.2, last.2),
                &broker.parked_queue_names(),
            )
            .await
        {
            Ok(()) => last = now,
            Err(e) => tracing::debug!(error = %e, "writing replica stats failed"),
        }
        // half a period: a replica whose timer runs a little early still writes
        let min_gap_ms = i64::try_from(period.as_millis() / 2).unwrap_or(i64::MAX);
        record_queue_metrics(&store, min_gap_ms).await;
    }
}

/// Writes the queue metrics history once under the advisory lock; skips
/// the interval when another replica holds it.
async fn record_queue_metrics(store: &Store, min_gap_ms: i64) {
    let guard = match store.try_advisory_lock(METRICS_LOCK_KEY).await {
        Ok(Some(g)) => g,
        Ok(None) => return,
        Err(e) => {
            tracing::debug!(error = %e, "cannot take the metrics lock");
            return;
        }
    };
    if let Err(e) = store.record_queue_metrics(&guard, min_gap_ms).await {
        tracing::debug!(error = %e, "writing the queue metrics history failed");
    }
    if let Err(e) = guard.release().await {
        tracing::debug!(error = %e, "releasing the metrics lock failed");
    }
}
