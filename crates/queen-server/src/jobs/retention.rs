//! Retention: deletes expired messages, empty partitions and old statistics.
//! Leader-gated: the session advisory lock is held across the whole cycle.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{gated_cycle, RETENTION_LOCK_KEY};
use crate::broker::Broker;
use crate::store::Store;

/// Most retention statements one cycle runs, so a cycle always ends.
const MAX_STEPS: usize = 1_000;

pub(super) async fn run(broker: Arc<Broker>, store: Arc<Store>, cancel: CancellationToken) {
    let period = broker.config().jobs.retention_interval;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(period) => {}
            _ = cancel.cancelled() => return,
        }
        let jobs = broker.config().jobs.clone();
        let store = &*store;
        gated_cycle(
            store,
            &broker.config().server_id,
            "retention",
            RETENTION_LOCK_KEY,
            period,
            async move |lock| {
                let mut affected = 0i64;
                for _ in 0..MAX_STEPS {
                    let n = store.apply_retention(lock, jobs.retention_batch).await?;
                    affected += i64::from(n);
                    if n < jobs.retention_batch {
                        break;
                    }
                }
                for _ in 0..MAX_STEPS {
                    let n = store
                        .cleanup_partitions(lock, jobs.partition_cleanup_days, jobs.retention_batch)
                        .await?;
                    affected += i64::from(n);
                    if n < jobs.retention_batch {
                        break;
                    }
                }
                store
                    .purge_replica_stats(lock, jobs.metrics_retention_days)
                    .await?;
                store
                    .purge_replica_health(lock, jobs.metrics_retention_days)
                    .await?;
                store
                    .purge_metrics_history(lock, jobs.metrics_retention_days)
                    .await?;
                Ok(affected)
            },
        )
        .await;
    }
}
