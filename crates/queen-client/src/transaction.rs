//! `POST /api/v1/transaction`: acks and pushes applied atomically.

use serde::Serialize;
use serde_json::{json, Value};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::transport::{Call, Replay};
use crate::types::{AckStatus, Message, PushItem, TransactionResult};

/// A transaction under construction: every ack and push in it commits in
/// one PostgreSQL transaction, or none does.
///
/// A commit whose answer is lost (timeout, broken connection) is not
/// retried, since it may have been applied; it is retried when the request
/// surely never reached a broker.
///
/// ```no_run
/// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
/// let input = client.queue("stage-1").group("etl").batch(10).pop().await?;
/// let mut tx = client.transaction();
/// for msg in &input {
///     tx = tx.ack(msg).push("stage-2", &msg.partition, &msg.data)?;
/// }
/// let result = tx.commit().await?;
/// assert!(result.success);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Transaction {
    client: Client,
    operations: Vec<Value>,
    leases: Vec<String>,
}

impl Transaction {
    pub(crate) fn new(client: Client) -> Self {
        Self {
            client,
            operations: Vec::new(),
            leases: Vec::new(),
        }
    }

    /// Adds an ack of `message` as completed.
    pub fn ack(self, message: &Message) -> Self {
        self.ack_with(message, AckStatus::Completed, None)
    }

    /// Adds an ack of `message` with `status` (`Failed` and `Dlq` both
    /// dead-letter at once inside a transaction; `Retry` is refused by the broker).
    pub fn ack_with(mut self, message: &Message, status: AckStatus, error: Option<&str>) -> Self {
        let mut op = json!({
            "type": "ack",
            "transactionId": message.transaction_id,
            "partitionId": message.partition_id,
            "status": status.as_str(),
            "consumerGroup": message.group(),
        });
        if !message.lease_id.is_empty() {
            op["leaseId"] = json!(message.lease_id);
            if !self.leases.contains(&message.lease_id) {
                self.leases.push(message.lease_id.clone());
            }
        }
        if let Some(e) = error {
            op["error"] = json!(e);
        }
        self.operations.push(op);
        self
    }

    /// Adds a push of `payload` to `queue`/`partition`.
    pub fn push(self, queue: &str, partition: &str, payload: &impl Serialize) -> Result<Self> {
        Ok(self.push_items(queue, vec![PushItem::new(payload)?.partition(partition)]))
    }

    /// Adds a push of several items to `queue` (each item's partition, or `Default`).
    pub fn push_items(mut self, queue: &str, items: Vec<PushItem>) -> Self {
        let items: Vec<Value> = items
            .into_iter()
            .map(|item| {
                json!({
                    "queue": queue,
                    "partition": item.partition.as_deref().unwrap_or(queen_proto::names::DEFAULT_PARTITION),
                    "payload": item.payload,
                    "transactionId": item.transaction_id.unwrap_or_else(|| uuid::Uuid::now_v7().to_string()),
                    "traceId": item.trace_id,
                })
            })
            .collect();
        self.operations
            .push(json!({"type": "push", "items": items}));
        self
    }

    /// Sends the transaction. `Err(Error::TransactionFailed)` when the broker
    /// refused it (nothing applied).
    pub async fn commit(self) -> Result<TransactionResult> {
        if self.operations.is_empty() {
            return Err(Error::InvalidInput(
                "a transaction needs at least one operation".into(),
            ));
        }
        let body = json!({"operations": self.operations, "requiredLeases": self.leases});
        let call = Call::post("/api/v1/transaction", &body)?.replay(Replay::IfNeverSent);
        let result: TransactionResult = self.client.transport().json(&call).await?;
        if result.success {
            Ok(result)
        } else {
            Err(Error::TransactionFailed {
                error: result.error.unwrap_or_else(|| "transaction refused".into()),
                results: result.results,
            })
        }
    }
}
