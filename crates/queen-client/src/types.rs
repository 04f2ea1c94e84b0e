//! Bodies of the HTTP API v1 as this client sends and reads them.
//!
//! Field names follow the wire exactly (`shared/spec/http-api.md`), including
//! its mix of `camelCase` and `snake_case`.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

use crate::error::{Error, Result};

/// A message as a pop delivers it.
///
/// `partition_id`, `lease_id` and `consumer_group` identify it for ack,
/// lease renewal and traces; the client feeds them back as they came.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Message {
    pub id: String,
    pub transaction_id: String,
    pub trace_id: Option<String>,
    /// The pushed payload, any JSON value.
    pub data: Value,
    pub producer_sub: Option<String>,
    /// Push time, UTC with microseconds.
    pub created_at: String,
    pub partition_id: String,
    pub partition: String,
    /// Empty when the pop committed on delivery (`auto_ack`).
    pub lease_id: String,
    pub consumer_group: String,
    /// The queue, when the broker names it (this broker always does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// How many times the message has been handed to this consumer group,
    /// this delivery included (1 on the first), when the broker says it
    /// (this broker always does; see the queue's `retryDelay`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_attempt: Option<u32>,
}

impl Message {
    /// Decodes the payload into `T`.
    ///
    /// ```
    /// # fn run(msg: queen_client::Message) -> queen_client::Result<()> {
    /// #[derive(serde::Deserialize)]
    /// struct Order { id: u64 }
    /// let order: Order = msg.data_as()?;
    /// println!("order {}", order.id);
    /// # Ok(()) }
    /// ```
    pub fn data_as<T: DeserializeOwned>(&self) -> Result<T> {
        Ok(T::deserialize(&self.data)?)
    }

    /// The consumer group to name on an ack: `None` for queue mode.
    pub(crate) fn group(&self) -> Option<&str> {
        match self.consumer_group.as_str() {
            "" | queen_proto::QUEUE_MODE => None,
            g => Some(g),
        }
    }
}

/// The body of a pop that returned messages.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PopBody {
    #[serde(default = "yes")]
    pub success: bool,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub messages: Vec<Message>,
}

fn yes() -> bool {
    true
}

/// One message to push: a payload plus optional ids.
///
/// The payload is serialised when the item is made, so a push of many items
/// carries no generic type. Without a transaction id the client makes one
/// (a UUID v7), so a push retried after a lost answer is a duplicate, never a
/// second copy.
///
/// ```
/// use queen_client::PushItem;
/// let item = PushItem::new(&serde_json::json!({"id": 1}))?
///     .transaction_id("order-1");
/// let raw = PushItem::raw(r#"{"id": 2}"#)?;
/// # Ok::<_, queen_client::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct PushItem {
    pub(crate) payload: Box<RawValue>,
    pub(crate) transaction_id: Option<String>,
    pub(crate) trace_id: Option<String>,
    pub(crate) partition: Option<String>,
}

impl PushItem {
    /// An item whose payload is `payload` serialised to JSON.
    pub fn new(payload: &impl Serialize) -> Result<Self> {
        Ok(Self::from_raw(serde_json::value::to_raw_value(payload)?))
    }

    /// An item whose payload is the JSON text `json`, checked but not re-encoded.
    pub fn raw(json: &str) -> Result<Self> {
        let raw = RawValue::from_string(json.trim().to_owned())
            .map_err(|e| Error::InvalidInput(format!("payload is not JSON: {e}")))?;
        Ok(Self::from_raw(raw))
    }

    /// An item whose payload is an already checked JSON value.
    pub fn from_raw(payload: Box<RawValue>) -> Self {
        Self {
            payload,
            transaction_id: None,
            trace_id: None,
            partition: None,
        }
    }

    /// Sets the transaction id: the broker stores one message per
    /// (partition, transaction id) and reports repeats as `duplicate`.
    pub fn transaction_id(mut self, id: impl Into<String>) -> Self {
        self.transaction_id = Some(id.into());
        self
    }

    /// Sets the trace id (a UUID).
    pub fn trace_id(mut self, id: impl Into<String>) -> Self {
        self.trace_id = Some(id.into());
        self
    }

    /// Sends this item to `partition` instead of the queue handle's.
    pub fn partition(mut self, partition: impl Into<String>) -> Self {
        self.partition = Some(partition.into());
        self
    }

    /// The payload as JSON text.
    pub fn payload(&self) -> &str {
        self.payload.get()
    }
}

/// An item as `POST /api/v1/push` takes it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireItem<'a> {
    pub queue: &'a str,
    pub partition: &'a str,
    pub payload: &'a RawValue,
    pub transaction_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<&'a str>,
}

/// What the broker did with one pushed item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(
    tag = "status",
    rename_all = "lowercase",
    rename_all_fields = "camelCase"
)]
#[non_exhaustive]
pub enum PushStatus {
    /// Stored.
    Queued {
        message_id: String,
        partition_id: String,
    },
    /// Already stored under this transaction id in this partition (also the
    /// answer to a push the client retried after a lost answer).
    Duplicate { message_id: String },
    /// The broker could not reach PostgreSQL (or push maintenance is on): the
    /// item is in its disk spool and is stored, deduplicated by its
    /// transaction id, when the database is back.
    Buffered,
    /// Refused; nothing stored.
    Failed { error: String },
    /// A status this client does not know, as the broker wrote it.
    Unknown { reported: String },
}

/// One element of a push's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct PushResult {
    /// Position of the item in the request.
    pub index: usize,
    pub transaction_id: String,
    #[serde(flatten)]
    pub status: PushStatus,
}

