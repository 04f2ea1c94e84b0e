//! Use cases of the broker: push, pop, ack, transaction, lease, queue admin,
//! the admin reads, maintenance, and what hints from other replicas do.
//!
//! No HTTP types and no SQL here: requests arrive validated from `http`, and
//! everything durable goes through [`Store`]. Payloads are encrypted before
//! they reach the store and decrypted before they leave the broker. The
//! mesh is a send handle here; what peers send arrives through the inbox the
//! mesh hands out ([`spawn_hint_applier`]).

mod ack;
pub mod activity;
mod admin;
mod analytics;
pub mod autopilot;
mod browse;
mod bundle;
pub mod config_cache;
pub mod conflation;
pub mod crypto;
mod dlq_delete;
mod ephemeral;
mod hints;
mod kv;
mod locks;
pub mod long_poll;
mod maintenance;
pub mod metrics;
mod pop;
mod priority;
pub mod process;
mod push;
mod queues;
mod reads;
pub mod reads_metrics;
pub mod recent;
mod reference_series;
mod status;
mod streams;
pub mod surfaces;
mod timers;
mod transaction;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

pub use ack::AckRequest;
pub use admin::MessageView;
pub use bundle::{BundleDone, BundleRefusal, BundleResult};
pub use ephemeral::{EphemeralPop, EphemeralRefusal};
pub use hints::spawn_hint_applier;
pub use locks::LockOp;
pub use pop::{PopOutcome, PopRequest, PopTarget};
pub use push::{PushItem, PushOutcome};
pub use reads::{FETCH_CALL_MAX_BYTES, FETCH_MAX_RECORDS};
pub use status::{
    rss_bytes as status_rss_bytes, HealthStatus, MeshStatus, MetricsSummary, SpoolStatus,
};
pub use streams::{CycleDone, CycleRequest, StreamMetrics};
pub use timers::TimerReq;
pub use transaction::{TxOp, TxResult};

use crate::config::Config;
use crate::mesh::Mesh;
use crate::spool::Spool;
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
    /// A stored payload is an encryption envelope this broker cannot open
    /// (no key, or another key sealed it): refused, never delivered as data
    /// (HTTP 500 naming the message; `crypto.rs`).
    #[error("{0}")]
    Sealed(String),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The broker: shared by every request handler and background job. Its
/// fields are private; callers use the use-case methods of this module.
#[derive(Debug)]
pub struct Broker {
    config: Config,
    store: Arc<Store>,
    waker: Waker,
    queues: QueueCache,
    /// Partitions written to lately, tried first by wildcard pops.
    recent: Arc<recent::RecentPartitions>,
    metrics: Metrics,
    flags: Flags,
    /// This broker's disk spool: takes pushes while PostgreSQL is away.
    spool: Arc<Spool>,
    /// Encrypts payloads of queues with `encryptionEnabled` (when a key is set).
    cipher: Option<crypto::PayloadCipher>,
    /// The mesh to other replicas; `None` when it does not run.
    mesh: Option<Arc<Mesh>>,
    /// Cancelled at shutdown: parked pops answer empty at once.
    shutdown: CancellationToken,
    /// Counters of reads and ephemeral queues (issue 21).
    reads_metrics: reads_metrics::ReadsMetrics,
    /// Metrics of KV, locks and timers, and the timer sweeper's alarm.
    surfaces: surfaces::Surfaces,
    /// Counters of the `/streams/v1` routes.
    streams: StreamMetrics,
    autopilot: autopilot::Autopilot,
    policies: conflation::GroupPolicies,
    /// What this replica did per queue and minute, until flushed (issue 36).
    activity: activity::Activity,
    /// This process's id in `queen.replica_presence` (fresh at each start).
    instance: uuid::Uuid,
    /// The reference's Prometheus series, read from PostgreSQL at the scrape.
    reference_series: reference_series::ReferenceSeries,
}

impl Broker {
    /// Builds the broker on the store, the spool and the (already started) mesh.
    pub fn new(
        config: Config,
        store: Arc<Store>,
        spool: Arc<Spool>,
        mesh: Option<Arc<Mesh>>,
        shutdown: CancellationToken,
    ) -> Arc<Self> {
        let metrics = Metrics::default();
        for collector in store.metric_collectors() {
            if let Err(e) = metrics.registry.register(collector) {
                tracing::warn!(error = %e, "database metrics not registered");
            }
        }
        let reads_metrics = reads_metrics::ReadsMetrics::new(&metrics.registry);
        let surfaces = surfaces::Surfaces::new(&metrics.registry);
        let streams = StreamMetrics::new(&metrics.registry);
        let autopilot = autopilot::Autopilot::new(config.pop.autopilot, &metrics.registry);
        let policies =
            conflation::GroupPolicies::new(config.queue_config_max_age, &metrics.registry);
        let reference_series = reference_series::ReferenceSeries::new(&metrics.registry);
        Arc::new(Self {
            activity: activity::Activity::default(),
            instance: uuid::Uuid::new_v4(),
            reference_series,
            autopilot,
            policies,
            reads_metrics,
            surfaces,
            streams,
            cipher: config
                .encryption_key
                .as_ref()
                .map(crypto::PayloadCipher::new),
            queues: QueueCache::new(config.queue_config_max_age),
            recent: Arc::default(),
            config,
            store,
            waker: Waker::default(),
            metrics,
            flags: Flags::default(),
            spool,
            mesh,
            shutdown,
        })
    }

    /// The effective configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Push, pop and ack rates of this replica.
    pub fn rates(&self) -> metrics::Rates {
        self.metrics.rates()
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
