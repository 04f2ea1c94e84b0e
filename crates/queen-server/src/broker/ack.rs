//! Ack: move consumer cursors, release leases, retry or dead-letter.

use queen_proto::ConsumerGroup;

use super::{Broker, BrokerError};
use crate::store::{AckItem, AckOutcome};

/// A validated ack batch for one consumer group.
#[derive(Debug, Clone)]
pub struct AckRequest {
    pub group: ConsumerGroup,
    pub items: Vec<AckItem>,
}

impl Broker {
    /// Applies the acks and wakes pops parked on queues whose leases were released.
    pub async fn ack(&self, req: &AckRequest) -> Result<Vec<AckOutcome>, BrokerError> {
        let acked = self
            .store
            .acknowledge(req.group.as_str(), &req.items)
            .await?;
        if acked.by_statement {
            self.metrics
                .consume_statement
                .with_label_values(&["ack"])
                .inc();
        }
        let outcomes = acked.outcomes;
        self.count_acked(&outcomes, &req.items);
        // counted per result, one label lookup each rather than one per item
        let mut counts = [0u64; 3];
        for o in &outcomes {
            counts[match (o.success, o.dlq) {
                (true, true) => 0,
                (true, false) => 1,
                (false, _) => 2,
            }] += 1;
            if let (true, Some(q), Some(p)) = (
                o.lease_released,
                o.queue_name.as_deref(),
                o.partition_name.as_deref(),
            ) {
                self.announce_partition_free(q, p, req.group.as_str());
            }
            if let (Some(after), Some(q), Some(p)) = (
                o.retry_after,
                o.queue_name.as_deref(),
                o.partition_name.as_deref(),
            ) {
                self.announce_after(q, p, after);
            }
        }
        self.count_conflated(
            req.group.as_str(),
            outcomes
                .iter()
                .filter_map(|o| Some((o.queue_name.as_deref()?, o.skipped))),
        );
        for (result, n) in ["dlq", "success", "failed"].into_iter().zip(counts) {
            if n > 0 {
                self.metrics.acks.with_label_values(&[result]).inc_by(n);
            }
        }
        Ok(outcomes)
    }
}
