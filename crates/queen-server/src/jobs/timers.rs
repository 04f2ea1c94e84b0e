//! The timer sweeper: on every replica, gated per sweep by a
//! transaction-scoped advisory lock (one replica fires at a time) and exact
//! by construction (a due row is locked, fired and deleted in one
//! transaction). It sleeps until the soonest timer this replica scheduled or
//! saw pending, or `broker::timers::SWEEP_PERIOD` at the latest, so "not
//! before" lands close to its time on the replica that took the schedule.
//! Also prunes expired KV rows.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::broker::Broker;
use crate::store::Store;

pub(super) async fn run(broker: Arc<Broker>, store: Arc<Store>, cancel: CancellationToken) {
    loop {
        tokio::select! {
            _ = broker.wait_for_timers() => {}
            _ = cancel.cancelled() => return,
        }
        if !store.is_ready() {
            continue;
        }
        match broker.sweep_timers().await {
            Ok(n) if n > 0 => tracing::debug!(fired = n, "timers fired"),
            Ok(_) => {}
            Err(e) => tracing::debug!(error = %e, "timer sweep failed"),
        }
    }
}
