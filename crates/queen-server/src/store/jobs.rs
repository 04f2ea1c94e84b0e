//! Statements of the background jobs, and the session advisory lock that gates
//! the leader-only ones. A gated job's statements run on the lock's own
//! connection, so the lock is held for the whole cycle.

use tokio_postgres::Client;

use super::op::{with_op, DbOp};
use super::{col, Store, StoreError};

/// Advisory lock key of the queue metrics history ("queenmet"): taken by the
/// stats job and by an on-demand sample, so one replica writes each interval.
pub const METRICS_LOCK_KEY: i64 = 0x7175_6565_6e6d_6574;

/// A session-scoped advisory lock held on a dedicated connection. Dropping the
/// guard closes that connection, which releases the lock in PostgreSQL too.
#[derive(Debug)]
pub struct AdvisoryLockGuard {
    client: Client,
    key: i64,
}

impl AdvisoryLockGuard {
    /// The connection that holds the lock, for statements run under it.
    pub(in crate::store) fn client(&self) -> &Client {
        &self.client
    }

    /// Releases the lock explicitly.
    pub async fn release(self) -> Result<(), StoreError> {
        self.client
            .execute("SELECT pg_advisory_unlock($1)", &[&self.key])
            .await?;
        Ok(())
    }
}

impl Store {
    /// Takes the session advisory lock `key` on a new direct connection, or
    /// returns `None` when another session holds it.
    pub async fn try_advisory_lock(
        &self,
        key: i64,
    ) -> Result<Option<AdvisoryLockGuard>, StoreError> {
        let client = self.connect_direct().await?;
        let won: bool = col(
            &client
                .query_one("SELECT pg_try_advisory_lock($1) AS won", &[&key])
                .await?,
            "won",
        )?;
        Ok(won.then_some(AdvisoryLockGuard { client, key }))
    }

    /// Analyzes the hot tables that changed a lot since their last analyze;
    /// see `queen.refresh_planner_stats`. Returns how many it analyzed.
    pub async fn refresh_planner_stats(&self) -> Result<i32, StoreError> {
        with_op!(self.db, DbOp::PlannerStats, |client| {
            let row = client
                .query_one("SELECT queen.refresh_planner_stats() AS analyzed", &[])
                .await?;
            col(&row, "analyzed")
        })
    }

    /// Writes one throughput row of this replica.
    pub async fn write_replica_stats(
        &self,
        server_id: &str,
        pushed: i64,
        popped: i64,
        acked: i64,
        parked_queues: &[String],
    ) -> Result<(), StoreError> {
        with_op!(self.db, DbOp::ReplicaStats, |client| {
            client
                .execute(
                    "INSERT INTO queen.replica_stats (server_id, bucket, pushed, popped, acked, parked_queues)
                         VALUES ($1, date_trunc('milliseconds', now()), $2, $3, $4, $5)
                         ON CONFLICT (server_id, bucket) DO NOTHING",
                    &[&server_id, &pushed, &popped, &acked, &parked_queues],
                )
                .await?;
            Ok(())
        })
    }

    /// Claims cycle `cycle` of `job` for this replica; false if it already ran.
    pub async fn claim_cycle(
        &self,
        lock: &AdvisoryLockGuard,
        job: &str,
        cycle: i64,
        server_id: &str,
    ) -> Result<bool, StoreError> {
        with_op!(self.db, DbOp::JobCycle, on = &lock.client, |client| {
            let n = client
                .execute(
                    "INSERT INTO queen.job_runs (job, cycle, server_id) VALUES ($1, $2, $3)
                         ON CONFLICT (job, cycle) DO NOTHING",
                    &[&job, &cycle, &server_id],
                )
                .await?;
            Ok(n == 1)
        })
    }

    /// Marks a claimed cycle finished with the number of rows it touched.
    pub async fn finish_cycle(
        &self,
        lock: &AdvisoryLockGuard,
        job: &str,
        cycle: i64,
        affected: i64,
    ) -> Result<(), StoreError> {
        with_op!(self.db, DbOp::JobCycle, on = &lock.client, |client| {
            client
                .execute(
                    "UPDATE queen.job_runs SET finished_at = clock_timestamp(), affected = $3
                         WHERE job = $1 AND cycle = $2",
                    &[&job, &cycle, &affected],
                )
                .await?;
            Ok(())
        })
    }

    /// One retention step: up to `batch` expired segments; see `queen.apply_retention`.
    pub async fn apply_retention(
        &self,
        lock: &AdvisoryLockGuard,
        batch: i32,
    ) -> Result<i32, StoreError> {
        with_op!(self.db, DbOp::Retention, on = &lock.client, |client| {
            let row = client
                .query_one("SELECT queen.apply_retention($1) AS deleted", &[&batch])
                .await?;
            col(&row, "deleted")
        })
    }

    /// One cleanup step of empty inactive partitions.
    pub async fn cleanup_partitions(
        &self,
        lock: &AdvisoryLockGuard,
        days: i32,
        batch: i32,
    ) -> Result<i32, StoreError> {
        with_op!(self.db, DbOp::Retention, on = &lock.client, |client| {
            let row = client
                .query_one(
                    "SELECT queen.cleanup_partitions($1, $2) AS deleted",
                    &[&days, &batch],
                )
                .await?;
            col(&row, "deleted")
        })
    }

    /// Deletes per-replica statistics older than `days`.
    pub async fn purge_replica_stats(
        &self,
        lock: &AdvisoryLockGuard,
        days: i32,
    ) -> Result<u64, StoreError> {
        with_op!(self.db, DbOp::Retention, on = &lock.client, |client| {
            Ok(client
                .execute(
                    "DELETE FROM queen.replica_stats
                         WHERE bucket < now() - make_interval(days => $1)",
                    &[&days],
                )
                .await?)
        })
    }

    /// One eviction pass; see `queen.evict_expired`.
    pub async fn evict_expired(
        &self,
        lock: &AdvisoryLockGuard,
        batch: i32,
    ) -> Result<i32, StoreError> {
        with_op!(self.db, DbOp::Eviction, on = &lock.client, |client| {
            let row = client
                .query_one("SELECT queen.evict_expired($1) AS evicted", &[&batch])
                .await?;
            col(&row, "evicted")
        })
    }
}
