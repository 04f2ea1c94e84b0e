//! Queue administration and leases: configure, delete, extend.

use queen_proto::{QueueName, QueueOptions};
use uuid::Uuid;

use super::{Broker, BrokerError};
use crate::store::{LeaseExtension, QueueRow};

impl Broker {
    /// Creates or fully reconfigures a queue; returns it with its `Default` partition id.
    pub async fn configure(
        &self,
        queue: &QueueName,
        namespace: &str,
        task: &str,
        options: &QueueOptions,
    ) -> Result<(QueueRow, Uuid), BrokerError> {
        let (row, partition_id) = self
            .store
            .configure_queue(queue.as_str(), namespace, task, options)
            .await?;
        self.announce_config_change(queue.as_str());
        self.queues.put(row.clone());
        Ok((row, partition_id))
    }

    /// Deletes a queue and everything in it; false if it did not exist.
    pub async fn delete_queue(&self, queue: &QueueName) -> Result<bool, BrokerError> {
        let existed = self.store.delete_queue(queue.as_str()).await?;
        self.recent.forget(queue.as_str());
        self.policies.forget_queue(queue.as_str());
        self.announce_config_change(queue.as_str());
        Ok(existed)
    }

    /// Extends the leases held under `lease_id` by `seconds` from now.
    pub async fn extend_lease(
        &self,
        lease_id: Uuid,
        seconds: i32,
    ) -> Result<LeaseExtension, BrokerError> {
        Ok(self.store.extend_lease(lease_id, seconds).await?)
    }
}
