//! The metrics history read by `/api/v1/analytics/*`, and the on-demand sample
//! of `POST /api/v1/stats/refresh`.

use chrono::{DateTime, Utc};

use super::Broker;
use crate::store::jobs::METRICS_LOCK_KEY;
use crate::store::{
    HealthPoint, LagPoint, OpsPoint, ParkedPoint, QueuePolicy, RetentionRun, SeriesQuery,
    StoreError, WorkerPoint,
};

/// Tries for the metrics lock of an on-demand sample (another replica may be
/// writing its own sample, which takes milliseconds).
const REFRESH_LOCK_TRIES: usize = 20;

impl Broker {
    /// Starts the database copy of `/api/v1/migration/start` on this
    /// broker's store (`crate::dbcopy`: the copy runs beside the broker).
    pub async fn start_db_copy(
        &self,
        copy: &std::sync::Arc<crate::dbcopy::DbCopy>,
        request: crate::dbcopy::Request,
    ) -> Result<(), crate::dbcopy::CopyError> {
        copy.start(&self.store, request).await
    }

    /// Row counts of the copied schema on both sides (`/api/v1/migration/validate`).
    pub async fn validate_db_copy(
        &self,
        copy: &crate::dbcopy::DbCopy,
        target: Option<crate::store::dbcopy::PgEndpoint>,
        schema: Option<String>,
    ) -> Result<Vec<crate::dbcopy::TableCount>, crate::dbcopy::CopyError> {
        copy.validate(&self.store, &self.config.db, target, schema)
            .await
    }

    /// The queues this replica has a long-poll pop parked on.
    pub fn parked_queue_names(&self) -> Vec<String> {
        self.waker.parked_queue_names()
    }

    /// Writes a metrics history sample now, under the metrics lock; returns
    /// the rows written (0 when the lock stayed busy).
    pub async fn record_metrics_now(&self) -> Result<i32, StoreError> {
        for _ in 0..REFRESH_LOCK_TRIES {
            if let Some(guard) = self.store.try_advisory_lock(METRICS_LOCK_KEY).await? {
                let written = self.store.record_queue_metrics(&guard, 0).await;
                guard.release().await?;
                return written;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        Ok(0)
    }

    pub async fn queue_ops(&self, q: &SeriesQuery) -> Result<Vec<OpsPoint>, StoreError> {
        self.store.queue_ops(q).await
    }

    pub async fn queue_lag(&self, q: &SeriesQuery) -> Result<Vec<LagPoint>, StoreError> {
        self.store.queue_lag(q).await
    }

    pub async fn worker_metrics(&self, q: &SeriesQuery) -> Result<Vec<WorkerPoint>, StoreError> {
        self.store.worker_metrics(q).await
    }

    /// Health per replica per bucket.
    pub async fn worker_health(&self, q: &SeriesQuery) -> Result<Vec<HealthPoint>, StoreError> {
        self.store.worker_health(q).await
    }

    /// PostgreSQL's own state for the System view.
    pub async fn database_health(&self) -> Result<queen_proto::system::DatabaseHealth, StoreError> {
        self.store.database_health().await
    }

    pub async fn parked_replicas(&self, q: &SeriesQuery) -> Result<Vec<ParkedPoint>, StoreError> {
        self.store.parked_replicas(q).await
    }

    pub async fn retention_report(
        &self,
        queue: Option<&str>,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<(Vec<QueuePolicy>, Vec<RetentionRun>), StoreError> {
        Ok((
            self.store.retention_policies(queue).await?,
            self.store.retention_runs(from, to).await?,
        ))
    }
}
