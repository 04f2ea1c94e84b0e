//! `/transaction`: acks and pushes applied in one PostgreSQL transaction.

use std::collections::{HashMap, HashSet};

use uuid::Uuid;

use super::ack::ack_with;
use super::op::{with_op, DbOp};
use super::push::{append_bounded, append_with};
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
    /// What the client reads (`StoreError::client_text`: never the server's message).
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
            message: e.client_text(),
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

/// Runs the operations in order. Consecutive pushes go as one set: each
/// queue is resolved once, then one `queen.push_batch` call appends the run
/// (a run ends at an ack, or where a key of the run repeats, so that the
/// repeat meets the first one stored and is refused like any known
/// transactionId).
pub(super) async fn run_operations(
    tx: &deadpool_postgres::Transaction<'_>,
    ops: &[TxOperation],
) -> Result<Vec<TxOutcome>, TxFailure> {
    let mut done = Vec::with_capacity(ops.len());
    let mut queue_ids: HashMap<&str, (Uuid, bool)> = HashMap::new();
    let mut i = 0;
    while i < ops.len() {
        let result = match &ops[i] {
            TxOperation::Push { .. } => {
                let end = push_run_end(ops, i);
                let run = &ops[i..end];
                let outcome = push_run(tx, run, &mut queue_ids).await;
                match outcome {
                    Ok(pushed) => {
                        done.extend(pushed.into_iter().map(TxOutcome::Pushed));
                        i = end;
                        continue;
                    }
                    Err(e) => Err((i + failed_in_run(run, &e), e)),
                }
            }
            TxOperation::Ack { group, item } => {
                ack_with(tx, group, std::slice::from_ref(item), true)
                    .await
                    .map(|mut v| TxOutcome::Acked(v.remove(0)))
                    .map_err(|e| (i, e))
            }
        };
        match result {
            Ok(o) => {
                done.push(o);
                i += 1;
            }
            Err((at, e)) => {
                let refused = e.is_refusal();
                return Err(TxFailure {
                    failed_at: at,
                    message: e.client_text(),
                    done,
                    store: (!refused).then_some(e),
                });
            }
        }
    }
    Ok(done)
}

/// The end (exclusive) of the run of pushes starting at `start`.
fn push_run_end(ops: &[TxOperation], start: usize) -> usize {
    let mut keys: HashSet<(&str, &str, &str)> = HashSet::new();
    let mut end = start;
    while let Some(TxOperation::Push { queue, message, .. }) = ops.get(end) {
        let key = (
            queue.as_str(),
            message.partition.as_str(),
            message.transaction_id.as_str(),
        );
        if !keys.insert(key) {
            break;
        }
        end += 1;
    }
    end
}

/// Appends one run of pushes (no repeated keys) with one `queen.push_batch`
/// call, or `queen.push_bounded` when a push goes to a queue with a
/// `maxSize` (as this transaction reads it): one that does not fit fails the
/// transaction.
async fn push_run<'a>(
    tx: &deadpool_postgres::Transaction<'_>,
    run: &'a [TxOperation],
    queue_ids: &mut HashMap<&'a str, (Uuid, bool)>,
) -> Result<Vec<AppendOutcome>, StoreError> {
    let mut messages = Vec::with_capacity(run.len());
    let mut bounded = Vec::with_capacity(run.len());
    for op in run {
        let TxOperation::Push {
            queue,
            namespace,
            task,
            message,
        } = op
        else {
            continue;
        };
        let (queue_id, bound) = match queue_ids.get(queue.as_str()) {
            Some(q) => *q,
            None => {
                let row = ensure_queue_with(tx, queue, namespace, task).await?;
                let q = (row.id, row.options.max_size > 0);
                queue_ids.insert(queue.as_str(), q);
                q
            }
        };
        messages.push(NewMessage {
            queue_id,
            ..message.clone()
        });
        bounded.push(bound);
    }
    if bounded.contains(&true) {
        append_bounded(tx, &messages, true, &bounded, None).await
    } else {
        append_with(tx, &messages, true).await
    }
}

/// Which push of `run` an error names (its transactionId: one already
/// stored, or the first that does not fit its queue's `maxSize`), else the first.
fn failed_in_run(run: &[TxOperation], e: &StoreError) -> usize {
    let text = e.to_string();
    run.iter()
        .position(|op| {
            matches!(op, TxOperation::Push { message, .. }
                if text.contains(&format!("transactionId {} already exists", message.transaction_id))
                    || text.ends_with(&format!("transactionId {} does not fit", message.transaction_id)))
        })
        .unwrap_or(0)
}
