//! Response bodies of the ADMIN/SECONDARY routes that work on messages and
//! groups: configure and delete, transactions, traces, dead letters, message
//! listing and detail, consumer groups.
//!
//! Field names and casing are the reference's, including its mixed styles
//! (the trace and lagging bodies are snake_case). `Option` fields answer
//! `null` unless marked `skip_serializing_if` (then they are absent), and
//! integer fields stay integers where the reference writes `0`.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::value::RawValue;

use crate::QueueOptions;

/// `{"success": false, "error": ...}`: a failure answered with a 2xx/4xx/5xx
/// status the route chooses (pop without a database, unknown trace target,
/// seek of an unknown partition).
#[derive(Debug, Clone, Serialize)]
pub struct FailureBody {
    pub success: bool,
    pub error: String,
}

impl FailureBody {
    pub fn new(error: impl Into<String>) -> Self {
        Self {
            success: false,
            error: error.into(),
        }
    }
}

/// `limit` and `offset` of a listing.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Pagination {
    pub limit: i64,
    pub offset: i64,
}

/// `POST /api/v1/configure`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Configured {
    pub configured: bool,
    pub queue_id: String,
    pub partition_id: String,
    pub queue: String,
    pub namespace: String,
    pub task: String,
    pub options: QueueOptions,
}

/// `DELETE /api/v1/resources/queues/:queue`.
#[derive(Debug, Clone, Serialize)]
pub struct QueueDeleted {
    pub deleted: bool,
    pub queue: String,
    pub existed: bool,
}

/// `POST /api/v1/transaction`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TransactionResponse {
    pub transaction_id: String,
    pub success: bool,
    /// Present only when the transaction was rolled back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub results: Vec<TransactionEntry>,
}

/// One operation's result in a transaction answer.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum TransactionEntry {
    #[serde(rename_all = "camelCase")]
    Ack {
        index: usize,
        #[serde(rename = "type")]
        kind: &'static str,
        success: bool,
        transaction_id: String,
        error: Option<String>,
        dlq: bool,
    },
    #[serde(rename_all = "camelCase")]
    Push {
        index: usize,
        #[serde(rename = "type")]
        kind: &'static str,
        success: bool,
        transaction_id: String,
        message_id: String,
        partition_id: String,
        queue_name: Option<String>,
    },
    /// The operation that failed (everything was rolled back).
    #[serde(rename_all = "camelCase")]
    Failed {
        index: usize,
        success: bool,
        transaction_id: Option<String>,
        error: String,
    },
}

/// `POST /api/v1/traces` (201).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TraceCreated {
    pub success: bool,
    pub trace_id: String,
}

/// A trace event (snake_case, as the reference writes it).
#[derive(Debug, Clone, Serialize)]
pub struct TraceEvent {
    pub id: String,
    pub event_type: String,
    pub data: serde_json::Value,
    pub consumer_group: String,
    pub worker_id: Option<String>,
    pub created_at: String,
    pub trace_names: Vec<String>,
}

/// A trace event with the message it belongs to (`/traces/by-name/:name`).
#[derive(Debug, Clone, Serialize)]
pub struct NamedTraceEvent {
    #[serde(flatten)]
    pub event: TraceEvent,
    pub transaction_id: String,
    pub partition_id: String,
    pub queue_name: Option<String>,
    pub partition_name: Option<String>,
    pub message_payload: Option<Box<RawValue>>,
}

/// `GET /api/v1/traces/:partitionId/:transactionId`.
#[derive(Debug, Clone, Serialize)]
pub struct MessageTraces {
    pub traces: Vec<TraceEvent>,
}

/// `GET /api/v1/traces/by-name/:name`.
#[derive(Debug, Clone, Serialize)]
pub struct TracesByName {
    pub traces: Vec<NamedTraceEvent>,
    pub total: i64,
    pub pagination: Pagination,
}

/// One trace name with its counts.
#[derive(Debug, Clone, Serialize)]
pub struct TraceNameCount {
    pub trace_name: String,
    pub trace_count: i64,
    pub message_count: i64,
    pub last_seen: String,
}

