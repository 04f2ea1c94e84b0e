//! Reads that move nothing (issue 21): `POST /api/v1/fetch` (records by
//! offset), `POST /api/v1/partitions/changed` (partition discovery with a
//! safe time), `GET /api/v1/resources/queues/{queue}/depth`, and
//! `POST /api/v1/messages/{partitionId}/{transactionId}/retry` (a dead letter
//! back to the tail of its partition). Wire offsets start at 0 for a
//! partition's first message.

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::{DateTime, TimeZone, Utc};
use queen_proto::names::DEFAULT_PARTITION;
use queen_proto::time::{format_micros, parse_timestamp};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use super::{consumer_group, partition_name, queue_name};
use crate::app::AppState;
use crate::http::body::{parse_object, path_uuid, query_str, read_bytes, Query as Params};
use crate::http::coded::error_with;
use crate::http::error::ApiError;
use crate::http::record_target;
use crate::store::{ChangedAfter, FetchEntry, RetryOutcome};

/// Entries one fetch or discovery call may carry.
const MAX_ENTRIES: usize = 1024;
/// Per-entry byte budget of a fetch: default and ceiling.
const DEFAULT_ENTRY_BYTES: i64 = 1024 * 1024;
const MAX_ENTRY_BYTES: i64 = 8 * 1024 * 1024;
/// Partitions per discovery page: default and ceiling.
const MAX_PAGE: i64 = 1000;

const OFFSET_OUT_OF_RANGE: &str = "OFFSET_OUT_OF_RANGE";
const UNKNOWN_TOPIC_OR_PARTITION: &str = "UNKNOWN_TOPIC_OR_PARTITION";

fn entries_of(body: &Map<String, Value>) -> Result<&Vec<Value>, ApiError> {
    let Some(Value::Array(entries)) = body.get("entries") else {
        return Err(ApiError::bad_request("entries must be an array"));
    };
    if entries.len() > MAX_ENTRIES {
        return Err(ApiError::bad_request(format!(
            "too many entries (at most {MAX_ENTRIES} per call)"
        )));
    }
    Ok(entries)
}

/// A non-negative integer field; absent or null gives `default`.
fn opt_count(map: &Map<String, Value>, key: &str, default: i64) -> Result<i64, ApiError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Number(n)) => match n.as_i64() {
            Some(v) if v >= 0 => Ok(v),
            _ => Err(ApiError::bad_request(format!(
                "{key} must be a non-negative integer"
            ))),
        },
        Some(_) => Err(ApiError::bad_request(format!(
            "{key} must be a non-negative integer"
        ))),
    }
}

/// The partition of an entry: a name, a number (its decimal name), or absent
/// (`Default`).
fn entry_partition(map: &Map<String, Value>) -> Result<String, ApiError> {
    match map.get("partition") {
        None | Some(Value::Null) => Ok(DEFAULT_PARTITION.to_owned()),
        Some(Value::String(s)) => Ok(partition_name(s)?.as_str().to_owned()),
        Some(Value::Number(n)) if n.is_u64() => {
            Ok(partition_name(&n.to_string())?.as_str().to_owned())
        }
        Some(_) => Err(ApiError::bad_request(
            "partition must be a string or a non-negative integer",
        )),
    }
}

fn entry_queue(map: &Map<String, Value>) -> Result<String, ApiError> {
    match map.get("queue") {
        Some(Value::String(s)) => Ok(queue_name(s)?.as_str().to_owned()),
        _ => Err(ApiError::bad_request(
            "every entry needs a queue (a string)",
        )),
    }
}

