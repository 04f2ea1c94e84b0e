//! Response bodies of the CORE routes (push, pop, ack, lease) and the error
//! body of every route, with the exact field names the clients read.

use serde::Serialize;
use serde_json::value::RawValue;
use uuid::Uuid;

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
///
/// It borrows from the claimed messages, so an answer of a hundred messages
/// is written without copying a string of it first. The ids serialize as
/// their lowercase hyphenated text (`Uuid`'s `Serialize`, which is its
/// `to_string()`), `data` as the stored JSON text itself.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoppedMessage<'a> {
    pub id: Uuid,
    pub transaction_id: &'a str,
    pub trace_id: Option<Uuid>,
    pub data: &'a RawValue,
    pub producer_sub: Option<&'a str>,
    /// `YYYY-MM-DDTHH:MM:SS.ffffffZ` ([`crate::time::format_micros`]).
    pub created_at: &'a str,
    pub partition_id: Uuid,
    pub partition: &'a str,
    pub lease_id: &'a str,
    pub consumer_group: &'a str,
    pub queue: &'a str,
}

/// The body of a pop that returns at least one message.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PopResponse<'a> {
    pub success: bool,
    pub queue: &'a str,
    pub partition: &'a str,
    pub partition_id: Uuid,
    pub lease_id: &'a str,
    pub consumer_group: &'a str,
    pub partitions_claimed: usize,
    pub messages: Vec<PoppedMessage<'a>>,
}

/// One element of the array `/ack` and `/ack/batch` answer with, borrowing
/// from the request and the store's outcomes.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AckResult<'a> {
    pub index: usize,
    pub transaction_id: &'a str,
    pub success: bool,
    pub error: Option<&'a str>,
    pub queue_name: Option<&'a str>,
    pub partition_name: Option<&'a str>,
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
