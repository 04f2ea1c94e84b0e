//! Consumer groups: list, detail, lagging, delete, seek, subscription update.

use std::collections::BTreeMap;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::Utc;
use queen_proto::admin::{
    ConsumerGroupSummary, FailureBody, GroupDeleted, GroupDetail, GroupPartition, LaggingPartition,
    PartitionSeek, QueueSeek, SubscriptionUpdated,
};
use queen_proto::time::{format_millis, parse_timestamp};
use serde_json::Value;

use super::{partition_name, queue_name};
use crate::app::AppState;
use crate::http::body::{parse_object, query_bool, query_u64, read_bytes, Query as Params};
use crate::http::error::ApiError;
use crate::store::Cursor;

/// A group whose oldest unconsumed message is older than this is `Lagging` (5 minutes).
const LAGGING_AFTER_SECS: i64 = 300;

fn time_lag_secs(c: &Cursor) -> i64 {
    c.oldest_unconsumed_at
        .map_or(0, |t| (Utc::now() - t).num_seconds().max(0))
}

/// `GET /api/v1/consumer-groups`: one element per (group, queue).
pub async fn list(
    State(app): State<AppState>,
) -> Result<Json<Vec<ConsumerGroupSummary>>, ApiError> {
    let cursors = app.broker.cursors(None).await?;
    let subscriptions = app.broker.subscriptions().await?;
    let conflating = app.broker.conflating_groups(None, None).await?;
    let mut groups: BTreeMap<(String, String), Vec<Cursor>> = BTreeMap::new();
    for c in cursors {
        groups
            .entry((c.consumer_group.clone(), c.queue.clone()))
            .or_default()
            .push(c);
    }
    let out = groups
        .into_iter()
        .map(|((group, queue), members)| {
            let lagging = members.iter().filter(|c| c.offset_lag > 0).count();
            let max_lag = members.iter().map(time_lag_secs).max().unwrap_or(0);
            let consumed: i64 = members.iter().map(|c| c.total_consumed).sum();
            let state = if max_lag > LAGGING_AFTER_SECS {
                "Lagging"
            } else if consumed > 0 || members.iter().any(|c| c.last_consumed_at.is_some()) {
                "Stable"
            } else {
                "Dead"
            };
            let sub = subscriptions
                .iter()
                .find(|s| s.consumer_group == group && s.queue == queue);
            ConsumerGroupSummary {
                name: group.clone(),
                topics: vec![queue.clone()],
                queue_name: queue.clone(),
                members: members.len(),
                partitions_with_lag: lagging,
                total_lag: None,
                max_time_lag: max_lag,
                state,
                subscription_mode: sub.map(|s| s.mode.clone()),
                subscription_timestamp: sub.map(|s| format_millis(s.timestamp)),
                subscription_created_at: sub.map(|s| format_millis(s.created_at)),
                conflation: conflating.iter().any(|(g, q)| *g == group && *q == queue),
            }
        })
        .collect();
    Ok(Json(out))
}

/// `GET /api/v1/consumer-groups/lagging?minLagSeconds=3600`.
pub async fn lagging(
    State(app): State<AppState>,
    Query(q): Query<Params>,
) -> Result<Json<Vec<LaggingPartition>>, ApiError> {
    let min_lag = i64::try_from(query_u64(&q, "minLagSeconds", 3600)).unwrap_or(i64::MAX);
    let cursors = app.broker.cursors(None).await?;
    let out = cursors
        .iter()
        .filter(|c| c.offset_lag > 0 && time_lag_secs(c) >= min_lag)
        .map(|c| {
            let lag = time_lag_secs(c);
            LaggingPartition {
                consumer_group: c.consumer_group.clone(),
                queue_name: c.queue.clone(),
                partition_name: c.partition.clone(),
                partition_id: c.partition_id.to_string(),
                worker_id: c.lease_holder.clone(),
                offset_lag: c.offset_lag,
                time_lag_seconds: lag,
                lag_hours: lag as f64 / 3600.0,
                oldest_unconsumed_at: c.oldest_unconsumed_at.map(format_millis),
                last_consumed_at: c.last_consumed_at.map(format_millis),
            }
        })
        .collect();
    Ok(Json(out))
}

/// `GET /api/v1/consumer-groups/:group`: the group's cursors keyed by queue.
pub async fn detail(
    State(app): State<AppState>,
    Path(group): Path<String>,
) -> Result<Json<GroupDetail>, ApiError> {
    let cursors = app.broker.cursors(Some(&group)).await?;
    let conflating = app.broker.conflating_groups(Some(&group), None).await?;
    let mut out = GroupDetail::new();
    for c in cursors {
        let lag = time_lag_secs(&c);
        out.entry(c.queue)
            .or_default()
            .partitions
            .push(GroupPartition {
                partition: c.partition,
                worker_id: c.lease_holder,
                last_consumed_at: c.last_consumed_at.map(format_millis),
                total_consumed: c.total_consumed,
                offset_lag: c.offset_lag,
                time_lag_seconds: lag,
                lease_active: c.lease_active,
            });
    }
    for (_, queue) in conflating {
        if let Some(q) = out.get_mut(&queue) {
            q.conflation = true;
        }
    }
    Ok(Json(out))
}

