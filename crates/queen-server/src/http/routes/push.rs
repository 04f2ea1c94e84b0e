//! `POST /api/v1/push`: a bare array of per-item results, status 201 (`queued`,
//! `duplicate`, or `buffered` when the push went to the disk spool). The body
//! is the JSON of http-api.md §3.2 or the binary `QPB1` body of the 2.6
//! clients (`queen_proto::push_binary`), told apart by its magic; its items
//! take the same path from `PushItem` on.

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use axum::Json;
use queen_proto::names::DEFAULT_PARTITION;
use queen_proto::push_binary::{self, Kind, Limits};
use queen_proto::responses::PushResult;
use serde::Deserialize;
use serde_json::value::RawValue;
use uuid::Uuid;

use super::{partition_name, queue_name};
use crate::app::AppState;
use crate::broker::{PushItem, PushOutcome};
use crate::http::auth::Caller;
use crate::http::body::read_bytes;
use crate::http::error::ApiError;
use crate::http::limits::{check_payload, nul_error};
use crate::http::record_target;

#[derive(Deserialize)]
struct PushBody<'a> {
    #[serde(borrow, default)]
    items: Option<&'a RawValue>,
}

/// A push item with every field still raw, so that type errors get the
/// contract's messages and payloads are kept byte for byte.
#[derive(Deserialize)]
struct RawItem<'a> {
    #[serde(borrow, default)]
    queue: Option<&'a RawValue>,
    #[serde(borrow, default)]
    partition: Option<&'a RawValue>,
    #[serde(borrow, default)]
    payload: Option<&'a RawValue>,
    #[serde(borrow, default)]
    data: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "transactionId")]
    transaction_id: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "traceId")]
    trace_id: Option<&'a RawValue>,
}

fn raw_string(raw: Option<&RawValue>, message: &str) -> Result<Option<String>, ApiError> {
    match raw {
        None => Ok(None),
        Some(r) => serde_json::from_str::<Option<String>>(r.get())
            .map_err(|_| ApiError::bad_request(message)),
    }
}

/// Parses the `items` array of a push (also used by `/transaction` push operations).
/// `absent_payload` is the JSON text stored when an item has no payload.
/// Payloads deeper than `max_depth`, or that a strict JSON parser refuses, are
/// refused (`limits::check_payload`).
pub fn parse_items(
    items: &RawValue,
    absent_payload: &str,
    max_depth: usize,
) -> Result<Vec<PushItem>, ApiError> {
    let raw_items: Vec<&RawValue> = serde_json::from_str(items.get())
        .map_err(|_| ApiError::bad_request("items array is required"))?;
    raw_items
        .into_iter()
        .enumerate()
        .map(|(i, raw)| {
            parse_item(raw, absent_payload, max_depth).map_err(|mut e| {
                if !e.message.starts_with("items[") && e.message.starts_with("payload") {
                    e.message = format!("items[{i}].{}", e.message);
                }
                e
            })
        })
        .collect()
}

fn parse_item(
    raw: &RawValue,
    absent_payload: &str,
    max_depth: usize,
) -> Result<PushItem, ApiError> {
    let item: RawItem<'_> = serde_json::from_str(raw.get())
        .map_err(|_| ApiError::bad_request("Each item must be an object"))?;
    let queue = raw_string(item.queue, "Queue must be a string")?
        .ok_or_else(|| ApiError::bad_request("Queue must be a string"))?;
    let queue = queue_name(&queue)?;
    let partition = raw_string(item.partition, "Partition must be a string")?
        .unwrap_or_else(|| DEFAULT_PARTITION.to_owned());
    let partition = partition_name(&partition)?;
    let transaction_id = raw_string(item.transaction_id, "TransactionId must be a string")?
        .filter(|t| !t.is_empty());
    if transaction_id.as_deref().is_some_and(|t| t.contains('\0')) {
        return Err(nul_error("transactionId"));
    }
    if transaction_id
        .as_deref()
        .is_some_and(queen_proto::names::transaction_id_has_dot_segment)
    {
        return Err(ApiError::bad_request(format!(
            "transactionId {}",
            queen_proto::names::PathProblem::DotSegment
        )));
    }
    if transaction_id
        .as_ref()
        .is_some_and(|t| t.chars().count() > 255)
    {
        return Err(ApiError::bad_request(
            "TransactionId must be at most 255 characters",
        ));
    }
    let trace_id = match raw_string(item.trace_id, "TraceId must be a string")?.as_deref() {
        None | Some("") => None,
        Some(t) => Some(
            Uuid::parse_str(t)
                .map_err(|_| ApiError::bad_request("TraceId must be a valid UUID"))?,
        ),
    };
    let payload = match item.payload.or(item.data) {
        None => absent_payload.to_owned(),
        Some(p) => {
            check_payload(p.get(), max_depth)?;
            p.get().to_owned()
        }
    };
    Ok(PushItem {
        queue,
        partition,
        payload,
        transaction_id,
        trace_id,
        producer_sub: None,
        message_id: None,
    })
}

/// The answer to a push or transaction with more entries than allowed (413).
pub fn too_many(what: &str, n: usize, max: usize) -> ApiError {
    ApiError {
        status: StatusCode::PAYLOAD_TOO_LARGE,
        message: format!("Too many {what}: {n} (limit {max} per request)"),
    }
}

/// With authentication on, every message carries the token's `sub` as its
/// `producerSub`; whatever the client sent is ignored (http-api.md §1.7).
pub fn stamp_producer(items: &mut [PushItem], caller: Option<&Caller>) {
    let sub = caller.and_then(|c| c.subject.clone());
    for item in items {
        item.producer_sub.clone_from(&sub);
    }
}

