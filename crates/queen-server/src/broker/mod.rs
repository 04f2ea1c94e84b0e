//! Use cases of the broker: push, pop, ack, transaction, lease, queue admin.
//!
//! No HTTP types and no SQL here: requests arrive validated from `http`, and
//! everything durable goes through [`Store`].

mod ack;
pub mod config_cache;
pub mod long_poll;
mod pop;
mod push;
mod queues;
mod transaction;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

pub use ack::AckRequest;
pub use pop::{PopOutcome, PopRequest};
pub use push::{PushItem, PushOutcome};
pub use transaction::{TxOp, TxResult};

use crate::config::Config;
use crate::store::{QueueRow, Store, StoreError};
use config_cache::QueueCache;
use long_poll::Waker;

/// Why a use case could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// The request is malformed or refers to something invalid (HTTP 400).
    #[error("{0}")]
    Invalid(String),
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
    /// Cancelled at shutdown: parked pops answer empty at once.
    pub shutdown: CancellationToken,
}

impl Broker {
    pub fn new(config: Config, store: Store, shutdown: CancellationToken) -> Arc<Self> {
        Arc::new(Self {
            queues: QueueCache::new(config.queue_config_max_age),
            config,
            store,
            waker: Waker::default(),
            shutdown,
        })
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
