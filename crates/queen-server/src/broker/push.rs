//! Push: append validated items to their partitions, dedup by transactionId.

use std::collections::HashMap;

use queen_proto::{PartitionName, QueueName};
use uuid::Uuid;

use super::{Broker, BrokerError};
use crate::store::{AppendStatus, NewMessage};

/// One validated push item.
#[derive(Debug, Clone)]
pub struct PushItem {
    pub queue: QueueName,
    pub partition: PartitionName,
    /// JSON text of the payload.
    pub payload: String,
    /// Client-supplied id, or `None` to have one generated.
    pub transaction_id: Option<String>,
    pub trace_id: Option<Uuid>,
    pub producer_sub: Option<String>,
}

/// What happened to one push item.
#[derive(Debug, Clone)]
pub enum PushOutcome {
    Queued {
        transaction_id: String,
        message_id: Uuid,
        partition_id: Uuid,
        trace_id: Option<Uuid>,
        queue: String,
    },
    Duplicate {
        transaction_id: String,
        message_id: Uuid,
        queue: String,
    },
}

impl Broker {
    /// Appends `items` (one PostgreSQL transaction for the whole request) and
    /// wakes pops parked on the queues written to. Outcomes follow input order.
    pub async fn push(&self, items: Vec<PushItem>) -> Result<Vec<PushOutcome>, BrokerError> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        if self.flags.push_maintenance() {
            return Err(BrokerError::Maintenance(
                "Push maintenance mode is on: pushes are refused until it is turned off".into(),
            ));
        }
        let mut queue_ids: HashMap<QueueName, Uuid> = HashMap::new();
        for item in &items {
            if !queue_ids.contains_key(&item.queue) {
                let row = self.queue_or_create(&item.queue).await?;
                queue_ids.insert(item.queue.clone(), row.id);
            }
        }

        // repeats inside the request: the first occurrence wins, later ones point at it
        let mut first_of: HashMap<(Uuid, &str, String), usize> = HashMap::new();
        let mut repeat_of: Vec<Option<usize>> = vec![None; items.len()];
        let mut unique: Vec<NewMessage> = Vec::with_capacity(items.len());
        let mut unique_pos: Vec<usize> = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let queue_id = queue_ids[&item.queue];
            let transaction_id = item
                .transaction_id
                .clone()
                .unwrap_or_else(|| Uuid::now_v7().to_string());
            let key = (queue_id, item.partition.as_str(), transaction_id.clone());
            if let Some(&first) = first_of.get(&key) {
                repeat_of[i] = Some(first);
                continue;
            }
            first_of.insert(key, i);
            unique_pos.push(i);
            unique.push(NewMessage {
                queue_id,
                partition: item.partition.as_str().to_owned(),
                message_id: Uuid::now_v7(),
                transaction_id,
                trace_id: item.trace_id,
                payload: item.payload.clone(),
                producer_sub: item.producer_sub.clone(),
            });
        }

        let appended = self.store.append(&unique).await?;
        let mut outcomes: Vec<Option<PushOutcome>> = vec![None; items.len()];
        for a in appended {
            let i = unique_pos[a.index];
            let msg = &unique[a.index];
            let queue = items[i].queue.as_str().to_owned();
            outcomes[i] = Some(match a.status {
                AppendStatus::Queued => PushOutcome::Queued {
                    transaction_id: msg.transaction_id.clone(),
                    message_id: a.message_id,
                    partition_id: a.partition_id,
                    trace_id: msg.trace_id,
                    queue,
                },
                AppendStatus::Duplicate => PushOutcome::Duplicate {
                    transaction_id: msg.transaction_id.clone(),
                    message_id: a.message_id,
                    queue,
                },
            });
        }
        for (i, first) in repeat_of.iter().enumerate() {
            if let Some(first) = *first {
                let message_id = match &outcomes[first] {
                    Some(PushOutcome::Queued { message_id, .. })
                    | Some(PushOutcome::Duplicate { message_id, .. }) => *message_id,
                    None => Uuid::nil(),
                };
                outcomes[i] = Some(PushOutcome::Duplicate {
                    transaction_id: items[i].transaction_id.clone().unwrap_or_default(),
                    message_id,
                    queue: items[i].queue.as_str().to_owned(),
                });
            }
        }

        let queued = outcomes
            .iter()
            .filter(|o| matches!(o, Some(PushOutcome::Queued { .. })))
            .count();
        self.metrics.pushed.inc_by(queued as u64);
        for queue in queue_ids.keys() {
            self.waker.notify(queue.as_str());
        }
        self.waker.notify(super::ANY_QUEUE_KEY);
        outcomes
            .into_iter()
            .map(|o| o.ok_or_else(|| BrokerError::Internal("push result missing".into())))
            .collect()
    }
}
