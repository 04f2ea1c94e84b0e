//! `/streams/v1/*`: the server side of the official streaming SDK.
//!
//! Three POST routes with JSON bodies: `queries` (register), `state/get`
//! and `cycle`. Every refusal is a 4xx with `{success:false, error, code}`
//! and writes nothing; see docs/http-api.md, "Streams".

use std::collections::HashSet;

use axum::body::Body;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use uuid::Uuid;

use super::{consumer_group, queue_name};
use crate::app::AppState;
use crate::broker::CycleRequest;
use crate::http::auth::Caller;
use crate::http::body::{parse_object, read_bytes};
use crate::http::error::ApiError;
use crate::http::record_target;
use crate::store::{
    AppendStatus, CycleAck, CycleRefusal, Registration, StateFilter, StateMiss, StateOp,
};

/// Largest state value, as JSON text.
pub const MAX_STATE_VALUE_BYTES: usize = 1024 * 1024;
/// Longest state key, in bytes.
pub const MAX_STATE_KEY_BYTES: usize = 1024;
/// Most state operations, and most push items, in one cycle.
pub const MAX_CYCLE_ITEMS: usize = 10_000;
/// Longest query name and config hash, in characters.
const MAX_NAME_CHARS: usize = 255;
const MAX_HASH_CHARS: usize = 512;

/// A refusal of a streams route.
#[derive(Debug)]
pub struct StreamsError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl StreamsError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    fn bad(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }
}

impl From<ApiError> for StreamsError {
    fn from(e: ApiError) -> Self {
        let code = match e.status {
            StatusCode::BAD_REQUEST => "invalid_request",
            StatusCode::PAYLOAD_TOO_LARGE => "too_large",
            StatusCode::SERVICE_UNAVAILABLE => "unavailable",
            _ => "internal",
        };
        Self::new(e.status, code, e.message)
    }
}

impl From<crate::broker::BrokerError> for StreamsError {
    fn from(e: crate::broker::BrokerError) -> Self {
        ApiError::from(e).into()
    }
}

impl IntoResponse for StreamsError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(json!({ "success": false, "error": self.message, "code": self.code })),
        )
            .into_response()
    }
}

type Body_ = Map<String, Value>;

async fn read_body(app: &AppState, body: Body) -> Result<Body_, StreamsError> {
    let bytes = read_bytes(body, app.broker.config().max_body_bytes).await?;
    Ok(parse_object(&bytes)?)
}

/// A required non-empty string field.
fn req_str<'a>(map: &'a Body_, key: &str) -> Result<&'a str, StreamsError> {
    match map.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        None | Some(Value::Null) => Err(StreamsError::bad(format!("{key} is required"))),
        Some(Value::String(_)) => Err(StreamsError::bad(format!("{key} must not be empty"))),
        Some(_) => Err(StreamsError::bad(format!("{key} must be a string"))),
    }
}

fn opt_bool(map: &Body_, key: &str, default: bool) -> Result<bool, StreamsError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(StreamsError::bad(format!("{key} must be a boolean"))),
    }
}

fn req_uuid(map: &Body_, key: &str) -> Result<Uuid, StreamsError> {
    Uuid::parse_str(req_str(map, key)?)
        .map_err(|_| StreamsError::bad(format!("{key} must be a valid UUID")))
}

