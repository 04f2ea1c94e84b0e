//! Retention: deletes expired messages, empty partitions and old statistics.
//! Leader-gated: the session advisory lock is held across the whole cycle.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{gated_cycle, RETENTION_LOCK_KEY};
use crate::broker::Broker;
use crate::store::jobs::{apply_retention, cleanup_partitions, purge_replica_stats};

/// Most retention statements one cycle runs, so a cycle always ends.
const MAX_STEPS: usize = 1_000;

pub(super) async fn run(broker: Arc<Broker>, cancel: CancellationToken) {
    let period = broker.config.jobs.retention_interval;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(period) => {}
            _ = cancel.cancelled() => return,
        }
        let jobs = broker.config.jobs.clone();
        gated_cycle(
            &broker,
            "retention",
            RETENTION_LOCK_KEY,
            period,
            async move |client| {
                let mut affected = 0i64;
                for _ in 0..MAX_STEPS {
                    let n = apply_retention(client, jobs.retention_batch).await?;
                    affected += i64::from(n);
                    if n < jobs.retention_batch {
                        break;
                    }
                }
                for _ in 0..MAX_STEPS {
                    let n = cleanup_partitions(
                        client,
                        jobs.partition_cleanup_days,
                        jobs.retention_batch,
                    )
                    .await?;
                    affected += i64::from(n);
                    if n < jobs.retention_batch {
                        break;
                    }
                }
                purge_replica_stats(client, jobs.metrics_retention_days).await?;
                Ok(affected)
            },
        )
        .await;
    }
}
