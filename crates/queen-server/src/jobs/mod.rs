//! Background loops, each `async fn run(broker, cancel)`.
//!
//! - `migrate`: applies migrations at start, retrying while PostgreSQL is away;
//! - `reconcile`: re-reads persisted cluster state on a fixed cadence (every replica);
//! - `housekeeping`: idle connections, unused long-poll notifiers (every replica);
//! - `stats`: this replica's throughput row (every replica, not gated), and
//!   the per-queue metrics history row (leader-gated, `METRICS_LOCK_KEY`);
//! - `health`: this replica's health row, event loop lag, CPU, memory, pool,
//!   spool (every replica);
//! - `activity`: this replica's per-queue, per-minute counts and its share
//!   of the cluster counters, added to PostgreSQL (every replica);
//! - `planner_stats`: analyzes hot tables that changed a lot (every replica,
//!   one at a time through an advisory lock inside the SQL function);
//! - `retention`, `eviction`: leader-gated by a PostgreSQL advisory lock, so one
//!   replica does the work of each cycle;
//! - `ephemeral`: collects idle implicit ephemeral queues and refreshes the
//!   byte counts of the broker-wide ephemeral bound (every replica, rows
//!   locked `SKIP LOCKED`);
//! - `timers`: fires due timers (every replica, one sweep at a time through
//!   a transaction-scoped advisory lock) and prunes expired KV rows;
//! - `db_watchdog`: probes PostgreSQL on its own connection and declares it
//!   lost when it stops answering (every replica);
//! - `spool_replay`: replays the disk spool into PostgreSQL once it is back
//!   (every replica, its own spool).

mod activity;
mod db_watchdog;
mod ephemeral;
mod eviction;
mod health;
mod migrate;
mod planner_stats;
mod retention;
mod spool_replay;
mod stats;
mod timers;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::broker::Broker;
use crate::spool::Spool;
use crate::store::jobs::AdvisoryLockGuard;
use crate::store::Store;

/// Advisory lock key of the retention job ("queenret").
pub const RETENTION_LOCK_KEY: i64 = 0x7175_6565_6e72_6574;
/// Advisory lock key of the eviction job ("queenevi").
pub const EVICTION_LOCK_KEY: i64 = 0x7175_6565_6e65_7669;
pub use crate::store::jobs::METRICS_LOCK_KEY;

/// Starts every background loop; they stop when `cancel` is cancelled.
pub fn spawn_all(
    broker: &Arc<Broker>,
    store: &Arc<Store>,
    spool: &Arc<Spool>,
    cancel: &CancellationToken,
) -> JoinSet<()> {
    let mut set = JoinSet::new();
    set.spawn(migrate::run(broker.clone(), store.clone(), cancel.clone()));
    set.spawn(every(broker.config().reconcile_interval, cancel.clone(), {
        let (b, s) = (broker.clone(), store.clone());
        move || {
            let (b, s) = (b.clone(), s.clone());
            async move {
                if s.is_ready() {
                    if let Err(e) = b.reconcile().await {
                        tracing::debug!(error = %e, "reconcile failed");
                    }
                }
            }
        }
    }));
    set.spawn(every(HOUSEKEEPING_PERIOD, cancel.clone(), {
        let (b, s) = (broker.clone(), store.clone());
        move || {
            b.prune_waiters();
            s.close_idle_connections(b.config().db.idle_timeout);
            std::future::ready(())
        }
    }));
    set.spawn(stats::run(broker.clone(), store.clone(), cancel.clone()));
    set.spawn(activity::run(broker.clone(), cancel.clone()));
    set.spawn(health::run(broker.clone(), store.clone(), cancel.clone()));
    set.spawn(planner_stats::run(store.clone(), cancel.clone()));
    set.spawn(retention::run(
        broker.clone(),
        store.clone(),
        cancel.clone(),
    ));
    set.spawn(eviction::run(broker.clone(), store.clone(), cancel.clone()));
    set.spawn(timers::run(broker.clone(), store.clone(), cancel.clone()));
    set.spawn(ephemeral::run(
        broker.clone(),
        store.clone(),
        cancel.clone(),
    ));
    set.spawn(db_watchdog::run(
        store.clone(),
        spool.clone(),
        broker.config().db.probe_interval,
        broker.config().db.probe_timeout,
        cancel.clone(),
    ));
    // outside the set, which is aborted at shutdown: the replay stops by
    // itself at `cancel`, after the batch in hand
    tokio::spawn(spool_replay::run(
        broker.clone(),
        store.clone(),
        spool.clone(),
        cancel.clone(),
    ));
    set
}

/// Housekeeping cadence: idle connections and unused notifiers (10 s).
const HOUSEKEEPING_PERIOD: Duration = Duration::from_secs(10);

/// Runs `tick` every `period` until cancelled.
async fn every<F, Fut>(period: Duration, cancel: CancellationToken, mut tick: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    loop {
        tokio::select! {
            _ = tokio::time::sleep(period) => tick().await,
            _ = cancel.cancelled() => return,
        }
    }
}

/// The number of the cycle a job period falls in, the same on every replica.
fn cycle_number(period: Duration) -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    (now / period.as_millis().max(1)) as i64
}

/// Runs one cycle of a leader-gated job: takes the advisory lock (skipping the
/// cycle when another replica holds it), claims the cycle so it runs once, runs
/// `work` on the lock's connection with the lock held, and records the result.
async fn gated_cycle<F>(
    store: &Store,
    server_id: &str,
    job: &'static str,
    key: i64,
    period: Duration,
    work: F,
) where
    F: AsyncFnOnce(&AdvisoryLockGuard) -> Result<i64, crate::store::StoreError>,
{
    if !store.is_ready() {
        return;
    }
    let guard = match store.try_advisory_lock(key).await {
        Ok(Some(g)) => g,
        Ok(None) => {
            tracing::debug!(job, "another replica holds the lock; skipping this cycle");
            return;
        }
        Err(e) => {
            tracing::debug!(job, error = %e, "cannot take the job lock");
            return;
        }
    };
    let cycle = cycle_number(period);
    let result = async {
        if !store.claim_cycle(&guard, job, cycle, server_id).await? {
            return Ok(None);
        }
        let affected = work(&guard).await?;
        store.finish_cycle(&guard, job, cycle, affected).await?;
        Ok::<_, crate::store::StoreError>(Some(affected))
    }
    .await;
    match result {
        Ok(Some(affected)) if affected > 0 => {
            tracing::info!(job, cycle, affected, "job cycle done")
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(job, error = %e, "job cycle failed"),
    }
    if let Err(e) = guard.release().await {
        tracing::debug!(job, error = %e, "releasing the job lock failed");
    }
}
