//! Every replica writes its own throughput row each stats interval (not gated).

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::broker::Broker;
use crate::store::Store;

pub(super) async fn run(broker: Arc<Broker>, store: Arc<Store>, cancel: CancellationToken) {
    let mut last = broker.throughput_totals();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(broker.config().jobs.stats_interval) => {}
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
            )
            .await
        {
            Ok(()) => last = now,
            Err(e) => tracing::debug!(error = %e, "writing replica stats failed"),
        }
    }
}
