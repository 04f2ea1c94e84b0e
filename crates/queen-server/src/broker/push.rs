//! Push: append validated items to their partitions, dedup by transactionId.
//!
//! When PostgreSQL is unreachable (or push maintenance mode is on) the items go
//! to the disk spool instead and are answered `buffered`; see [`crate::spool`].

use std::collections::HashMap;

use queen_proto::spool::Record;
use queen_proto::{PartitionName, QueueName};
use uuid::Uuid;

use super::{Broker, BrokerError};
use crate::store::{
    fold_repeats, full_queue_error, AppendOutcome, AppendStatus, NewMessage, StoreError,
};

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
    /// The id the client minted (frames of the binary push), stored as the
    /// message id; `None`: the broker mints one.
    pub message_id: Option<Uuid>,
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
    /// Durable in the disk spool; replayed into PostgreSQL later.
    Buffered {
        queue: String,
        partition: String,
        transaction_id: String,
    },
    /// Not stored: the queue holds its `maxSize` of messages not yet consumed.
    Failed {
        queue: String,
        partition: String,
        transaction_id: String,
        error: String,
    },
}

/// True for errors that mean "PostgreSQL is not there": connection-class
/// failures and timeouts. A push that hit one may or may not have committed;
/// spooling it is safe because its transactionId is already fixed.
fn db_unreachable(e: &StoreError) -> bool {
    e.is_unavailable() || e.is_timeout()
}

impl Broker {
    /// Returns the stored form of a payload: encrypted when `encrypt`.
    pub(super) fn seal(&self, encrypt: bool, payload: &str) -> Result<String, BrokerError> {
        match (&self.cipher, encrypt) {
            (Some(c), true) => c.encrypt(payload).map_err(BrokerError::Internal),
            _ => Ok(payload.to_owned()),
        }
    }