/// `DELETE /api/v1/consumer-groups/:group?deleteMetadata=true`.
pub async fn delete(
    State(app): State<AppState>,
    Path(group): Path<String>,
    Query(q): Query<Params>,
) -> Result<Json<GroupDeleted>, ApiError> {
    delete_cursors(&app, group, None, &q).await
}

/// `DELETE /api/v1/consumer-groups/:group/queues/:queue?deleteMetadata=true`.
pub async fn delete_for_queue(
    State(app): State<AppState>,
    Path((group, queue)): Path<(String, String)>,
    Query(q): Query<Params>,
) -> Result<Json<GroupDeleted>, ApiError> {
    delete_cursors(&app, group, Some(queue), &q).await
}

/// Deletes a group's cursors (on one queue or all) and, unless
/// `deleteMetadata=false`, its stored subscriptions.
async fn delete_cursors(
    app: &AppState,
    group: String,
    queue: Option<String>,
    q: &Params,
) -> Result<Json<GroupDeleted>, ApiError> {
    let delete_metadata = query_bool(q, "deleteMetadata", true);
    let deleted = app
        .broker
        .delete_consumer_group(&group, queue.as_deref(), delete_metadata)
        .await?;
    Ok(Json(GroupDeleted {
        success: true,
        consumer_group: group,
        deleted_partitions: deleted,
        metadata_deleted: delete_metadata,
        queue_name: queue,
    }))
}

/// `POST /api/v1/consumer-groups/:group/subscription` `{"subscriptionTimestamp": ...}`.
pub async fn update_subscription(
    State(app): State<AppState>,
    Path(group): Path<String>,
    body: Body,
) -> Result<Json<SubscriptionUpdated>, ApiError> {
    let map = parse_object(&read_bytes(body, app.broker.config().max_body_bytes).await?)?;
    super::consumer_group(Some(&group))?;
    let raw = map
        .get("subscriptionTimestamp")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::bad_request("Missing subscriptionTimestamp in request body"))?;
    let at = parse_timestamp(raw).ok_or_else(|| {
        ApiError::bad_request("subscriptionTimestamp must be an ISO-8601 timestamp")
    })?;
    let rows = app.broker.update_subscription_timestamp(&group, at).await?;
    Ok(Json(SubscriptionUpdated {
        success: true,
        consumer_group: group,
        new_timestamp: raw.to_owned(),
        rows_updated: rows,
    }))
}

/// `POST /api/v1/consumer-groups/:group/queues/:queue/seek` `{"toEnd": true}` or `{"timestamp": ...}`.
pub async fn seek(
    State(app): State<AppState>,
    Path((group, queue)): Path<(String, String)>,
    body: Body,
) -> Result<Json<QueueSeek>, ApiError> {
    let map = parse_object(&read_bytes(body, app.broker.config().max_body_bytes).await?)?;
    let to_end = map.get("toEnd").and_then(Value::as_bool).unwrap_or(false);
    let at = match map.get("timestamp") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(
            parse_timestamp(s)
                .ok_or_else(|| ApiError::bad_request("timestamp must be an ISO-8601 timestamp"))?,
        ),
        Some(_) => return Err(ApiError::bad_request("timestamp must be a string")),
    };
    if !to_end && at.is_none() {
        return Err(ApiError::bad_request(
            "Must specify either 'toEnd': true or 'timestamp'",
        ));
    }
    let name = queue_name(&queue)?;
    let Some(moved) = app
        .broker
        .seek_queue(&group, name.as_str(), to_end, at)
        .await?
    else {
        return Err(ApiError::not_found("Queue not found"));
    };
    Ok(Json(QueueSeek {
        success: true,
        consumer_group: group,
        queue_name: queue,
        seek_to_end: to_end,
        target_timestamp: at.map(format_millis),
        partitions_updated: moved.len(),
    }))
}

/// `POST /api/v1/consumer-groups/:group/queues/:queue/partitions/:partition/seek`: to the end.
pub async fn seek_partition(
    State(app): State<AppState>,
    Path((group, queue, partition)): Path<(String, String, String)>,
) -> Result<Response, ApiError> {
    let name = queue_name(&queue)?;
    let part = partition_name(&partition)?;
    let not_found = || {
        (
            StatusCode::NOT_FOUND,
            Json(FailureBody::new("Partition not found")),
        )
            .into_response()
    };
    let Some(moved) = app
        .broker
        .seek_partition_to_end(&group, name.as_str(), part.as_str())
        .await?
    else {
        return Ok(not_found());
    };
    Ok(Json(PartitionSeek {
        success: true,
        consumer_group: group,
        queue_name: queue,
        partition_name: partition,
        updated: !moved.is_empty(),
        cursor_moved_to: moved.first().map(|(_, offset)| *offset),
    })
    .into_response())
}
