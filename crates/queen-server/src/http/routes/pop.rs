//! `GET /api/v1/pop/queue/:queue[/partition/:partition]`: 200 with messages, or 204.

use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use queen_proto::admin::FailureBody;
use queen_proto::responses::{PopEcho, PopResponse, PoppedMessage};
use queen_proto::time::format_micros;

use super::{consumer_group, partition_name, queue_name};
use crate::app::AppState;
use crate::broker::{PopOutcome, PopRequest, PopTarget};
use crate::config::SubscriptionMode;
use crate::http::body::{query_bool, query_str, query_u64, Query as Params};
use crate::http::error::ApiError;
use crate::http::record_target;
use crate::store::ClaimedMessage;

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

/// A knob the client named: absent, unparsable or 0 leave it to the broker.
fn knob(q: &Params, key: &str, max: u64) -> Option<u32> {
    match query_u64(q, key, 0) {
        0 => None,
        n => Some(n.min(max) as u32),
    }
}

/// The `400` of a conflating pop the broker refuses, in the shape the
/// 2.6.0 client expects: `{"success":false,"error":…,"messages":[]}`.
fn conflation_refused(error: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(serde_json::json!({ "success": false, "error": error, "messages": [] })),
    )
        .into_response()
}

async fn pop(app: AppState, target: PopTarget, q: &Params) -> Result<Response, ApiError> {
    let defaults = &app.broker.config().pop;
    let wait = query_bool(q, "wait", false);
    let timeout_ms = query_u64(q, "timeout", defaults.default_timeout.as_millis() as u64);
    let conflation = query_bool(q, "conflation", false);
    let auto_ack = query_bool(q, "autoAck", false);
    let group = consumer_group(query_str(q, "consumerGroup"))?;
    if conflation {
        // checked before anything else (client-dataplane-2.6.md, section 2.3)
        if group.as_str() == queen_proto::names::QUEUE_MODE {
            return Ok(conflation_refused(
                "conflation=true requires a consumerGroup: last-value delivery is a property of a consumer group",
            ));
        }
        if auto_ack || query_bool(q, "commitOnDelivery", false) {
            return Ok(conflation_refused(
                "conflation=true cannot be combined with autoAck=true (commitOnDelivery): a conflating delivery is committed by its ack",
            ));
        }
    }
    let req = PopRequest {
        target,
        group,
        batch: knob(q, "batch", 10_000),
        max_partitions: knob(q, "partitions", 1_000),
        autopilot: query_bool(q, "autopilot", false),
        conflation,
        wait,
        timeout: Duration::from_millis(if wait { timeout_ms.min(MAX_WAIT_MS) } else { 0 }),
        auto_ack,
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
        PopOutcome::Empty(echo) if echo.is_empty() => Ok(StatusCode::NO_CONTENT.into_response()),
        // an empty answer that must say how it was served is a 200 with a body
        PopOutcome::Empty(echo) => {
            let mut body = Vec::with_capacity(128);
            echo.write_empty(&mut body);
            Ok(json_body(body))
        }
        // logged by the broker, once per attempt
        PopOutcome::Failed(_) => Ok(Json(FailureBody::new("Database unavailable")).into_response()),
        PopOutcome::Messages {
            queue,
            messages,
            lease_id,
            partitions_claimed,
            echo,
        } => Ok(answer(
            &queue,
            req.group.as_str(),
            &lease_id,
            partitions_claimed,
            &messages,
            echo,
        )),
    }
}

/// The 200 answer of a pop: written straight from the claimed messages
/// (borrowed, nothing copied first) into a buffer sized for it up front.
/// `messages` is not empty.
fn answer(
    queue: &str,
    group: &str,
    lease_id: &str,
    partitions_claimed: usize,
    messages: &[ClaimedMessage],
    echo: PopEcho,
) -> Response {
    // the messages of one segment share their createdAt: formatted once per run
    let mut stamps: Vec<(DateTime<Utc>, String)> = Vec::new();
    for m in messages {
        if stamps.last().is_none_or(|(t, _)| *t != m.created_at) {
            stamps.push((m.created_at, format_micros(m.created_at)));
        }
    }
    let mut stamp = 0;
    let mut size = 256 + queue.len() + group.len() + lease_id.len();
    let popped: Vec<PoppedMessage<'_>> = messages
        .iter()
        .map(|m| {
            if stamps[stamp].0 != m.created_at {
                stamp += 1;
            }
            size += MESSAGE_OVERHEAD
                + m.payload.len()
                + m.transaction_id.len()
                + m.producer_sub.as_ref().map_or(0, String::len)
                + m.partition_name.len()
                + lease_id.len()
                + group.len()
                + queue.len();
            PoppedMessage {
                id: m.message_id,
                transaction_id: &m.transaction_id,
                trace_id: m.trace_id,
                // never fails on stored data: the lease is taken already
                data: super::dlq::payload_raw(&m.payload),
                producer_sub: m.producer_sub.as_deref(),
                created_at: &stamps[stamp].1,
                partition_id: m.partition_id,
                partition: &m.partition_name,
                lease_id,
                consumer_group: group,
                queue,
                delivery_attempt: m.attempt,
            }
        })
        .collect();
    let first = &messages[0];
    let mut body = Vec::with_capacity(size);
    PopResponse {
        success: true,
        queue,
        partition: &first.partition_name,
        partition_id: first.partition_id,
        lease_id,
        consumer_group: group,
        partitions_claimed,
        messages: popped,
        echo,
    }
    .write_json(&mut body);
    json_body(body)
}