/// `POST /streams/v1/queries`.
pub async fn register(
    State(app): State<AppState>,
    body: Body,
) -> Result<Json<Value>, StreamsError> {
    let map = read_body(&app, body).await?;
    let name = req_str(&map, "name")?;
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(StreamsError::bad(format!(
            "name must be at most {MAX_NAME_CHARS} characters"
        )));
    }
    let source = queue_name(req_str(&map, "source_queue")?)?;
    let hash = req_str(&map, "config_hash")?;
    if hash.chars().count() > MAX_HASH_CHARS {
        return Err(StreamsError::bad(format!(
            "config_hash must be at most {MAX_HASH_CHARS} characters"
        )));
    }
    let sink = match map.get("sink_queue") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => Some(queue_name(s)?),
        Some(_) => return Err(StreamsError::bad("sink_queue must be a string")),
    };
    let reset = opt_bool(&map, "reset", false)?;
    record_target(Some(source.as_str()), None, None);
    match app
        .broker
        .register_stream(
            name,
            source.as_str(),
            sink.as_ref().map(|s| s.as_str()),
            hash,
            reset,
        )
        .await?
    {
        Registration::Done {
            query,
            fresh,
            reset,
            ..
        } => Ok(Json(json!({
            "success": true,
            "query_id": query.id.to_string(),
            "name": query.name,
            "config_hash": query.config_hash,
            "fresh": fresh,
            "reset": reset,
        }))),
        Registration::HashMismatch { query } => Err(StreamsError::new(
            StatusCode::CONFLICT,
            "config_hash_mismatch",
            format!(
                "config_hash mismatch for query {}; retry with reset:true",
                query.name
            ),
        )),
    }
}

/// `POST /streams/v1/state/get`.
pub async fn state_get(
    State(app): State<AppState>,
    body: Body,
) -> Result<Json<Value>, StreamsError> {
    let map = read_body(&app, body).await?;
    let query_id = req_uuid(&map, "query_id")?;
    let partition_id = req_uuid(&map, "partition_id")?;
    let keys = match map.get("keys") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|k| {
                k.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| StreamsError::bad("keys must be an array of strings"))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(StreamsError::bad("keys must be an array of strings")),
    };
    let key_prefix = match map.get("key_prefix") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(StreamsError::bad("key_prefix must be a string")),
    };
    let ripe = match map.get("ripe_at_or_before") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => n.as_f64(),
        Some(_) => return Err(StreamsError::bad("ripe_at_or_before must be a number")),
    };
    let filter = StateFilter {
        keys,
        key_prefix,
        ripe_at_or_before: ripe,
    };
    match app
        .broker
        .stream_state(query_id, partition_id, &filter)
        .await?
    {
        Ok(rows) => {
            let mut out = Vec::with_capacity(rows.len());
            for r in rows {
                let value = RawValue::from_string(r.value)
                    .map_err(|e| StreamsError::bad(format!("stored value unreadable: {e}")))?;
                out.push(json!({ "key": r.key, "value": value, "updated_at": r.updated_at }));
            }
            Ok(Json(json!({ "success": true, "rows": out })))
        }
        Err(miss) => Err(state_miss(miss)),
    }
}

fn state_miss(miss: StateMiss) -> StreamsError {
    match miss {
        StateMiss::UnknownQuery => {
            StreamsError::new(StatusCode::NOT_FOUND, "unknown_query", "query not found")
        }
        StateMiss::UnknownPartition => StreamsError::new(
            StatusCode::NOT_FOUND,
            "unknown_partition",
            "partition not found in the query's source queue",
        ),
    }
}

