//! Deleting dead letters (dashboard and admin API).

use uuid::Uuid;

use super::Broker;
use crate::store::StoreError;

impl Broker {
    /// Deletes the dead-letter entries of one message (one group or all).
    pub async fn delete_dead_letters(
        &self,
        partition_id: Uuid,
        transaction_id: &str,
        consumer_group: Option<&str>,
    ) -> Result<u64, StoreError> {
        self.store
            .delete_dead_letters(partition_id, transaction_id, consumer_group)
            .await
    }
}