/// Bytes of a popped message besides its strings: the keys, quotes and
/// commas, three UUIDs, a trace id, a timestamp and the delivery attempt
/// (about 355), rounded up so that escapes rarely make the buffer grow.
const MESSAGE_OVERHEAD: usize = 400;

/// A 200 answer of JSON text, with the `content-type` `axum::Json` gives.
pub(super) fn json_body(body: Vec<u8>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        Bytes::from(body),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use axum::body::to_bytes;
    use serde_json::value::RawValue;
    use uuid::Uuid;

    use serde::Serialize;

    use super::*;

    /// A popped message as it was built before the answer borrowed.
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct OwnedMessage {
        id: String,
        transaction_id: String,
        trace_id: Option<String>,
        data: Box<RawValue>,
        producer_sub: Option<String>,
        created_at: String,
        partition_id: String,
        partition: String,
        lease_id: String,
        consumer_group: String,
        queue: String,
        delivery_attempt: i32,
    }

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct OwnedResponse {
        success: bool,
        queue: String,
        partition: String,
        partition_id: String,
        lease_id: String,
        consumer_group: String,
        partitions_claimed: usize,
        messages: Vec<OwnedMessage>,
    }

    /// The answer the way it was built before: owned strings, `payload_json`.
    fn owned(
        queue: &str,
        group: &str,
        lease_id: &str,
        claimed: usize,
        messages: &[ClaimedMessage],
    ) -> Response {
        let first = &messages[0];
        Json(OwnedResponse {
            success: true,
            queue: queue.to_owned(),
            partition: first.partition_name.clone(),
            partition_id: first.partition_id.to_string(),
            lease_id: lease_id.to_owned(),
            consumer_group: group.to_owned(),
            partitions_claimed: claimed,
            messages: messages
                .iter()
                .map(|m| OwnedMessage {
                    id: m.message_id.to_string(),
                    transaction_id: m.transaction_id.clone(),
                    trace_id: m.trace_id.map(|t| t.to_string()),
                    data: super::super::dlq::payload_json(m.payload.clone()),
                    producer_sub: m.producer_sub.clone(),
                    created_at: format_micros(m.created_at),
                    partition_id: m.partition_id.to_string(),
                    partition: m.partition_name.clone(),
                    lease_id: lease_id.to_owned(),
                    consumer_group: group.to_owned(),
                    queue: queue.to_owned(),
                    delivery_attempt: m.attempt,
                })
                .collect(),
        })
        .into_response()
    }

    fn message(
        partition: &str,
        offset: i64,
        transaction_id: &str,
        payload: &str,
        micros: i64,
    ) -> ClaimedMessage {
        ClaimedMessage {
            partition_id: Uuid::from_u128(0x0190_a1b2_c3d4_7e5f_8a9b_0c1d_2e3f_4a5b),
            partition_name: partition.to_owned(),
            offset,
            message_id: Uuid::now_v7(),
            transaction_id: transaction_id.to_owned(),
            trace_id: (offset % 2 == 0).then(Uuid::now_v7),
            payload: payload.to_owned(),
            producer_sub: (offset % 3 == 0).then(|| format!("svc-{offset}\"é")),
            created_at: DateTime::from_timestamp_micros(micros).unwrap(),
            attempt: 1 + (offset % 4) as i32,
        }
    }

    #[tokio::test]
    async fn the_answer_is_byte_for_byte_what_it_was() {
        let payloads = [
            r#"{"i":1,"pad":"xxxx"}"#,
            "  [1, \"two\", null]\n",
            "not json",
            "\"a \\u0000 string\"",
            "12.50",
            r#"{"nested":{"k":[true,false,{}]},"u":"é\u2028"}"#,
            "",
        ];
        // three segments (createdAt runs), one of them before 1970
        let stamps = [
            1_764_000_000_123_456,
            1_764_000_000_123_456,
            -86_400_000_001,
        ];
        let messages: Vec<ClaimedMessage> = (0..21)
            .map(|i| {
                let txn = if i == 4 {
                    "q\"uote\\back\ttab é".to_owned()
                } else {
                    format!("t-{i}")
                };
                message(
                    "cust/42 \"é\"",
                    i,
                    &txn,
                    payloads[i as usize % payloads.len()],
                    stamps[i as usize / 7] + i,
                )
            })
            .collect();
        for (group, lease) in [
            ("__QUEUE_MODE__", Uuid::now_v7().to_string()),
            ("workers \"a\"", String::new()),
        ] {
            for queue in ["orders", "billing.invoice\\x"] {
                for n in [1, 7, messages.len()] {
                    let before = owned(queue, group, &lease, 3, &messages[..n]);
                    let after = answer(queue, group, &lease, 3, &messages[..n], PopEcho::default());
                    assert_eq!(before.status(), after.status());
                    assert_eq!(before.headers(), after.headers());
                    let before = to_bytes(before.into_body(), usize::MAX).await.unwrap();
                    let after = to_bytes(after.into_body(), usize::MAX).await.unwrap();
                    assert_eq!(
                        String::from_utf8_lossy(&before),
                        String::from_utf8_lossy(&after)
                    );
                }
            }
        }
    }
}