fn parse_state_ops(map: &Body_) -> Result<Vec<StateOp>, StreamsError> {
    let ops = match map.get("state_ops") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(a)) => a,
        Some(_) => return Err(StreamsError::bad("state_ops must be an array")),
    };
    if ops.len() > MAX_CYCLE_ITEMS {
        return Err(StreamsError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!("at most {MAX_CYCLE_ITEMS} state_ops per cycle"),
        ));
    }
    ops.iter()
        .enumerate()
        .map(|(i, op)| {
            let op = op
                .as_object()
                .ok_or_else(|| StreamsError::bad(format!("state_ops[{i}] must be an object")))?;
            let key = match op.get("key") {
                Some(Value::String(k)) if !k.is_empty() => k.clone(),
                _ => {
                    return Err(StreamsError::bad(format!(
                        "state_ops[{i}].key must be a non-empty string"
                    )))
                }
            };
            if key.len() > MAX_STATE_KEY_BYTES {
                return Err(StreamsError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "too_large",
                    format!("state_ops[{i}].key is over {MAX_STATE_KEY_BYTES} bytes"),
                ));
            }
            if key.contains('\0') {
                return Err(StreamsError::bad(format!(
                    "state_ops[{i}].key must not contain NUL"
                )));
            }
            match op.get("type").and_then(Value::as_str) {
                Some("upsert") => {
                    let value = op.get("value").ok_or_else(|| {
                        StreamsError::bad(format!("state_ops[{i}].value is required for upsert"))
                    })?;
                    let text = value.to_string();
                    if text.len() > MAX_STATE_VALUE_BYTES {
                        return Err(StreamsError::new(
                            StatusCode::PAYLOAD_TOO_LARGE,
                            "too_large",
                            format!("state_ops[{i}].value is over {MAX_STATE_VALUE_BYTES} bytes"),
                        ));
                    }
                    if text.contains("\\u0000") {
                        // jsonb cannot store NUL characters
                        return Err(StreamsError::bad(format!(
                            "state_ops[{i}].value must not contain NUL characters"
                        )));
                    }
                    Ok(StateOp {
                        key,
                        value: Some(text),
                    })
                }
                Some("delete") => Ok(StateOp { key, value: None }),
                _ => Err(StreamsError::bad(format!(
                    "state_ops[{i}].type must be \"upsert\" or \"delete\""
                ))),
            }
        })
        .collect()
}

fn parse_ack(map: &Body_) -> Result<Option<(CycleAck, Option<u64>)>, StreamsError> {
    let ack = match map.get("ack") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(o)) => o,
        Some(_) => return Err(StreamsError::bad("ack must be an object or null")),
    };
    let transaction_id = req_str(ack, "transactionId")
        .map_err(|e| StreamsError::bad(format!("ack.{}", e.message)))?
        .to_owned();
    let lease_id =
        req_uuid(ack, "leaseId").map_err(|e| StreamsError::bad(format!("ack.{}", e.message)))?;
    match ack.get("status") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s == "completed" || s == "success" => {}
        Some(_) => {
            return Err(StreamsError::bad(
                "ack.status must be \"completed\" (a cycle only acknowledges processed messages)",
            ))
        }
    }
    let count = match ack.get("count") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => match n.as_u64() {
            Some(c) if c > 0 => Some(c),
            _ => return Err(StreamsError::bad("ack.count must be a positive integer")),
        },
        Some(_) => return Err(StreamsError::bad("ack.count must be a positive integer")),
    };
    let group = match map.get("consumer_group") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.as_str()),
        Some(_) => return Err(StreamsError::bad("consumer_group must be a string")),
    };
    let group = consumer_group(group)?;
    Ok(Some((
        CycleAck {
            group: group.as_str().to_owned(),
            transaction_id,
            lease_id,
            count,
        },
        count,
    )))
}