#[derive(Serialize)]
struct FetchAnswer {
    entries: Vec<FetchAnswerEntry>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FetchAnswerEntry {
    queue: String,
    partition: String,
    records: Vec<FetchAnswerRecord>,
    high_watermark: i64,
    log_start_offset: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'static str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FetchAnswerRecord {
    offset: i64,
    transaction_id: String,
    payload: Box<RawValue>,
    ts: String,
}

fn raw_payload(text: String) -> Box<RawValue> {
    if text.is_empty() {
        return RawValue::from_string("null".to_owned()).expect("null is JSON");
    }
    RawValue::from_string(text)
        .unwrap_or_else(|_| RawValue::from_string("null".to_owned()).expect("null is JSON"))
}

/// `POST /api/v1/fetch`.
pub async fn fetch(State(app): State<AppState>, body: Body) -> Result<Response, ApiError> {
    let bytes = read_bytes(body, app.broker.config().max_body_bytes).await?;
    let body = parse_object(&bytes)?;
    let entries = entries_of(&body)?;
    // the call's own ceiling, when given, below the broker's
    let call_max = opt_count(&body, "maxBytes", crate::broker::FETCH_CALL_MAX_BYTES)?.max(1);
    opt_count(&body, "maxWaitMs", 0)?;
    opt_count(&body, "minBytes", 0)?;
    let mut asked = Vec::with_capacity(entries.len());
    for e in entries {
        let Value::Object(e) = e else {
            return Err(ApiError::bad_request("every entry must be an object"));
        };
        let offset = match e.get("offset") {
            Some(Value::Number(n)) if n.as_i64().is_some_and(|v| v < 0) => {
                return Err(ApiError::bad_request("offset must not be negative"))
            }
            _ => opt_count(e, "offset", 0)?,
        };
        asked.push(FetchEntry {
            queue: entry_queue(e)?,
            partition: entry_partition(e)?,
            offset,
            max_bytes: opt_count(e, "maxBytes", DEFAULT_ENTRY_BYTES)?.clamp(1, MAX_ENTRY_BYTES),
        });
    }
    let read = app.broker.fetch(&asked, call_max).await?;
    let entries = asked
        .into_iter()
        .zip(read)
        .map(|(a, r)| {
            let error = if r.unknown_queue {
                Some(UNKNOWN_TOPIC_OR_PARTITION)
            } else if a.offset < r.log_start || a.offset > r.high_watermark {
                Some(OFFSET_OUT_OF_RANGE)
            } else {
                None
            };
            FetchAnswerEntry {
                queue: a.queue,
                partition: a.partition,
                records: r
                    .records
                    .into_iter()
                    .map(|rec| FetchAnswerRecord {
                        offset: rec.offset,
                        transaction_id: rec.transaction_id,
                        payload: raw_payload(rec.payload),
                        ts: format_micros(rec.ts),
                    })
                    .collect(),
                high_watermark: r.high_watermark,
                log_start_offset: r.log_start,
                error,
            }
        })
        .collect();
    Ok(Json(FetchAnswer { entries }).into_response())
}

/// A page cursor: `n:<name>` (every partition, by name) or
/// `w:<micros>:<name>` (written since, by last write and name).
fn encode_cursor(after: &ChangedAfter) -> String {
    match after {
        ChangedAfter::Name(n) => format!("n:{n}"),
        ChangedAfter::Written(t, n) => format!("w:{}:{n}", t.timestamp_micros()),
    }
}

fn decode_cursor(s: &str) -> Option<ChangedAfter> {
    if let Some(name) = s.strip_prefix("n:") {
        return Some(ChangedAfter::Name(name.to_owned()));
    }
    let rest = s.strip_prefix("w:")?;
    let (micros, name) = rest.split_once(':')?;
    let t = Utc.timestamp_micros(micros.parse().ok()?).single()?;
    Some(ChangedAfter::Written(t, name.to_owned()))
}

/// `POST /api/v1/partitions/changed`.
pub async fn partitions_changed(
    State(app): State<AppState>,
    body: Body,
) -> Result<Response, ApiError> {
    let bytes = read_bytes(body, app.broker.config().max_body_bytes).await?;
    let body = parse_object(&bytes)?;
    let entries = entries_of(&body)?;
    struct Asked {
        queue: String,
        since: Option<DateTime<Utc>>,
        after: Option<Result<ChangedAfter, ()>>,
        limit: i64,
    }
    let mut asked = Vec::with_capacity(entries.len());
    for e in entries {
        let Value::Object(e) = e else {
            return Err(ApiError::bad_request("every entry must be an object"));
        };
        let since = match e.get("since") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(
                parse_timestamp(s)
                    .ok_or_else(|| ApiError::bad_request("since must be an ISO-8601 timestamp"))?,
            ),
            Some(_) => return Err(ApiError::bad_request("since must be an ISO-8601 timestamp")),
        };
        let after = match e.get("after") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(decode_cursor(s).ok_or(())),
            Some(_) => return Err(ApiError::bad_request("after must be a string")),
        };
        asked.push(Asked {
            queue: entry_queue(e)?,
            since,
            after,
            limit: opt_count(e, "limit", MAX_PAGE)?.clamp(1, MAX_PAGE),
        });
    }
    let safe = app.broker.discovery_safe_time().await?;
    let mut out = Vec::with_capacity(asked.len());
    for a in asked {
        let after = match (a.after, a.since.is_some()) {
            (None, _) => None,
            (Some(Ok(c @ ChangedAfter::Name(_))), false)
            | (Some(Ok(c @ ChangedAfter::Written(..))), true) => Some(c),
            _ => {
                out.push(json!({ "queue": a.queue, "error": "BAD_CURSOR" }));
                continue;
            }
        };
        let page = app
            .broker
            .changed_partitions(&a.queue, a.since, after.as_ref(), a.limit)
            .await?;
        let Some(parts) = page.partitions else {
            out.push(json!({ "queue": a.queue, "error": UNKNOWN_TOPIC_OR_PARTITION }));
            continue;
        };
        let next = if parts.len() as i64 >= a.limit {
            parts.last().map(|p| {
                encode_cursor(&match (a.since, p.last_write_at) {
                    (Some(_), Some(t)) => ChangedAfter::Written(t, p.name.clone()),
                    _ => ChangedAfter::Name(p.name.clone()),
                })
            })
        } else {
            None
        };
        let partitions: Vec<Value> = parts
            .iter()
            .map(|p| {
                json!({
                    "id": p.id.to_string(),
                    "name": p.name,
                    "lastOffset": p.last_offset,
                    "logStart": p.log_start,
                    "lastWriteAt": p.last_write_at.map(format_micros),
                })
            })
            .collect();
        out.push(json!({ "queue": a.queue, "partitions": partitions, "next": next }));
    }
    Ok(Json(json!({
        "safeTime": format_micros(safe.at),
        "safeTimeDegraded": safe.degraded,
        "entries": out,
    }))
    .into_response())
}