impl PushResult {
    /// Returns whether the item is stored or will be (queued, duplicate or buffered).
    pub fn is_accepted(&self) -> bool {
        matches!(
            self.status,
            PushStatus::Queued { .. } | PushStatus::Duplicate { .. } | PushStatus::Buffered
        )
    }
}

/// The push answer element as it is on the wire (every variant's keys).
#[derive(Debug, Deserialize)]
pub(crate) struct WirePushResult {
    #[serde(default)]
    pub index: Option<usize>,
    pub status: String,
    #[serde(default)]
    pub transaction_id: Option<String>,
    #[serde(default, rename = "transactionId")]
    pub transaction_id_camel: Option<String>,
    #[serde(default)]
    pub message_id: Option<String>,
    #[serde(default)]
    pub partition_id: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
}

impl WirePushResult {
    pub fn into_result(self, position: usize, sent_id: &str) -> PushResult {
        let status = match self.status.as_str() {
            "queued" => PushStatus::Queued {
                message_id: self.message_id.unwrap_or_default(),
                partition_id: self.partition_id.unwrap_or_default(),
            },
            "duplicate" => PushStatus::Duplicate {
                message_id: self.message_id.unwrap_or_default(),
            },
            "buffered" => PushStatus::Buffered,
            "failed" => PushStatus::Failed {
                error: self.error.unwrap_or_else(|| "push failed".into()),
            },
            _ => PushStatus::Unknown {
                reported: self.status,
            },
        };
        PushResult {
            index: self.index.unwrap_or(position),
            transaction_id: self
                .transaction_id
                .or(self.transaction_id_camel)
                .unwrap_or_else(|| sent_id.to_owned()),
            status,
        }
    }
}

/// How a message is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum AckStatus {
    /// Processed: the group's cursor moves past it.
    Completed,
    /// Processing failed: redelivered until the queue's `retryLimit`, then dead-lettered.
    Failed,
    /// Redelivered without counting a retry.
    Retry,
    /// Dead-lettered at once.
    Dlq,
}

impl AckStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Retry => "retry",
            Self::Dlq => "dlq",
        }
    }
}

impl std::str::FromStr for AckStatus {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "completed" | "success" => Ok(Self::Completed),
            "failed" => Ok(Self::Failed),
            "retry" => Ok(Self::Retry),
            "dlq" => Ok(Self::Dlq),
            _ => Err(Error::InvalidInput(format!(
                "ack status {s:?} is not one of completed, failed, retry, dlq"
            ))),
        }
    }
}

/// One acknowledgment as the ack routes take it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireAck<'a> {
    pub transaction_id: &'a str,
    pub partition_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_id: Option<&'a str>,
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumer_group: Option<&'a str>,
}

/// What the broker did with one acknowledgment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct AckResult {
    pub index: usize,
    pub transaction_id: String,
    pub success: bool,
    /// `Message not found`, `Invalid or expired lease`, or `None`.
    pub error: Option<String>,
    #[serde(default)]
    pub queue_name: Option<String>,
    #[serde(default)]
    pub partition_name: Option<String>,
    /// This ack ended the partition's lease.
    #[serde(default)]
    pub lease_released: bool,
    /// This ack dead-lettered the message.
    #[serde(default)]
    pub dlq: bool,
}

/// The answer of a lease renewal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct LeaseRenewal {
    pub lease_id: String,
    pub success: bool,
    pub error: Option<String>,
    /// The new expiry (UTC, milliseconds), when something was extended.
    #[serde(default)]
    pub expires_at: Option<String>,
    /// How many partition leases were extended.
    #[serde(default)]
    pub renewed: u32,
}

/// The answer of a committed transaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct TransactionResult {
    /// The id the broker gave the transaction.
    pub transaction_id: String,
    pub success: bool,
    #[serde(default)]
    pub error: Option<String>,
    /// One entry per operation (pushes count one per item), in order.
    #[serde(default)]
    pub results: Vec<Value>,
}

/// The answer of `configure`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ConfigureResult {
    pub configured: bool,
    pub queue_id: String,
    /// The id of the queue's `Default` partition.
    pub partition_id: String,
    pub queue: String,
    pub namespace: String,
    pub task: String,
    /// Every option with its effective value.
    pub options: Value,
}

/// The answer of a queue deletion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct DeleteQueueResult {
    pub deleted: bool,
    pub queue: String,
    /// Whether the queue existed.
    pub existed: bool,
}

/// One dead-lettered message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct DeadLetter {
    /// The message id.
    pub id: String,
    pub transaction_id: String,
    pub partition_id: String,
    pub queue: String,
    pub partition: String,
    pub consumer_group: String,
    pub error_message: Option<String>,
    pub retry_count: i64,
    pub data: Value,
    #[serde(default)]
    pub producer_sub: Option<String>,
    pub created_at: String,
    pub failed_at: String,
}

/// A page of the dead-letter queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DeadLetterPage {
    pub messages: Vec<DeadLetter>,
    /// Every entry matching the filters, across pages.
    #[serde(default)]
    pub total: u64,
}

/// The two maintenance switches and the broker's spool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Maintenance {
    /// Pushes go to the broker's disk spool instead of the database.
    pub maintenance_mode: bool,
    /// Pops answer empty.
    #[serde(default)]
    pub pop_maintenance_mode: bool,
    /// Pushes waiting in the spool.
    #[serde(default)]
    pub buffered_messages: u64,
}

/// Where a consumer group's cursors go.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Seek {
    /// Past every message stored now (skips the backlog).
    ToEnd,
    /// Past the last message created at or before this time (ISO 8601).
    To(String),
}