/// `POST /streams/v1/cycle`.
pub async fn cycle(
    State(app): State<AppState>,
    caller: Option<Extension<Caller>>,
    body: Body,
) -> Result<Json<Value>, StreamsError> {
    let map = read_body(&app, body).await?;
    let query_id = req_uuid(&map, "query_id")?;
    let partition_id = req_uuid(&map, "partition_id")?;
    let state_ops = parse_state_ops(&map)?;
    let push_items = match map.get("push_items") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => {
            if a.len() > MAX_CYCLE_ITEMS {
                return Err(StreamsError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "too_large",
                    format!("at most {MAX_CYCLE_ITEMS} push_items per cycle"),
                ));
            }
            let raw = RawValue::from_string(Value::Array(a.clone()).to_string())
                .map_err(|e| StreamsError::bad(format!("Invalid JSON: {e}")))?;
            let depth = app.broker.config().limits.max_payload_depth;
            let mut items = super::push::parse_items(&raw, "{}", depth)
                .map_err(|e| StreamsError::bad(format!("push_items: {}", e.message)))?;
            super::push::stamp_producer(&mut items, caller.as_ref().map(|e| &e.0));
            let mut seen = HashSet::new();
            for item in &items {
                if let Some(t) = &item.transaction_id {
                    if !seen.insert((item.queue.as_str(), item.partition.as_str(), t.as_str())) {
                        return Err(StreamsError::bad(format!(
                            "push_items repeat transactionId {t} for one partition"
                        )));
                    }
                }
            }
            items
        }
        Some(_) => return Err(StreamsError::bad("push_items must be an array")),
    };
    let ack = parse_ack(&map)?;
    let release_lease = opt_bool(&map, "release_lease", true)?;
    let count = ack.as_ref().and_then(|(_, c)| *c);
    let req = CycleRequest {
        query_id,
        partition_id,
        state_ops,
        push_items,
        ack: ack.map(|(a, _)| a),
        release_lease,
    };
    let done = match app.broker.stream_cycle(req).await? {
        Ok(done) => done,
        Err(refusal) => return Err(cycle_refusal(refusal)),
    };
    record_target(Some(done.outcome.source_queue.as_str()), None, None);
    let push_results: Vec<Value> = done
        .outcome
        .pushed
        .iter()
        .zip(&done.pushes)
        .map(|(p, (queue, txn))| {
            json!({
                "queueName": queue,
                "messageId": p.message_id.to_string(),
                "transactionId": txn,
                "status": match p.status {
                    AppendStatus::Queued => "created",
                    AppendStatus::Duplicate => "duplicate",
                    // sink pushes are not held to a maxSize, so none is refused
                    AppendStatus::Full(_) => "failed",
                },
            })
        })
        .collect();
    let ack_result = done.outcome.acked.as_ref().map(|a| {
        json!({
            "success": true,
            "count": count,
            "lease_released": a.lease_released,
            "dlq": false,
        })
    });
    Ok(Json(json!({
        "success": true,
        "query_id": query_id.to_string(),
        "partition_id": partition_id.to_string(),
        "queueName": done.outcome.source_queue,
        "state_ops_applied": done.outcome.state_ops_applied,
        "push_results": push_results,
        "ack_result": ack_result,
    })))
}

fn cycle_refusal(r: CycleRefusal) -> StreamsError {
    match r {
        CycleRefusal::UnknownQuery => state_miss(StateMiss::UnknownQuery),
        CycleRefusal::UnknownPartition => state_miss(StateMiss::UnknownPartition),
        CycleRefusal::MessageNotFound => StreamsError::new(
            StatusCode::BAD_REQUEST,
            "message_not_found",
            "ack.transactionId names no message of the partition",
        ),
        CycleRefusal::AlreadyAcknowledged => StreamsError::new(
            StatusCode::CONFLICT,
            "already_acknowledged",
            "the acked message is already acknowledged for the group: cycle not applied",
        ),
        CycleRefusal::StaleLease => StreamsError::new(
            StatusCode::CONFLICT,
            "stale_lease",
            "Invalid or expired lease: the cycle does not hold the partition's lease",
        ),
        CycleRefusal::MissingKey(k) => StreamsError::new(
            StatusCode::CONFLICT,
            "state_conflict",
            format!("state key {k:?} holds no state (already emitted?): cycle not applied"),
        ),
    }
}

/// `GET /api/v1/streams/queries`: the registered queries for the dashboard.
pub async fn list(State(app): State<AppState>) -> Result<Json<Value>, StreamsError> {
    let queries: Vec<Value> = app
        .broker
        .stream_queries()
        .await?
        .into_iter()
        .map(|q| {
            json!({
                "id": q.query.id.to_string(),
                "name": q.query.name,
                "sourceQueue": q.query.source_queue,
                "sinkQueue": q.query.sink_queue,
                "configHash": q.query.config_hash,
                "consumerGroup": format!("streams.{}", q.query.name),
                "stateRows": q.state_rows,
                "lag": q.lag,
            })
        })
        .collect();
    Ok(Json(json!({ "queries": queries })))
}
