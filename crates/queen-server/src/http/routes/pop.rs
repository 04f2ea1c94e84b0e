//! `GET /api/v1/pop/queue/:queue[/partition/:partition]`: 200 with messages, or 204.

use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use queen_proto::admin::FailureBody;
use queen_proto::responses::{PopResponse, PoppedMessage};
use queen_proto::time::format_micros;

use super::{consumer_group, partition_name, queue_name};
use crate::app::AppState;
use crate::broker::{PopOutcome, PopRequest, PopTarget};
use crate::config::SubscriptionMode;
use crate::http::body::{query_bool, query_str, query_u64, Query as Params};
use crate::http::error::ApiError;
use crate::http::record_target;

/// Longest accepted long-poll budget (10 minutes); longer requests are clamped.
const MAX_WAIT_MS: u64 = 600_000;

pub async fn pop_queue(
    State(app): State<AppState>,
    Path(queue): Path<String>,
    Query(params): Query<Params>,
) -> Result<Response, ApiError> {
    let target = PopTarget::Queue {
        queue: queue_name(&queue)?,
        partition: None,
    };
    pop(app, target, &params).await
}

pub async fn pop_partition(
    State(app): State<AppState>,
    Path((queue, partition)): Path<(String, String)>,
    Query(params): Query<Params>,
) -> Result<Response, ApiError> {
    let target = PopTarget::Queue {
        queue: queue_name(&queue)?,
        partition: Some(partition_name(&partition)?),
    };
    pop(app, target, &params).await
}

/// `GET /api/v1/pop?namespace=&task=`: a wildcard pop over every queue of a namespace.
pub async fn pop_namespace(
    State(app): State<AppState>,
    Query(params): Query<Params>,
) -> Result<Response, ApiError> {
    let namespace = query_str(&params, "namespace").map(str::to_owned);
    let task = query_str(&params, "task").map(str::to_owned);
    if namespace.is_none() && task.is_none() {
        return Err(ApiError::bad_request("namespace or task is required"));
    }
    pop(app, PopTarget::Namespace { namespace, task }, &params).await
}

async fn pop(app: AppState, target: PopTarget, q: &Params) -> Result<Response, ApiError> {
    let defaults = &app.broker.config().pop;
    let wait = query_bool(q, "wait", false);
    let timeout_ms = query_u64(q, "timeout", defaults.default_timeout.as_millis() as u64);
    let req = PopRequest {
        target,
        group: consumer_group(query_str(q, "consumerGroup"))?,
        batch: query_u64(q, "batch", u64::from(defaults.default_batch)).clamp(1, 10_000) as u32,
        max_partitions: query_u64(q, "partitions", 1).clamp(1, 1_000) as u32,
        wait,
        timeout: Duration::from_millis(if wait { timeout_ms.min(MAX_WAIT_MS) } else { 0 }),
        auto_ack: query_bool(q, "autoAck", false),
        subscription_mode: query_str(q, "subscriptionMode").map_or(
            defaults.default_subscription_mode,
            SubscriptionMode::parse_lenient,
        ),
        subscription_from: query_str(q, "subscriptionFrom").map(str::to_owned),
    };
    if let PopTarget::Queue { queue, partition } = &req.target {
        record_target(
            Some(queue.as_str()),
            partition.as_ref().map(|p| p.as_str()),
            Some(req.group.as_str()),
        );
    }
    match app.broker.pop(&req).await? {
        PopOutcome::Empty => Ok(StatusCode::NO_CONTENT.into_response()),
        // logged by the broker, once per attempt
        PopOutcome::Failed(_) => Ok(Json(FailureBody::new("Database unavailable")).into_response()),
        PopOutcome::Messages {
            queue,
            messages,
            lease_id,
            partitions_claimed,
        } => {
            let group = req.group.as_str().to_owned();
            let first = &messages[0];
            let (partition, partition_id) =
                (first.partition_name.clone(), first.partition_id.to_string());
            let messages = messages
                .into_iter()
                .map(|m| {
                    // never fails on stored data: the lease is taken already
                    let data = super::dlq::payload_json(m.payload);
                    Ok(PoppedMessage {
                        id: m.message_id.to_string(),
                        transaction_id: m.transaction_id,
                        trace_id: m.trace_id.map(|t| t.to_string()),
                        data,
                        producer_sub: m.producer_sub,
                        created_at: format_micros(m.created_at),
                        partition_id: m.partition_id.to_string(),
                        partition: m.partition_name,
                        lease_id: lease_id.clone(),
                        consumer_group: group.clone(),
                        queue: queue.clone(),
                    })
                })
                .collect::<Result<Vec<_>, ApiError>>()?;
            Ok(Json(PopResponse {
                success: true,
                queue,
                partition,
                partition_id,
                lease_id,
                consumer_group: group,
                partitions_claimed,
                messages,
            })
            .into_response())
        }
    }
}
