//! Every replica writes its own throughput row each stats interval (not gated).

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::broker::Broker;

pub(super) async fn run(broker: Arc<Broker>, cancel: CancellationToken) {
    let m = &broker.metrics;
    let mut last = (m.pushed.get(), m.popped.get(), m.acked_total());
    loop {
        tokio::select! {
            _ = tokio::time::sleep(broker.config.jobs.stats_interval) => {}
            _ = cancel.cancelled() => return,
        }
        if !broker.store.is_ready() {
            continue;
        }
        let now = (m.pushed.get(), m.popped.get(), m.acked_total());
        let delta = |a: u64, b: u64| i64::try_from(a.saturating_sub(b)).unwrap_or(i64::MAX);
        match broker
            .store
            .write_replica_stats(
                &broker.config.server_id,
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
