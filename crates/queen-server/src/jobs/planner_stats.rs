//! Planner statistics: every replica asks `queen.refresh_planner_stats()`
//! every few seconds to analyze the hot tables that grew or changed a lot
//! since their last analyze (one replica at a time; the function takes a
//! transaction-scoped advisory lock). Autovacuum alone looks at a table once
//! a minute, and until it does, plans for a queue that just gained thousands
//! of partitions are made for an empty table.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::store::Store;

/// How often each replica checks.
const PERIOD: Duration = Duration::from_secs(5);

pub(super) async fn run(store: Arc<Store>, cancel: CancellationToken) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(PERIOD) => {}
            _ = cancel.cancelled() => return,
        }
        if !store.is_ready() {
            continue;
        }
        match store.refresh_planner_stats().await {
            Ok(0) => {}
            Ok(n) => tracing::debug!(tables = n, "planner statistics refreshed"),
            Err(e) => tracing::debug!(error = %e, "refreshing planner statistics failed"),
        }
    }
}
