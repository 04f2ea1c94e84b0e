//! Eviction: messages past their queue's `maxWaitTimeSeconds` move to each
//! waiting group's DLQ. Leader-gated by an advisory lock.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{gated_cycle, EVICTION_LOCK_KEY};
use crate::broker::Broker;
use crate::store::Store;

/// Most eviction passes one cycle runs.
const MAX_PASSES: usize = 100;

pub(super) async fn run(broker: Arc<Broker>, store: Arc<Store>, cancel: CancellationToken) {
    let period = broker.config().jobs.eviction_interval;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(period) => {}
            _ = cancel.cancelled() => return,
        }
        let batch = broker.config().jobs.eviction_batch;
        let store = &*store;
        gated_cycle(
            store,
            &broker.config().server_id,
            "eviction",
            EVICTION_LOCK_KEY,
            period,
            async move |lock| {
                let mut affected = 0i64;
                for _ in 0..MAX_PASSES {
                    let n = store.evict_expired(lock, batch).await?;
                    affected += i64::from(n);
                    if n == 0 {
                        break;
                    }
                }
                Ok(affected)
            },
        )
        .await;
    }
}
