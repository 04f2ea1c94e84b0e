//! Response bodies of the CORE routes (push, pop, ack, lease) and the error
//! body of every route, with the exact field names the clients read.

use serde::Serialize;
use serde_json::value::RawValue;

/// Every error answer of API v1: `{"error": "..."}` with a 4xx/5xx status.
#[derive(Debug, Clone, Serialize)]
pub struct ErrorBody {
    pub error: String,
}

/// One element of the bare array `POST /api/v1/push` answers with.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum PushResult {
    Queued {
        index: usize,
        transaction_id: String,
        status: &'static str,
        message_id: String,
        partition_id: String,
        trace_id: Option<String>,
        #[serde(rename = "queueName")]
        queue_name: String,
    },
    Duplicate {
        index: usize,
        transaction_id: String,
        status: &'static str,
        message_id: String,
        #[serde(rename = "queueName")]
        queue_name: String,
    },
    Buffered {
        index: usize,
        status: &'static str,
        queue: String,
        partition: String,
        #[serde(rename = "transactionId")]
        transaction_id: String,
    },
    Failed {
        index: usize,
        status: &'static str,
        queue: String,
        partition: String,
        error: String,
    },
}

/// A message as a pop delivers it: exactly the ten fields of the contract plus `queue`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoppedMessage {
    pub id: String,
    pub transaction_id: String,
    pub trace_id: Option<String>,
    pub data: Box<RawValue>,
    pub producer_sub: Option<String>,
    pub created_at: String,
    pub partition_id: String,
    pub partition: String,
    pub lease_id: String,
    pub consumer_group: String,
    pub queue: String,
}

/// The body of a pop that returns at least one message.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PopResponse {
    pub success: bool,
    pub queue: String,
    pub partition: String,
    pub partition_id: String,
    pub lease_id: String,
    pub consumer_group: String,
    pub partitions_claimed: usize,
    pub messages: Vec<PoppedMessage>,
}

/// One element of the array `/ack` and `/ack/batch` answer with.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AckResult {
    pub index: usize,
    pub transaction_id: String,
    pub success: bool,
    pub error: Option<String>,
    pub queue_name: Option<String>,
    pub partition_name: Option<String>,
    pub lease_released: bool,
    pub dlq: bool,
}

/// The one element of the array `/lease/:id/extend` answers with.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseExtendResult {
    pub index: usize,
    pub lease_id: String,
    pub success: bool,
    pub error: Option<String>,
    pub expires_at: Option<String>,
    pub new_expires_at: Option<String>,
    pub renewed: i32,
}
