//! Use cases of the broker: push, pop, ack, transaction, lease, queue admin.
//!
//! No HTTP types and no SQL here: requests arrive validated from `http`, and
//! everything durable goes through [`Store`].

mod ack;
pub mod config_cache;
pub mod crypto;
pub mod long_poll;
pub mod metrics;
mod pop;
mod push;
mod queues;
pub mod recent;
mod transaction;

use std::sync::{Arc, OnceLock};

use queen_proto::mesh::{
    Frame, MaintenanceKind, MaintenanceModeSet, MessageAvailable, PartitionFree,
    QueueConfigInvalidate,
};

use tokio_util::sync::CancellationToken;

pub use ack::AckRequest;
pub use pop::{PopOutcome, PopRequest, PopTarget};
pub use push::{PushItem, PushOutcome};
pub use transaction::{TxOp, TxResult};

use crate::config::Config;
use crate::store::{QueueRow, Store, StoreError};
use config_cache::QueueCache;
use long_poll::Waker;
use metrics::{Flags, Metrics};

/// Waker key every push notifies: namespace pops, which span queues, park on it.
pub const ANY_QUEUE_KEY: &str = "*";

/// Why a use case could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// The request is malformed or refers to something invalid (HTTP 400).
    #[error("{0}")]
    Invalid(String),
    /// Push maintenance mode is on and there is no spool to take the push (HTTP 503).
    #[error("{0}")]
    Maintenance(String),
    /// The disk spool could not take a push: full, over its limit, or failing (HTTP 503).
    #[error("{0}")]
    Spool(String),
    /// A broken invariant inside the broker (HTTP 500).
    #[error("internal error: {0}")]
    Internal(String),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The broker: shared by every request handler and background job.
#[derive(Debug)]
pub struct Broker {
    pub config: Config,
    pub store: Store,
    pub waker: Waker,
    pub queues: QueueCache,
    /// Partitions written to lately, tried first by wildcard pops.
    pub recent: recent::RecentPartitions,
    pub metrics: Metrics,
    pub flags: Flags,
    /// This broker's disk spool: takes pushes while PostgreSQL is away.
    pub spool: crate::spool::Spool,
    /// Encrypts payloads of queues with `encryptionEnabled` (when a key is set).
    pub cipher: Option<crypto::PayloadCipher>,
    /// The mesh to other replicas; unset when it does not run.
    pub mesh: OnceLock<Arc<crate::mesh::Mesh>>,
    /// Cancelled at shutdown: parked pops answer empty at once.
    pub shutdown: CancellationToken,
}

impl Broker {
    pub fn new(
        config: Config,
        store: Store,
        spool: crate::spool::Spool,
        shutdown: CancellationToken,
    ) -> Arc<Self> {
        let metrics = Metrics::default();
        for collector in store.metric_collectors() {
            if let Err(e) = metrics.registry.register(collector) {
                tracing::warn!(error = %e, "database metrics not registered");
            }
        }
        Arc::new(Self {
            cipher: config
                .encryption_key
                .as_ref()
                .map(crypto::PayloadCipher::new),
            queues: QueueCache::new(config.queue_config_max_age),
            recent: recent::RecentPartitions::default(),
            config,
            store,
            waker: Waker::default(),
            metrics,
            flags: Flags::default(),
            spool,
            mesh: OnceLock::new(),
            shutdown,
        })
    }

    /// Sends a hint to the other replicas, if the mesh runs.
    fn hint(&self, frame: Frame) {
        if let Some(mesh) = self.mesh.get() {
            mesh.send(&frame);
        }
    }

    /// A push committed on `queue`/`partition`: wakes pops parked here and on peers.
    pub fn announce_messages(&self, queue: &str, partition: &str) {
        self.recent.record(queue, partition);
        self.waker.notify(queue);
        self.waker.notify(ANY_QUEUE_KEY);
        self.hint(Frame::MessageAvailable(MessageAvailable {
            queue: queue.to_owned(),
            partition: partition.to_owned(),
        }));
    }

    /// A lease on `queue`/`partition` was released for `group`.
    pub fn announce_partition_free(&self, queue: &str, partition: &str, group: &str) {
        self.waker.notify(queue);
        self.hint(Frame::PartitionFree(PartitionFree {
            queue: queue.to_owned(),
            partition: partition.to_owned(),
            consumer_group: group.to_owned(),
        }));
    }

    /// A queue's configuration changed or it was deleted.
    pub fn announce_config_change(&self, queue: &str) {
        self.queues.invalidate(queue);
        self.hint(Frame::QueueConfigInvalidate(QueueConfigInvalidate {
            queue: queue.to_owned(),
        }));
    }

    /// Push, pop and ack rates of this replica.
    pub fn rates(&self) -> metrics::Rates {
        self.metrics.rates()
    }

    /// Sets a maintenance flag in PostgreSQL and in this replica's cache.
    pub async fn set_maintenance(
        &self,
        kind: MaintenanceKind,
        enabled: bool,
    ) -> Result<(), StoreError> {
        self.store.set_maintenance(kind, enabled).await?;
        self.apply_maintenance(kind, enabled);
        self.hint(Frame::MaintenanceModeSet(MaintenanceModeSet {
            mode: kind,
            enabled,
        }));
        Ok(())
    }

    /// Applies a maintenance flag to this replica's cache (hint or reconcile).
    pub fn apply_maintenance(&self, kind: MaintenanceKind, enabled: bool) {
        use std::sync::atomic::Ordering;
        let flag = match kind {
            MaintenanceKind::Pop => &self.flags.pop_maintenance,
            MaintenanceKind::Push => &self.flags.push_maintenance,
        };
        if flag.swap(enabled, Ordering::Relaxed) != enabled {
            tracing::info!(
                mode = match kind {
                    MaintenanceKind::Pop => "pop",
                    MaintenanceKind::Push => "push",
                },
                enabled,
                "maintenance mode changed"
            );
        }
    }

    /// Re-reads persisted state that other replicas may have changed.
    pub async fn reconcile(&self) -> Result<(), StoreError> {
        for kind in [MaintenanceKind::Push, MaintenanceKind::Pop] {
            let enabled = self.store.maintenance(kind).await?;
            self.apply_maintenance(kind, enabled);
        }
        Ok(())
    }

    /// Returns a queue's configuration, from the cache while it is fresh.
    pub async fn queue(&self, name: &str) -> Result<Option<QueueRow>, StoreError> {
        if let Some(row) = self.queues.get(name) {
            return Ok(Some(row));
        }
        let row = self.store.find_queue(name).await?;
        if let Some(row) = &row {
            self.queues.put(row.clone());
        }
        Ok(row)
    }

    /// Returns a queue's configuration, creating the queue with default options
    /// (namespace and task derived from its name) if it does not exist.
    pub async fn queue_or_create(
        &self,
        name: &queen_proto::QueueName,
    ) -> Result<QueueRow, StoreError> {
        if let Some(row) = self.queue(name.as_str()).await? {
            return Ok(row);
        }
        let (namespace, task) = name.derived_namespace_task();
        let row = self
            .store
            .ensure_queue(name.as_str(), &namespace, &task)
            .await?;
        self.queues.put(row.clone());
        Ok(row)
    }
}
