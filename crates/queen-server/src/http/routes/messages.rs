//! Messages: list, detail and delete of single messages.

use axum::extract::{Path, Query, State};
use axum::Json;
use chrono::{Duration, DurationRound, Utc};
use queen_proto::time::format_millis;
use serde_json::{json, Value};

use super::dlq::payload_json;
use crate::app::AppState;
use crate::http::body::{path_uuid, query_page, query_str, query_time, Query as Params};
use crate::http::error::ApiError;
use crate::store::{MessageFilter, MessageSummary};

const STATUSES: [&str; 4] = ["pending", "processing", "completed", "dead_letter"];

fn mode(has_queue_mode: bool, bus_groups: i64) -> Value {
    let kind = match (has_queue_mode, bus_groups > 0) {
        (true, true) => "hybrid",
        (true, false) => "queue",
        (false, true) => "bus",
        (false, false) => "none",
    };
    json!({"hasQueueMode": has_queue_mode, "busGroupsCount": bus_groups, "type": kind})
}

fn summary_json(m: &MessageSummary) -> Value {
    json!({
        "id": m.message_id.to_string(),
        "transactionId": m.transaction_id,
        "partitionId": m.partition_id.to_string(),
        "queuePath": format!("{}/{}", m.queue, m.partition),
        "queue": m.queue,
        "partition": m.partition,
        "namespace": m.namespace,
        "task": m.task,
        "status": m.status,
        "queueStatus": m.status,
        "busStatus": {"consumedBy": m.consumed_by, "totalGroups": m.bus_groups},
        "traceId": m.trace_id.map(|t| t.to_string()),
        "producerSub": m.producer_sub,
        "queuePriority": m.priority,
        "createdAt": format_millis(m.created_at),
        "leaseExpiresAt": m.lease_expires_at.map(format_millis),
    })
}

pub async fn list(
    State(app): State<AppState>,
    Query(q): Query<Params>,
) -> Result<Json<Value>, ApiError> {
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
    Ok(Json(json!({
        "messages": messages.iter().map(summary_json).collect::<Vec<_>>(),
        "mode": mode(has_queue_mode, bus_groups),
    })))
}

pub async fn detail(
    State(app): State<AppState>,
    Path((partition_id, transaction_id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let pid = path_uuid(&partition_id, "partitionId")?;
    let Some(view) = app.broker.message(pid, &transaction_id).await? else {
        return Err(ApiError::not_found("Message not found"));
    };
    let d = view.detail;
    let m = &d.summary;
    let is_encrypted = view.stored_encrypted;
    let mut body = summary_json(m);
    let consumed_by_groups: Vec<&str> = d
        .groups
        .iter()
        .filter(|g| g.consumed)
        .map(|g| g.group.as_str())
        .collect();
    let extra = json!({
        "payload": payload_json(d.payload.clone()),
        "isEncrypted": is_encrypted,
        "errorMessage": d.error_message,
        "retryCount": d.retry_count,
        "queueConfig": {
            "leaseTime": d.lease_time, "retryLimit": d.retry_limit,
            "retryDelay": d.retry_delay, "ttl": d.ttl, "priority": m.priority,
        },
        "mode": {
            "hasQueueMode": m.has_queue_mode, "busGroupsCount": m.bus_groups,
            "consumedByGroups": consumed_by_groups, "type": mode(m.has_queue_mode, m.bus_groups)["type"],
        },
        "consumerGroups": d.groups.iter().map(|g| json!({
            "name": g.group, "consumed": g.consumed, "leaseExpiresAt": g.lease_expires_at.map(format_millis),
        })).collect::<Vec<_>>(),
    });
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
        b.remove("queueStatus");
        b.remove("busStatus");
        b.remove("queuePriority");
    }
    Ok(Json(body))
}

pub async fn delete(
    State(app): State<AppState>,
    Path((partition_id, transaction_id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let pid = path_uuid(&partition_id, "partitionId")?;
    let deleted = app.broker.delete_message(pid, &transaction_id).await?;
    Ok(Json(json!({
        "success": deleted,
        "partitionId": partition_id,
        "transactionId": transaction_id,
        "message": if deleted { "Message deleted successfully" } else { "Message not found" },
    })))
}
