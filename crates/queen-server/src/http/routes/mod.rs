//! One file per API v1 area.

pub mod ack;
pub mod analytics;
pub mod browse;
pub mod cluster;
pub mod consumer_groups;
pub mod dlq;
pub mod dlq_delete;
pub mod ephemeral;
pub mod health;
pub mod kv;
pub mod lease;
pub mod locks;
pub mod messages;
pub mod metrics;
pub mod migration;
pub mod pop;
pub mod push;
pub mod queues;
pub mod reads;
pub mod resources;
pub mod status;
pub mod streams;
pub mod system;
pub mod timers;
pub mod traces;
pub mod transaction;
mod transaction_riders;

use queen_proto::{ConsumerGroup, NameError, PartitionName, QueueName};

use super::error::ApiError;

/// Validates a queue name from a path or body.
pub fn queue_name(s: &str) -> Result<QueueName, ApiError> {
    QueueName::new(s).map_err(name_error)
}

/// Validates a partition name from a path or body.
pub fn partition_name(s: &str) -> Result<PartitionName, ApiError> {
    PartitionName::new(s).map_err(name_error)
}

/// Validates an optional consumer group (absent, null or empty: queue mode).
pub fn consumer_group(s: Option<&str>) -> Result<ConsumerGroup, ApiError> {
    ConsumerGroup::from_optional(s).map_err(name_error)
}

fn name_error(e: NameError) -> ApiError {
    ApiError::bad_request(e.to_string())
}