/// `GET /api/v1/traces/names`.
#[derive(Debug, Clone, Serialize)]
pub struct TraceNames {
    pub trace_names: Vec<TraceNameCount>,
    pub total: i64,
    pub pagination: Pagination,
}

/// A dead letter as `GET /api/v1/dlq` lists it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeadLetterMessage {
    pub id: String,
    pub transaction_id: String,
    pub partition_id: String,
    pub queue: String,
    pub partition: String,
    pub consumer_group: String,
    pub error_message: Option<String>,
    pub retry_count: i32,
    pub data: Box<RawValue>,
    pub producer_sub: Option<String>,
    pub created_at: String,
    pub failed_at: String,
}

/// `GET /api/v1/dlq`.
#[derive(Debug, Clone, Serialize)]
pub struct DeadLetters {
    pub messages: Vec<DeadLetterMessage>,
    pub pagination: Pagination,
    pub total: i64,
}

/// How many bus groups consumed a message, of how many.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BusStatus {
    pub consumed_by: i64,
    pub total_groups: i64,
}

/// The fields every message view shares.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageHead {
    pub id: String,
    pub transaction_id: String,
    pub partition_id: String,
    pub queue_path: String,
    pub queue: String,
    pub partition: String,
    pub namespace: String,
    pub task: String,
    pub status: String,
    pub trace_id: Option<String>,
    pub producer_sub: Option<String>,
    pub created_at: String,
    pub lease_expires_at: Option<String>,
}

/// A message as `GET /api/v1/messages` lists it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageListItem {
    #[serde(flatten)]
    pub head: MessageHead,
    pub queue_status: String,
    pub bus_status: BusStatus,
    pub queue_priority: i32,
}

/// Whether a queue is read in queue mode, by bus groups, or both.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumptionMode {
    pub has_queue_mode: bool,
    pub bus_groups_count: i64,
    #[serde(rename = "type")]
    pub kind: &'static str,
}

/// `GET /api/v1/messages`.
#[derive(Debug, Clone, Serialize)]
pub struct MessageList {
    pub messages: Vec<MessageListItem>,
    pub mode: ConsumptionMode,
}

/// The queue settings shown with a message.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageQueueConfig {
    pub lease_time: i32,
    pub retry_limit: i32,
    pub retry_delay: i32,
    pub retry_backoff: f64,
    pub retry_delay_max: i32,
    pub ttl: i32,
    pub priority: i32,
}

/// The consumption mode of one message, with the groups that consumed it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageMode {
    pub has_queue_mode: bool,
    pub bus_groups_count: i64,
    pub consumed_by_groups: Vec<String>,
    #[serde(rename = "type")]
    pub kind: &'static str,
}

/// One group's view of a message.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageGroupState {
    pub name: String,
    pub consumed: bool,
    pub lease_expires_at: Option<String>,
}

/// `GET /api/v1/messages/:partitionId/:transactionId`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageDetail {
    #[serde(flatten)]
    pub head: MessageHead,
    pub payload: Box<RawValue>,
    pub is_encrypted: bool,
    pub error_message: Option<String>,
    pub retry_count: i32,
    pub queue_config: MessageQueueConfig,
    pub mode: MessageMode,
    pub consumer_groups: Vec<MessageGroupState>,
}

/// `DELETE /api/v1/messages/:partitionId/:transactionId`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageDeleted {
    pub success: bool,
    pub partition_id: String,
    pub transaction_id: String,
    pub message: &'static str,
}

/// One (group, queue) of `GET /api/v1/consumer-groups`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerGroupSummary {
    pub name: String,
    pub topics: Vec<String>,
    pub queue_name: String,
    pub members: usize,
    pub partitions_with_lag: usize,
    /// Always `null`: offsets are not comparable across partitions.
    pub total_lag: Option<i64>,
    pub max_time_lag: i64,
    pub state: &'static str,
    pub subscription_mode: Option<String>,
    pub subscription_timestamp: Option<String>,
    pub subscription_created_at: Option<String>,
    /// The group's stored last-value policy on this queue.
    pub conflation: bool,
}

