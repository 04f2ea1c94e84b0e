//! The database watchdog: probes PostgreSQL on its own connection and, when
//! it stops answering, declares it lost at once, so pushes go to the spool,
//! pops answer, `/health` says 503 and every in-flight call returns, instead
//! of all of them waiting on a frozen server. The spool's replay loop probes
//! through the pool while it is down and marks it up again.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::spool::Spool;
use crate::store::{Probe, Store};

/// Runs until `cancel` is cancelled.
pub(super) async fn run(
    store: Arc<Store>,
    spool: Arc<Spool>,
    interval: std::time::Duration,
    timeout: std::time::Duration,
    cancel: CancellationToken,
) {
    let mut probe = Probe::default();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = cancel.cancelled() => return,
        }
        // before the migrations, and while already down, others probe
        if !store.is_ready() {
            continue;
        }
        if store.is_lost() {
            // the replay loop probes only while the spool's outage is on
            if !spool.outage.is_down() {
                spool
                    .outage
                    .mark_down(&"PostgreSQL declared lost by the liveness probe");
            }
            continue;
        }
        let probed = tokio::select! {
            r = store.probe(&mut probe, timeout) => r,
            _ = cancel.cancelled() => return,
        };
        if let Err(e) = probed {
            spool.outage.mark_down(&e);
            if store.declare_lost() {
                tracing::warn!(error = %e, "PostgreSQL stopped answering: in-flight calls abandoned, pops answer empty, pushes are buffered");
            }
            spool.kick.notify_one();
        }
    }
}
