//! `/transaction`: acks and pushes applied in one PostgreSQL transaction.

use super::ack::ack_with;
use super::op::{with_op, DbOp};
use super::push::append_with;
use super::queues::ensure_queue_with;
use super::{AckItem, AckOutcome, AppendOutcome, NewMessage, Store, StoreError};

/// One operation of `/transaction`.
#[derive(Debug, Clone)]
pub enum TxOperation {
    /// Append one message; its `queue_id` is ignored, the queue is resolved (and
    /// created) inside the transaction from `queue`.
    Push {
        queue: String,
        namespace: String,
        task: String,
        message: NewMessage,
    },
    Ack {
        group: String,
        item: AckItem,
    },
}

/// The outcome of one [`TxOperation`].
#[derive(Debug, Clone)]
pub enum TxOutcome {
    Pushed(AppendOutcome),
    Acked(AckOutcome),
}

/// A transaction that failed and was rolled back.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct TxFailure {
    /// Index of the operation that failed.
    pub failed_at: usize,
    pub message: String,
    /// Outcomes of the operations before the failing one (nothing of them was kept).
    pub done: Vec<TxOutcome>,
    /// Set when the failure was the database itself, not a refused operation.
    pub store: Option<StoreError>,
}

impl From<StoreError> for TxFailure {
    /// A failure before the first operation ran (no connection, no `BEGIN`).
    fn from(e: StoreError) -> Self {
        Self {
            failed_at: 0,
            message: e.to_string(),
            done: Vec::new(),
            store: Some(e),
        }
    }
}

impl Store {
    /// Runs acks and pushes in one PostgreSQL transaction: all commit or none.
    /// A serialization failure or deadlock reruns the whole transaction.
    pub async fn run_transaction(&self, ops: &[TxOperation]) -> Result<Vec<TxOutcome>, TxFailure> {
        with_op!(self.db, DbOp::Transaction, |client| {
            let tx = client.transaction().await.map_err(StoreError::from)?;
            // an error drops `tx`, which rolls back
            let done = run_operations(&tx, ops).await?;
            tx.commit().await.map_err(StoreError::from)?;
            Ok(done)
        })
    }
}

pub(super) async fn run_operations(
    tx: &deadpool_postgres::Transaction<'_>,
    ops: &[TxOperation],
) -> Result<Vec<TxOutcome>, TxFailure> {
    let mut done = Vec::with_capacity(ops.len());
    for (i, op) in ops.iter().enumerate() {
        let outcome = match op {
            TxOperation::Push {
                queue,
                namespace,
                task,
                message,
            } => match ensure_queue_with(tx, queue, namespace, task).await {
                Ok(row) => {
                    let msg = NewMessage {
                        queue_id: row.id,
                        ..message.clone()
                    };
                    append_with(tx, std::slice::from_ref(&msg), true)
                        .await
                        .map(|mut v| TxOutcome::Pushed(v.remove(0)))
                }
                Err(e) => Err(e),
            },
            TxOperation::Ack { group, item } => {
                ack_with(tx, group, std::slice::from_ref(item), true)
                    .await
                    .map(|mut v| TxOutcome::Acked(v.remove(0)))
            }
        };
        match outcome {
            Ok(o) => done.push(o),
            Err(e) => {
                let refused = matches!(e, StoreError::Rejected(_) | StoreError::UniqueViolation(_));
                return Err(TxFailure {
                    failed_at: i,
                    message: e.to_string(),
                    done,
                    store: (!refused).then_some(e),
                });
            }
        }
    }
    Ok(done)
}