/// One lagging cursor of `GET /api/v1/consumer-groups/lagging` (snake_case).
#[derive(Debug, Clone, Serialize)]
pub struct LaggingPartition {
    pub consumer_group: String,
    pub queue_name: String,
    pub partition_name: String,
    pub partition_id: String,
    pub worker_id: Option<String>,
    pub offset_lag: i64,
    pub time_lag_seconds: i64,
    pub lag_hours: f64,
    pub oldest_unconsumed_at: Option<String>,
    pub last_consumed_at: Option<String>,
}

/// One cursor of a group, in `GET /api/v1/consumer-groups/:group`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupPartition {
    pub partition: String,
    pub worker_id: Option<String>,
    pub last_consumed_at: Option<String>,
    pub total_consumed: i64,
    pub offset_lag: i64,
    pub time_lag_seconds: i64,
    pub lease_active: bool,
}

/// A group's cursors on one queue.
#[derive(Debug, Clone, Default, Serialize)]
pub struct GroupQueue {
    pub partitions: Vec<GroupPartition>,
    /// The group's stored last-value policy on this queue.
    pub conflation: bool,
}

/// `GET /api/v1/consumer-groups/:group`: the group's cursors keyed by queue.
pub type GroupDetail = BTreeMap<String, GroupQueue>;

/// `DELETE /api/v1/consumer-groups/:group[/queues/:queue]`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupDeleted {
    pub success: bool,
    pub consumer_group: String,
    pub deleted_partitions: u64,
    pub metadata_deleted: bool,
    /// Present when one queue was named.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_name: Option<String>,
}

/// `POST /api/v1/consumer-groups/:group/subscription`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionUpdated {
    pub success: bool,
    pub consumer_group: String,
    pub new_timestamp: String,
    pub rows_updated: u64,
}

/// `POST /api/v1/consumer-groups/:group/queues/:queue/seek`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueSeek {
    pub success: bool,
    pub consumer_group: String,
    pub queue_name: String,
    pub seek_to_end: bool,
    pub target_timestamp: Option<String>,
    pub partitions_updated: usize,
}

/// `POST /api/v1/consumer-groups/:group/queues/:queue/partitions/:partition/seek`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PartitionSeek {
    pub success: bool,
    pub consumer_group: String,
    pub queue_name: String,
    pub partition_name: String,
    pub updated: bool,
    pub cursor_moved_to: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn absent_and_null_fields_follow_the_contract() {
        let deleted = GroupDeleted {
            success: true,
            consumer_group: "g".into(),
            deleted_partitions: 2,
            metadata_deleted: true,
            queue_name: None,
        };
        assert_eq!(
            serde_json::to_value(&deleted).unwrap(),
            json!({"success": true, "consumerGroup": "g", "deletedPartitions": 2, "metadataDeleted": true})
        );
        let entry = TransactionEntry::Failed {
            index: 1,
            success: false,
            transaction_id: None,
            error: "boom".into(),
        };
        assert_eq!(
            serde_json::to_value(&entry).unwrap(),
            json!({"index": 1, "success": false, "transactionId": null, "error": "boom"})
        );
        let named = NamedTraceEvent {
            event: TraceEvent {
                id: "t".into(),
                event_type: "info".into(),
                data: json!({"a": 1}),
                consumer_group: "__QUEUE_MODE__".into(),
                worker_id: None,
                created_at: "2024-01-01T00:00:00.000Z".into(),
                trace_names: vec!["n".into()],
            },
            transaction_id: "x".into(),
            partition_id: "p".into(),
            queue_name: None,
            partition_name: Some("Default".into()),
            message_payload: None,
        };
        let v = serde_json::to_value(&named).unwrap();
        assert_eq!(v["event_type"], "info");
        assert!(v["queue_name"].is_null() && v["message_payload"].is_null());
        assert_eq!(v.as_object().unwrap().len(), 12);
    }
}

/// `DELETE /api/v1/dlq/:partitionId/:transactionId`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeadLetterDeleted {
    pub success: bool,
    pub partition_id: String,
    pub transaction_id: String,
    pub consumer_group: Option<String>,
    pub deleted: u64,
}