    /// Pushes `items`: straight into PostgreSQL (one transaction for the whole
    /// request) or, when the database is unreachable or push maintenance mode is
    /// on, into the disk spool. Outcomes follow input order.
    pub async fn push(&self, mut items: Vec<PushItem>) -> Result<Vec<PushOutcome>, BrokerError> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        // fixed before the first attempt, so a spooled retry of a push PostgreSQL
        // committed without answering is a duplicate, not a second message
        for item in &mut items {
            if item.transaction_id.is_none() {
                item.transaction_id = Some(Uuid::now_v7().to_string());
            }
        }
        if self.must_spool(&items) {
            return self.spool_push(&items).await;
        }
        match self.append_now(&items, true).await {
            Err(BrokerError::Store(e)) if db_unreachable(&e) => {
                self.spool.outage.mark_down(&e);
                self.spool_push(&items).await
            }
            other => other,
        }
    }

    /// True when the push goes to the spool: push maintenance, a known outage,
    /// or records of one of its partitions still waiting in the spool (a direct
    /// push must not overtake them).
    fn must_spool(&self, items: &[PushItem]) -> bool {
        self.flags.push_maintenance()
            || self.spool.outage.is_down()
            || self.spool.holds_any(
                items
                    .iter()
                    .map(|i| (i.queue.as_str(), i.partition.as_str())),
            )
    }

    /// Writes `items` to the spool and answers `buffered` once they are durable.
    async fn spool_push(&self, items: &[PushItem]) -> Result<Vec<PushOutcome>, BrokerError> {
        let now = chrono::Utc::now().timestamp_millis();
        let records: Vec<Record> = items
            .iter()
            .map(|i| Record {
                queue: i.queue.as_str().to_owned(),
                partition: i.partition.as_str().to_owned(),
                transaction_id: i.transaction_id.clone().unwrap_or_default(),
                trace_id: i.trace_id,
                message_id: i.message_id,
                payload: i.payload.clone(),
                producer_sub: i.producer_sub.clone(),
                spooled_at_ms: now,
            })
            .collect();
        self.spool
            .append(&records)
            .await
            .map_err(|e| BrokerError::Spool(e.to_string()))?;
        self.metrics.spool_buffered.inc_by(records.len() as u64);
        Ok(records
            .into_iter()
            .map(|r| PushOutcome::Buffered {
                queue: r.queue,
                partition: r.partition,
                transaction_id: r.transaction_id,
            })
            .collect())
    }

    /// Replays records of the spool: appends them like a direct push and
    /// returns how many reached PostgreSQL (queued, or already there). They
    /// were answered `buffered` already, so no `maxSize` refuses them.
    pub async fn replay_spooled(&self, items: &[PushItem]) -> Result<u64, BrokerError> {
        let outcomes = self.append_now(items, false).await?;
        let replayed = outcomes
            .iter()
            .filter(|o| {
                matches!(
                    o,
                    PushOutcome::Queued { .. } | PushOutcome::Duplicate { .. }
                )
            })
            .count() as u64;
        self.metrics.spool_drained.inc_by(replayed);
        Ok(replayed)
    }

    /// Appends `items` to PostgreSQL (one transaction) and wakes pops parked on
    /// the queues written to. Outcomes follow input order. `bound`: items of
    /// queues with a `maxSize` (in the cached options) are held to it.
    async fn append_now(
        &self,
        items: &[PushItem],
        bound: bool,
    ) -> Result<Vec<PushOutcome>, BrokerError> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        // queue id, whether its payloads are stored encrypted, whether it is bounded
        let mut queue_ids: HashMap<QueueName, (Uuid, bool, bool)> = HashMap::new();
        for item in items {
            if !queue_ids.contains_key(&item.queue) {
                let row = self.queue_or_create(&item.queue).await?;
                let encrypt = row.options.encryption_enabled && self.cipher.is_some();
                let bounded = bound && row.options.max_size > 0;
                queue_ids.insert(item.queue.clone(), (row.id, encrypt, bounded));
            }
        }

        // repeats inside the request: the first occurrence wins, later ones point at it
        let transaction_ids: Vec<String> = items
            .iter()
            .map(|i| {
                i.transaction_id
                    .clone()
                    .unwrap_or_else(|| Uuid::now_v7().to_string())
            })
            .collect();
        let folded = fold_repeats(items.iter().zip(&transaction_ids).map(|(item, txn)| {
            let (queue_id, _, _) = queue_ids[&item.queue];
            (queue_id, item.partition.as_str(), txn.as_str())
        }));
        let mut unique: Vec<NewMessage> = Vec::with_capacity(folded.unique.len());
        // empty unless an item's queue has a maxSize: the common push pays nothing
        let mut bounded: Vec<bool> = Vec::new();
        if queue_ids.values().any(|&(_, _, b)| b) {
            bounded = folded
                .unique
                .iter()
                .map(|&i| queue_ids[&items[i].queue].2)
                .collect();
        }
        for &i in &folded.unique {
            let item = &items[i];
            let (queue_id, encrypt, _) = queue_ids[&item.queue];
            unique.push(NewMessage {
                queue_id,
                partition: item.partition.as_str().to_owned(),
                message_id: item.message_id.unwrap_or_else(Uuid::now_v7),
                transaction_id: transaction_ids[i].clone(),
                trace_id: item.trace_id,
                payload: self.seal(encrypt, &item.payload)?,
                producer_sub: item.producer_sub.clone(),
            });
        }

        let appended = self.store.append(&unique, bounded).await?;
        let mut first_outcomes: Vec<Option<AppendOutcome>> = vec![None; unique.len()];
        for a in appended {
            if let Some(slot) = first_outcomes.get_mut(a.index) {
                *slot = Some(a);
            }
        }
        let mut outcomes: Vec<Option<PushOutcome>> = Vec::with_capacity(items.len());
        for (i, &(at, repeat)) in folded.slots.iter().enumerate() {
            let (Some(a), Some(msg)) = (&first_outcomes[at], unique.get(at)) else {
                outcomes.push(None);
                continue;
            };
            let queue = items[i].queue.as_str().to_owned();
            outcomes.push(Some(match (repeat, a.status) {
                (false, AppendStatus::Queued) => PushOutcome::Queued {
                    transaction_id: msg.transaction_id.clone(),
                    message_id: a.message_id,
                    partition_id: a.partition_id,
                    trace_id: msg.trace_id,
                    queue,
                },
                // refused, and so is a repeat of it (nothing of it was stored)
                (_, AppendStatus::Full(max_size)) => PushOutcome::Failed {
                    error: full_queue_error(&queue, max_size),
                    queue,
                    partition: items[i].partition.as_str().to_owned(),
                    transaction_id: transaction_ids[i].clone(),
                },
                _ => PushOutcome::Duplicate {
                    transaction_id: transaction_ids[i].clone(),
                    message_id: a.message_id,
                    queue,
                },
            }));
        }

        let queued = outcomes
            .iter()
            .filter(|o| matches!(o, Some(PushOutcome::Queued { .. })))
            .count();
        self.metrics.pushed.inc_by(queued as u64);
        self.count_pushed(
            items
                .iter()
                .zip(&outcomes)
                .filter(|(_, o)| matches!(o, Some(PushOutcome::Queued { .. })))
                .map(|(item, _)| item.queue.as_str()),
        );
        let mut written: Vec<(&str, &str)> = items
            .iter()
            .zip(&outcomes)
            .filter(|(_, o)| matches!(o, Some(PushOutcome::Queued { .. })))
            .map(|(item, _)| (item.queue.as_str(), item.partition.as_str()))
            .collect();
        written.sort_unstable();
        written.dedup();
        for (queue, partition) in written {
            self.announce_messages(queue, partition);
        }
        outcomes
            .into_iter()
            .map(|o| o.ok_or_else(|| BrokerError::Internal("push result missing".into())))
            .collect()
    }
}