/// The binary body `bytes` announces by its magic, if any. A body sent as
/// `application/x-queen-push` without a known magic is refused.
pub(super) fn binary_kind(headers: &HeaderMap, bytes: &[u8]) -> Result<Option<Kind>, ApiError> {
    match push_binary::kind(bytes) {
        Some(kind) => Ok(Some(kind)),
        None if headers.get(header::CONTENT_TYPE).is_some_and(|v| {
            v.as_bytes()
                .starts_with(push_binary::CONTENT_TYPE.as_bytes())
        }) =>
        {
            Err(ApiError::bad_request(format!(
                "a {} body must start with QPB1 (push) or QTB1 (transaction)",
                push_binary::CONTENT_TYPE
            )))
        }
        None => Ok(None),
    }
}

/// What one binary body may cost: zstd output within the push body limit,
/// payloads as deep as JSON ones, at most `max_items` items.
pub(super) fn binary_limits(app: &AppState, max_items: usize) -> Limits {
    Limits {
        max_decoded_bytes: app.broker.config().max_body_bytes,
        max_payload_depth: app.broker.config().limits.max_payload_depth,
        max_items,
    }
}

/// The decoded items of a binary body as push items: the same validated
/// names, transaction ids and payloads a JSON item gives, plus the client's
/// message id of the frames form.
pub(super) fn binary_items(items: Vec<push_binary::Item>) -> Vec<PushItem> {
    items
        .into_iter()
        .map(|i| PushItem {
            queue: i.queue,
            partition: i.partition,
            payload: i.payload,
            transaction_id: i.transaction_id,
            trace_id: None,
            producer_sub: None,
            message_id: i.message_id,
        })
        .collect()
}

/// The items of a JSON push body.
fn json_items(bytes: &[u8], max_payload_depth: usize) -> Result<Vec<PushItem>, ApiError> {
    let parsed: PushBody<'_> = serde_json::from_slice(bytes).map_err(|e| {
        if e.is_data() {
            ApiError::bad_request("items array is required")
        } else {
            ApiError::bad_request(format!("Invalid JSON: {e}"))
        }
    })?;
    let items = parsed
        .items
        .ok_or_else(|| ApiError::bad_request("items array is required"))?;
    parse_items(items, "null", max_payload_depth)
}

pub async fn push(
    State(app): State<AppState>,
    caller: Option<Extension<Caller>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let bytes = read_bytes(body, app.broker.config().max_body_bytes).await?;
    let limits = &app.broker.config().limits;
    let (mut items, counts) = match binary_kind(&headers, &bytes)? {
        Some(Kind::Push) => {
            let limits = binary_limits(&app, limits.max_push_items);
            let body = push_binary::decode_push(&bytes, &limits)?;
            (binary_items(body.items), body.counts)
        }
        Some(Kind::Transaction) => {
            return Err(ApiError::bad_request(
                "a QTB1 body is a transaction: POST it to /api/v1/transaction",
            ))
        }
        None => (json_items(&bytes, limits.max_payload_depth)?, false),
    };
    if items.len() > limits.max_push_items {
        return Err(too_many("items", items.len(), limits.max_push_items));
    }
    stamp_producer(&mut items, caller.as_ref().map(|e| &e.0));
    if let Some(first) = items.first() {
        if items.iter().all(|i| i.queue == first.queue) {
            record_target(Some(first.queue.as_str()), None, None);
        }
    }
    let outcomes = app.broker.push(items).await?;
    if counts {
        return Ok((StatusCode::CREATED, Json(push_counts(&outcomes))).into_response());
    }
    let results: Vec<PushResult> = outcomes
        .into_iter()
        .enumerate()
        .map(|(index, o)| match o {
            PushOutcome::Queued {
                transaction_id,
                message_id,
                partition_id,
                trace_id,
                queue,
            } => PushResult::Queued {
                index,
                transaction_id,
                status: "queued",
                message_id: message_id.to_string(),
                partition_id: partition_id.to_string(),
                trace_id: trace_id.map(|t| t.to_string()),
                queue_name: queue,
            },
            PushOutcome::Duplicate {
                transaction_id,
                message_id,
                queue,
            } => PushResult::Duplicate {
                index,
                transaction_id,
                status: "duplicate",
                message_id: message_id.to_string(),
                queue_name: queue,
            },
            PushOutcome::Buffered {
                queue,
                partition,
                transaction_id,
            } => PushResult::Buffered {
                index,
                status: "buffered",
                queue,
                partition,
                transaction_id,
            },
            PushOutcome::Failed {
                queue,
                partition,
                transaction_id,
                error,
            } => PushResult::Failed {
                index,
                status: "failed",
                queue,
                partition,
                transaction_id,
                error,
            },
        })
        .collect();
    Ok((StatusCode::CREATED, Json(results)).into_response())
}

/// The counts answer of a binary push with flag 2 (client-dataplane-2.6
/// §3.3). An item in the disk spool counts as queued: it is durable and
/// will be written. An item a queue's `maxSize` refused counts as `error`.
fn push_counts(outcomes: &[PushOutcome]) -> serde_json::Value {
    let count = |f: fn(&PushOutcome) -> bool| outcomes.iter().filter(|o| f(o)).count();
    let duplicate = count(|o| matches!(o, PushOutcome::Duplicate { .. }));
    let error = count(|o| matches!(o, PushOutcome::Failed { .. }));
    serde_json::json!({
        "count": outcomes.len(),
        "queued": outcomes.len() - duplicate - error,
        "duplicate": duplicate,
        "error": error,
    })
}
