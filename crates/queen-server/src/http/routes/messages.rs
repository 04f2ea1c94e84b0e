//! Messages: list, detail and delete of single messages.

use axum::extract::{Path, Query, State};
use axum::Json;
use chrono::{Duration, DurationRound, Utc};
use queen_proto::admin::{
    BusStatus, ConsumptionMode, MessageDeleted, MessageDetail, MessageGroupState, MessageHead,
    MessageList, MessageListItem, MessageMode, MessageQueueConfig,
};
use queen_proto::time::format_millis;

use super::dlq::payload_json;
use crate::app::AppState;
use crate::http::body::{path_uuid, query_page, query_str, query_time, Query as Params};
use crate::http::error::ApiError;
use crate::store::{MessageFilter, MessageSummary};

const STATUSES: [&str; 4] = ["pending", "processing", "completed", "dead_letter"];

fn mode_kind(has_queue_mode: bool, bus_groups: i64) -> &'static str {
    match (has_queue_mode, bus_groups > 0) {
        (true, true) => "hybrid",
        (true, false) => "queue",
        (false, true) => "bus",
        (false, false) => "none",
    }
}

fn head(m: &MessageSummary) -> MessageHead {
    MessageHead {
        id: m.message_id.to_string(),
        transaction_id: m.transaction_id.clone(),
        partition_id: m.partition_id.to_string(),
        queue_path: format!("{}/{}", m.queue, m.partition),
        queue: m.queue.clone(),
        partition: m.partition.clone(),
        namespace: m.namespace.clone(),
        task: m.task.clone(),
        status: m.status.clone(),
        trace_id: m.trace_id.map(|t| t.to_string()),
        producer_sub: m.producer_sub.clone(),
        created_at: format_millis(m.created_at),
        lease_expires_at: m.lease_expires_at.map(format_millis),
    }
}

fn list_item(m: &MessageSummary) -> MessageListItem {
    MessageListItem {
        head: head(m),
        queue_status: m.status.clone(),
        bus_status: BusStatus {
            consumed_by: m.consumed_by,
            total_groups: m.bus_groups,
        },
        queue_priority: m.priority,
    }
}

pub async fn list(
    State(app): State<AppState>,
    Query(q): Query<Params>,
) -> Result<Json<MessageList>, ApiError> {
    let (limit, offset) = query_page(&q, 200);
    let status = query_str(&q, "status").map(str::to_owned);
    if let Some(s) = &status {
        if !STATUSES.contains(&s.as_str()) {
            return Err(ApiError::bad_request(
                "status must be pending, processing, completed or dead_letter",
            ));
        }
    }
    let now = Utc::now();
    // default window: the last hour, its end rounded up to the next minute
    let to = query_time(&q, "to")?.unwrap_or_else(|| {
        now.duration_trunc(Duration::minutes(1)).unwrap_or(now) + Duration::minutes(1)
    });
    let from = query_time(&q, "from")?.unwrap_or(now - Duration::hours(1));
    let filter = MessageFilter {
        queue: query_str(&q, "queue").map(str::to_owned),
        partition: query_str(&q, "partition").map(str::to_owned),
        namespace: query_str(&q, "ns").map(str::to_owned),
        task: query_str(&q, "task").map(str::to_owned),
        status,
        from: Some(from),
        to: Some(to),
        limit,
        offset,
    };
    let messages = app.broker.messages(&filter).await?;
    let has_queue_mode = messages.iter().any(|m| m.has_queue_mode);
    let bus_groups = messages.iter().map(|m| m.bus_groups).max().unwrap_or(0);
    Ok(Json(MessageList {
        messages: messages.iter().map(list_item).collect(),
        mode: ConsumptionMode {
            has_queue_mode,
            bus_groups_count: bus_groups,
            kind: mode_kind(has_queue_mode, bus_groups),
        },
    }))
}

pub async fn detail(
    State(app): State<AppState>,
    Path((partition_id, transaction_id)): Path<(String, String)>,
) -> Result<Json<MessageDetail>, ApiError> {
    let pid = path_uuid(&partition_id, "partitionId")?;
    let Some(view) = app.broker.message(pid, &transaction_id).await? else {
        return Err(ApiError::not_found("Message not found"));
    };
    let d = view.detail;
    let m = &d.summary;
    Ok(Json(MessageDetail {
        head: head(m),
        payload: payload_json(d.payload.clone()),
        is_encrypted: view.stored_encrypted,
        error_message: d.error_message.clone(),
        retry_count: d.retry_count,
        queue_config: MessageQueueConfig {
            lease_time: d.lease_time,
            retry_limit: d.retry_limit,
            retry_delay: d.retry_delay,
            retry_backoff: d.retry_backoff,
            retry_delay_max: d.retry_delay_max,
            ttl: d.ttl,
            priority: m.priority,
        },
        mode: MessageMode {
            has_queue_mode: m.has_queue_mode,
            bus_groups_count: m.bus_groups,
            consumed_by_groups: d
                .groups
                .iter()
                .filter(|g| g.consumed)
                .map(|g| g.group.clone())
                .collect(),
            kind: mode_kind(m.has_queue_mode, m.bus_groups),
        },
        consumer_groups: d
            .groups
            .iter()
            .map(|g| MessageGroupState {
                name: g.group.clone(),
                consumed: g.consumed,
                lease_expires_at: g.lease_expires_at.map(format_millis),
            })
            .collect(),
    }))
}

pub async fn delete(
    State(app): State<AppState>,
    Path((partition_id, transaction_id)): Path<(String, String)>,
) -> Result<Json<MessageDeleted>, ApiError> {
    let pid = path_uuid(&partition_id, "partitionId")?;
    let deleted = app.broker.delete_message(pid, &transaction_id).await?;
    Ok(Json(MessageDeleted {
        success: deleted,
        partition_id,
        transaction_id,
        message: if deleted {
            "Message deleted successfully"
        } else {
            "Message not found"
        },
    }))
}