/// `GET /api/v1/resources/queues/{queue}/depth[?group=G]`.
pub async fn depth(
    State(app): State<AppState>,
    Path(queue): Path<String>,
    Query(q): Query<Params>,
) -> Result<Response, ApiError> {
    let queue = queue_name(&queue)?;
    let group = query_str(&q, "group");
    if let Some(g) = group {
        consumer_group(Some(g))?;
    }
    record_target(Some(queue.as_str()), None, group);
    let Some(parts) = app.broker.queue_depth(queue.as_str(), group).await? else {
        return Err(ApiError::not_found("Queue not found"));
    };
    // the named group's stored policy; never conflating without a group
    let conflation = match group {
        Some(g) => !app
            .broker
            .conflating_groups(Some(g), Some(queue.as_str()))
            .await?
            .is_empty(),
        None => false,
    };
    let pending: i64 = parts.iter().map(|p| p.pending).sum();
    let processing: i64 = parts.iter().map(|p| p.processing).sum();
    let partitions_pending = parts.iter().filter(|p| p.pending > 0).count() as i64;
    let partitions_ready = parts.iter().filter(|p| p.pending > p.processing).count() as i64;
    let partitions: Vec<Value> = parts
        .iter()
        .map(|p| {
            json!({
                "partition": p.partition,
                "pending": p.pending,
                "processing": p.processing,
                "ready": p.pending - p.processing,
            })
        })
        .collect();
    Ok(Json(json!({
        "queue": queue.as_str(),
        "group": group,
        "pending": pending,
        "processing": processing,
        "ready": pending - processing,
        "partitionsPending": partitions_pending,
        "partitionsReady": partitions_ready,
        // a conflating group has one delivery per partition with messages
        "conflation": conflation,
        "effectivePending": if conflation { partitions_pending } else { pending },
        "effectiveReady": if conflation { partitions_ready } else { pending - processing },
        "partitions": partitions,
    }))
    .into_response())
}

/// `POST /api/v1/messages/{partitionId}/{transactionId}/retry`.
pub async fn retry(
    State(app): State<AppState>,
    Path((partition_id, transaction_id)): Path<(String, String)>,
    body: Body,
) -> Result<Response, ApiError> {
    let bytes = read_bytes(body, app.broker.config().max_body_bytes).await?;
    let body = parse_object(&bytes)?;
    if body.contains_key("queue") || body.contains_key("partition") {
        return Err(ApiError::bad_request(
            "a retry goes back to the dead letter's own queue and partition; queue and partition are not accepted",
        ));
    }
    let pid = path_uuid(&partition_id, "partitionId")?;
    let outcome = match app.broker.retry_dead_letter(pid, &transaction_id).await {
        Ok(o) => o,
        Err(crate::broker::BrokerError::Maintenance(m)) => {
            return Ok(error_with(
                StatusCode::SERVICE_UNAVAILABLE,
                &m,
                json!({ "success": false }),
            ))
        }
        Err(e) => return Err(e.into()),
    };
    let (letter, result) = match outcome {
        RetryOutcome::Gone => {
            return Ok(error_with(
                StatusCode::NOT_FOUND,
                "Message not found",
                json!({ "success": false, "result": "gone" }),
            ))
        }
        RetryOutcome::Moved(l) => (l, "moved"),
        RetryOutcome::Duplicate(l) => (l, "duplicate"),
    };
    record_target(Some(&letter.queue), Some(&letter.partition), None);
    Ok(Json(json!({
        "success": true,
        "result": result,
        "queue": letter.queue,
        "partition": letter.partition,
        "consumerGroup": letter.consumer_group,
        "dlqId": letter.dlq_id,
        "originalTransactionId": letter.original_transaction_id,
        "replayedAs": {
            "index": 0,
            "message_id": letter.message_id.to_string(),
            "transaction_id": letter.transaction_id,
            "queueName": letter.queue,
            "status": if result == "moved" { "queued" } else { "duplicate" },
            "offset": letter.offset,
        },
        "dlqRowRemoved": result == "moved",
    }))
    .into_response())
}
