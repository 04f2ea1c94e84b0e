//! Transaction: acks and pushes applied atomically in one PostgreSQL transaction.

use queen_proto::ConsumerGroup;
use uuid::Uuid;

use super::{Broker, BrokerError, PushItem};
use crate::store::{AckItem, NewMessage, TxFailure, TxOperation, TxOutcome};

/// One validated operation of a transaction.
#[derive(Debug, Clone)]
pub enum TxOp {
    Push(PushItem),
    Ack { group: ConsumerGroup, item: AckItem },
}

/// The result of a transaction: what each operation did, or why all were undone.
#[derive(Debug)]
pub struct TxResult {
    /// Id of the transaction itself.
    pub transaction_id: Uuid,
    pub outcomes: Vec<TxOutcome>,
    /// The operations' own input, to echo transaction ids.
    pub transaction_ids: Vec<String>,
    /// Queue of each push operation (`None` for acks).
    pub queues: Vec<Option<String>>,
    pub failure: Option<TxFailure>,
}

impl Broker {
    /// The store's form of `ops`, with each op's transaction id and queue.
    pub(super) async fn prepare_tx(
        &self,
        ops: Vec<TxOp>,
    ) -> Result<(Vec<TxOperation>, Vec<String>, Vec<Option<String>>), BrokerError> {
        let mut store_ops = Vec::with_capacity(ops.len());
        let mut transaction_ids = Vec::with_capacity(ops.len());
        let mut queues = Vec::with_capacity(ops.len());
        for op in ops {
            match op {
                TxOp::Push(item) => {
                    // a queue created by this transaction starts unencrypted
                    let encrypt = self.cipher.is_some()
                        && self
                            .queue(item.queue.as_str())
                            .await?
                            .is_some_and(|q| q.options.encryption_enabled);
                    let transaction_id = item
                        .transaction_id
                        .clone()
                        .unwrap_or_else(|| Uuid::now_v7().to_string());
                    let (namespace, task) = item.queue.derived_namespace_task();
                    transaction_ids.push(transaction_id.clone());
                    queues.push(Some(item.queue.as_str().to_owned()));
                    store_ops.push(TxOperation::Push {
                        queue: item.queue.as_str().to_owned(),
                        namespace,
                        task,
                        message: NewMessage {
                            queue_id: Uuid::nil(),
                            partition: item.partition.as_str().to_owned(),
                            message_id: item.message_id.unwrap_or_else(Uuid::now_v7),
                            transaction_id,
                            trace_id: item.trace_id,
                            payload: self.seal(encrypt, &item.payload)?,
                            producer_sub: item.producer_sub,
                        },
                    });
                }
                TxOp::Ack { group, item } => {
                    transaction_ids.push(item.transaction_id.clone());
                    queues.push(None);
                    store_ops.push(TxOperation::Ack {
                        group: group.as_str().to_owned(),
                        item,
                    });
                }
            }
        }
        Ok((store_ops, transaction_ids, queues))
    }

    /// Runs every operation in one database transaction.
    pub async fn transaction(&self, ops: Vec<TxOp>) -> Result<TxResult, BrokerError> {
        let (store_ops, transaction_ids, queues) = self.prepare_tx(ops).await?;
        let transaction_id = Uuid::now_v7();
        match self.store.run_transaction(&store_ops).await {
            Ok(outcomes) => {
                self.announce_tx(&outcomes, &store_ops);
                Ok(TxResult {
                    transaction_id,
                    outcomes,
                    transaction_ids,
                    queues,
                    failure: None,
                })
            }
            Err(failure) => {
                // the database away or busy (a lock wait, a statement timeout):
                // an error answer the client may retry, not a refused transaction
                if let Some(e) = failure
                    .store
                    .as_ref()
                    .filter(|e| e.is_unavailable() || e.is_timeout() || e.is_retryable())
                {
                    return Err(BrokerError::Store(e.clone()));
                }
                Ok(TxResult {
                    transaction_id,
                    outcomes: Vec::new(),
                    transaction_ids,
                    queues,
                    failure: Some(failure),
                })
            }
        }
    }

    /// Counts a committed transaction and wakes pops of what it pushed or freed.
    pub(super) fn announce_tx(&self, outcomes: &[TxOutcome], store_ops: &[TxOperation]) {
        self.count_transaction(outcomes, store_ops);
        for (o, op) in outcomes.iter().zip(store_ops) {
            match (o, op) {
                (TxOutcome::Acked(a), TxOperation::Ack { group, .. }) => {
                    if let (true, Some(q), Some(p)) = (
                        a.lease_released,
                        a.queue_name.as_deref(),
                        a.partition_name.as_deref(),
                    ) {
                        self.announce_partition_free(q, p, group);
                    }
                    if let (Some(after), Some(q), Some(p)) = (
                        a.retry_after,
                        a.queue_name.as_deref(),
                        a.partition_name.as_deref(),
                    ) {
                        self.announce_after(q, p, after);
                    }
                }
                (TxOutcome::Pushed(_), TxOperation::Push { queue, message, .. }) => {
                    self.announce_messages(queue, &message.partition);
                }
                _ => {}
            }
        }
    }
}
