//! Ephemeral queues, `/api/v1/ephemeral/*` (issue 21): configure, reset,
//! delete, push, pop, ack, queues, depth. Errors carry a `code`
//! (`http/coded.rs`); the only 404 of the family is `depth` of a queue that
//! does not exist (`ephemeral_queue_not_found`).

use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use crate::app::AppState;
use crate::broker::{EphemeralPop, EphemeralRefusal};
use crate::http::body::{parse_object, read_bytes, Query as Params};
use crate::http::coded::{json_with, Coded};
use crate::http::record_target;
use crate::store::{EphemeralAck, EphemeralSettings, EphemeralStatus};

const BAD: &str = "ephemeral_bad_request";
const UNAVAILABLE: &str = "ephemeral_unavailable";
const NOT_FOUND: &str = "ephemeral_queue_not_found";
const QUEUE_MODE: &str = "__QUEUE_MODE__";
const DEFAULT_PARTITION: &str = "Default";

/// Longest queue, partition or group name, in bytes.
const MAX_NAME_BYTES: usize = 512;
/// Messages per push, acks per ack, and the largest pop batch.
const MAX_ITEMS: usize = 10_000;
/// Longest wait of a pop, in milliseconds.
const MAX_TIMEOUT_MS: u64 = 300_000;

// Bounds of the options (the defaults live in sql/functions/ephemeral_settings.sql).
const MAX_BYTES_CEILING: i64 = 16 * 1024 * 1024;
const MAX_LENGTH_CEILING: i64 = 10_000;
const LEASE_CEILING: i64 = 86_400;
const RETRY_CEILING: i64 = 1_000;
const WINDOW_MS_CEILING: i64 = 60_000;
const WINDOW_COUNT_CEILING: i64 = 10_000;

type Answer = Result<Response, Coded>;

fn bad(message: impl Into<String>) -> Coded {
    Coded::bad_request(BAD, message)
}

fn from_broker(e: crate::broker::BrokerError) -> Coded {
    Coded::from_broker(e, BAD, UNAVAILABLE)
}

/// A queue, partition or group name: non-empty, at most 512 bytes, no
/// control characters, and no segment a URL path rewrites (the queue travels
/// in the path of `delete` and `depth`: `queen_proto::names::path_problem`).
fn name(what: &str, s: &str) -> Result<String, Coded> {
    if s.is_empty() {
        return Err(bad(format!("{what} must not be empty")));
    }
    if s.len() > MAX_NAME_BYTES {
        return Err(bad(format!("{what} is longer than {MAX_NAME_BYTES} bytes")));
    }
    if s.chars().any(char::is_control) {
        return Err(bad(format!("{what} must not contain control characters")));
    }
    if let Some(p) = queen_proto::names::path_problem(s) {
        return Err(bad(format!("{what} {p}")));
    }
    Ok(s.to_owned())
}

fn str_field<'a>(map: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, Coded> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(bad(format!("{key} must be a string"))),
    }
}

fn queue_of(map: &Map<String, Value>) -> Result<String, Coded> {
    let q = str_field(map, "queue")?.ok_or_else(|| bad("queue is required"))?;
    name("queue", q)
}

fn group_of(g: Option<&str>) -> Result<String, Coded> {
    match g {
        None | Some("") => Ok(QUEUE_MODE.to_owned()),
        Some(g) => name("group", g),
    }
}

async fn object_body(app: &AppState, body: Body) -> Result<Map<String, Value>, Coded> {
    let bytes = read_bytes(body, app.broker.config().max_body_bytes)
        .await
        .map_err(|e| Coded::from_api(e, BAD, UNAVAILABLE))?;
    parse_object(&bytes).map_err(|e| bad(e.message))
}

fn settings_json(s: &EphemeralSettings) -> Value {
    json!({
        "maxBytes": s.max_bytes,
        "maxLength": s.max_length,
        "policy": s.policy,
        "ttlSeconds": s.ttl_seconds,
        "leaseSeconds": s.lease_seconds,
        "retryLimit": s.retry_limit,
        "windowBuffer": { "ms": s.window_ms, "count": s.window_count },
    })
}

fn int_option(key: &str, v: &Value) -> Result<i64, Coded> {
    match v {
        Value::Number(n) => match n.as_i64() {
            Some(i) if i >= 0 => Ok(i),
            _ => Err(bad(format!("{key} must be a non-negative integer"))),
        },
        _ => Err(bad(format!("{key} must be a non-negative integer"))),
    }
}

/// Validates the options of configure (a closed list) and returns what is
/// stored: clamped values, with the zeros that mean "the default" left out.
fn stored_options(options: &Map<String, Value>) -> Result<Value, Coded> {
    let mut out = Map::new();
    for (key, v) in options {
        if v.is_null() {
            continue;
        }
        match key.as_str() {
            "maxBytes" | "maxLength" | "leaseSeconds" => {
                let ceiling = match key.as_str() {
                    "maxBytes" => MAX_BYTES_CEILING,
                    "maxLength" => MAX_LENGTH_CEILING,
                    _ => LEASE_CEILING,
                };
                let n = int_option(key, v)?;
                if n > 0 {
                    out.insert(key.clone(), json!(n.min(ceiling)));
                }
            }
            "ttlSeconds" => {
                out.insert(
                    key.clone(),
                    json!(int_option(key, v)?.min(i64::from(i32::MAX))),
                );
            }
            "retryLimit" => {
                out.insert(key.clone(), json!(int_option(key, v)?.min(RETRY_CEILING)));
            }
            "policy" => match v.as_str() {
                Some(p @ ("reject" | "dropOldest")) => {
                    out.insert(key.clone(), json!(p));
                }
                _ => return Err(bad("policy must be reject or dropOldest")),
            },
            "windowBuffer" => {
                let Value::Object(w) = v else {
                    return Err(bad("windowBuffer must be an object {ms, count}"));
                };
                let mut window = Map::new();
                for (k, wv) in w {
                    if wv.is_null() {
                        continue;
                    }
                    match k.as_str() {
                        "ms" => {
                            window.insert(
                                "ms".into(),
                                json!(int_option("windowBuffer.ms", wv)?.min(WINDOW_MS_CEILING)),
                            );
                        }
                        "count" => {
                            window.insert(
                                "count".into(),
                                json!(
                                    int_option("windowBuffer.count", wv)?.min(WINDOW_COUNT_CEILING)
                                ),
                            );
                        }
                        other => return Err(bad(format!("unknown windowBuffer field {other}"))),
                    }
                }
                out.insert(key.clone(), Value::Object(window));
            }
            other => return Err(bad(format!("unknown option {other}"))),
        }
    }
    Ok(Value::Object(out))
}

/// `POST /api/v1/ephemeral/configure`: `201 {queue, options, declared}`.
pub async fn configure(State(app): State<AppState>, body: Body) -> Answer {
    let body = object_body(&app, body).await?;
    let queue = queue_of(&body)?;
    let options = match body.get("options") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(o)) => o.clone(),
        Some(_) => return Err(bad("options must be an object")),
    };
    let stored = stored_options(&options)?;
    record_target(Some(&queue), None, None);
    let settings = app
        .broker
        .ephemeral_configure(&queue, &stored)
        .await
        .map_err(from_broker)?;
    Ok(json_with(
        StatusCode::CREATED,
        json!({ "queue": queue, "options": settings_json(&settings), "declared": true }),
    ))
}

/// `POST /api/v1/ephemeral/reset`: `{queue, dropped}`.
pub async fn reset(State(app): State<AppState>, body: Body) -> Answer {
    let body = object_body(&app, body).await?;
    let queue = queue_of(&body)?;
    record_target(Some(&queue), None, None);
    let dropped = app
        .broker
        .ephemeral_reset(&queue)
        .await
        .map_err(from_broker)?;
    Ok(json_with(
        StatusCode::OK,
        json!({ "queue": queue, "dropped": dropped }),
    ))
}

/// `DELETE /api/v1/ephemeral/queue/{queue}`: `{queue, deleted, declared}`.
pub async fn delete(State(app): State<AppState>, Path(queue): Path<String>) -> Answer {
    let queue = name("queue", &queue)?;
    record_target(Some(&queue), None, None);
    let (deleted, declared) = app
        .broker
        .ephemeral_delete(&queue)
        .await
        .map_err(from_broker)?;
    Ok(json_with(
        StatusCode::OK,
        json!({ "queue": queue, "deleted": deleted, "declared": declared }),
    ))
}

#[derive(Deserialize)]
struct PushBody<'a> {
    #[serde(borrow, default)]
    messages: Option<Vec<&'a RawValue>>,
}

#[derive(Deserialize)]
struct PushMessage<'a> {
    #[serde(borrow)]
    payload: Option<&'a RawValue>,
}

/// `POST /api/v1/ephemeral/push`: `201 {pushed}`; over the queue's bounds
/// with policy reject, `429 queue_full` and nothing appended.
pub async fn push(State(app): State<AppState>, body: Body) -> Answer {
    let bytes = read_bytes(body, app.broker.config().max_body_bytes)
        .await
        .map_err(|e| Coded::from_api(e, BAD, UNAVAILABLE))?;
    let map = parse_object(&bytes).map_err(|e| bad(e.message))?;
    let queue = queue_of(&map)?;
    let partition = match str_field(&map, "partition")? {
        None => DEFAULT_PARTITION.to_owned(),
        Some(p) => name("partition", p)?,
    };
    // payloads are kept byte for byte: read them raw
    let raw: PushBody<'_> =
        serde_json::from_slice(&bytes).map_err(|_| bad("messages must be an array"))?;
    let messages = raw
        .messages
        .ok_or_else(|| bad("messages must be an array"))?;
    if messages.len() > MAX_ITEMS {
        return Err(bad(format!("at most {MAX_ITEMS} messages per push")));
    }
    let mut payloads = Vec::with_capacity(messages.len());
    for m in messages {
        let m: PushMessage<'_> = serde_json::from_str(m.get())
            .map_err(|_| bad("every message must be an object {payload}"))?;
        let p = m
            .payload
            .ok_or_else(|| bad("every message needs a payload"))?;
        payloads.push(p.get().to_owned());
    }
    record_target(Some(&queue), Some(&partition), None);
    match app
        .broker
        .ephemeral_push(&queue, &partition, &payloads)
        .await
        .map_err(from_broker)?
    {
        Ok(pushed) => Ok(json_with(StatusCode::CREATED, json!({ "pushed": pushed }))),
        Err(EphemeralRefusal::QueueFull) => Err(Coded::new(
            StatusCode::TOO_MANY_REQUESTS,
            "queue_full",
            format!("ephemeral queue {queue} is full (policy reject)"),
        )),
        Err(EphemeralRefusal::OverBudget) => {
            let mut c = Coded::new(
                StatusCode::SERVICE_UNAVAILABLE,
                UNAVAILABLE,
                format!(
                    "ephemeral queues hold their broker-wide bound of {} bytes (EPHEMERAL_MAX_BYTES); nothing was pushed",
                    app.broker.config().jobs.ephemeral_max_bytes
                ),
            );
            c.retry_after_seconds = Some(1);
            Err(c)
        }
    }
}

fn query_int(q: &Params, key: &str) -> Result<Option<u64>, Coded> {
    match q.get(key).map(|v| v.trim()) {
        None | Some("") => Ok(None),
        Some(v) => v
            .parse::<u64>()
            .map(Some)
            .map_err(|_| bad(format!("{key} must be a non-negative integer"))),
    }
}

fn query_flag(q: &Params, key: &str) -> bool {
    matches!(q.get(key).map(String::as_str), Some("true" | "1"))
}

/// The message id: `e:<epoch hex>:<partition>:<seq>`.
fn message_id(epoch: i64, partition: &str, seq: i64) -> String {
    format!("e:{epoch:x}:{partition}:{seq}")
}

fn parse_id(id: &str) -> Option<(i64, String, i64)> {
    let rest = id.strip_prefix("e:")?;
    let (epoch, rest) = rest.split_once(':')?;
    let (partition, seq) = rest.rsplit_once(':')?;
    let epoch = i64::from_str_radix(epoch, 16).ok()?;
    let seq = seq.parse().ok()?;
    (!partition.is_empty()).then(|| (epoch, partition.to_owned(), seq))
}

/// `GET /api/v1/ephemeral/pop?queue=…`: `200 {queue, messages}`, an empty
/// array when there is nothing.
pub async fn pop(State(app): State<AppState>, Query(q): Query<Params>) -> Answer {
    let queue = match q.get("queue") {
        Some(s) => name("queue", s)?,
        None => return Err(bad("queue is required")),
    };
    let partition = match q.get("partition") {
        None => None,
        Some(p) => Some(name("partition", p)?),
    };
    let group = group_of(q.get("group").map(String::as_str))?;
    let batch = query_int(&q, "batch")?
        .unwrap_or(1)
        .clamp(1, MAX_ITEMS as u64);
    let wait = query_flag(&q, "wait");
    let timeout = query_int(&q, "timeout")?
        .map(|t| t.min(MAX_TIMEOUT_MS))
        .map_or(
            app.broker.config().pop.default_timeout,
            Duration::from_millis,
        );
    let req = EphemeralPop {
        queue,
        partition,
        group,
        batch: batch as i32,
        auto_ack: query_flag(&q, "autoAck"),
        wait,
        timeout,
    };
    record_target(Some(&req.queue), req.partition.as_deref(), Some(&req.group));
    let messages = app.broker.ephemeral_pop(&req).await.map_err(from_broker)?;
    let mut out = String::from("{\"queue\":");
    out.push_str(&serde_json::to_string(&req.queue).unwrap_or_default());
    out.push_str(",\"messages\":[");
    for (i, m) in messages.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        // the payload is spliced as pushed, byte for byte
        out.push_str(&format!(
            "{{\"id\":{},\"partition\":{},\"attempts\":{},\"payload\":{}}}",
            serde_json::to_string(&message_id(m.epoch, &m.partition, m.seq)).unwrap_or_default(),
            serde_json::to_string(&m.partition).unwrap_or_default(),
            m.attempts,
            m.payload
        ));
    }
    out.push_str("]}");
    Ok(Response::builder()
        .status(StatusCode::OK)
        .header(axum::http::header::CONTENT_TYPE, "application/json")
        .body(Body::from(out))
        .unwrap_or_default())
}

/// `completed` for absent, completed, success, acked, ok; everything else
/// (`failed`, `retry`, anything) sends the message back.
fn is_completed(status: Option<&Value>) -> bool {
    match status {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => matches!(s.as_str(), "completed" | "success" | "acked" | "ok"),
        Some(Value::Bool(b)) => *b,
        Some(_) => false,
    }
}

/// `POST /api/v1/ephemeral/ack`: `{results:[{id, outcome}]}` in request order.
pub async fn ack(State(app): State<AppState>, body: Body) -> Answer {
    let body = object_body(&app, body).await?;
    let queue = queue_of(&body)?;
    let group = group_of(str_field(&body, "group")?)?;
    let Some(Value::Array(entries)) = body.get("acks") else {
        return Err(bad("acks must be an array"));
    };
    if entries.len() > MAX_ITEMS {
        return Err(bad(format!("at most {MAX_ITEMS} acks per call")));
    }
    let mut ids = Vec::with_capacity(entries.len());
    let mut acks = Vec::with_capacity(entries.len());
    for e in entries {
        let Value::Object(e) = e else {
            return Err(bad("every ack must be an object {id, status?}"));
        };
        let id = str_field(e, "id")?.ok_or_else(|| bad("every ack needs an id"))?;
        let (epoch, partition, seq) =
            parse_id(id).ok_or_else(|| bad(format!("{id} is not an ephemeral message id")))?;
        ids.push(id.to_owned());
        acks.push(EphemeralAck {
            epoch,
            partition,
            seq,
            completed: is_completed(e.get("status")),
        });
    }
    record_target(Some(&queue), None, Some(&group));
    let outcomes = app
        .broker
        .ephemeral_ack(&queue, &group, &acks)
        .await
        .map_err(from_broker)?;
    let results: Vec<Value> = ids
        .into_iter()
        .zip(outcomes)
        .map(|(id, outcome)| json!({ "id": id, "outcome": outcome }))
        .collect();
    Ok(json_with(StatusCode::OK, json!({ "results": results })))
}

fn tier(s: &EphemeralStatus) -> &'static str {
    if s.settings.declared {
        "declared"
    } else {
        "implicit"
    }
}

/// `GET /api/v1/ephemeral/queues`.
pub async fn queues(State(app): State<AppState>) -> Answer {
    let all = app.broker.ephemeral_queues().await.map_err(from_broker)?;
    let mut total_bytes = 0i64;
    let queues: Vec<Value> = all
        .iter()
        .map(|s| {
            let depth: i64 = s.rings.iter().map(|r| r.length).sum();
            let bytes: i64 = s.rings.iter().map(|r| r.bytes).sum();
            total_bytes += bytes;
            json!({
                "queue": s.queue,
                "tier": tier(s),
                "depth": depth,
                "bytes": bytes,
                "partitions": s.rings.len(),
                "groups": s.group_count,
                "drops": { "bounds": s.drops_bounds, "ttl": s.drops_ttl, "retry": s.drops_retry },
                "options": settings_json(&s.settings),
            })
        })
        .collect();
    Ok(json_with(
        StatusCode::OK,
        json!({ "count": queues.len(), "queues": queues, "cellBytes": total_bytes }),
    ))
}

/// `GET /api/v1/ephemeral/queues/{queue}/depth[?group=G]`; 404
/// `ephemeral_queue_not_found` when the queue is neither declared nor holds
/// contents.
pub async fn depth(
    State(app): State<AppState>,
    Path(queue): Path<String>,
    Query(q): Query<Params>,
) -> Answer {
    let queue = name("queue", &queue)?;
    let group = match q.get("group").map(String::as_str) {
        None | Some("") => None,
        Some(g) => Some(name("group", g)?),
    };
    record_target(Some(&queue), None, group.as_deref());
    let Some(s) = app
        .broker
        .ephemeral_status(&queue)
        .await
        .map_err(from_broker)?
    else {
        return Err(Coded::new(
            StatusCode::NOT_FOUND,
            NOT_FOUND,
            format!("ephemeral queue {queue} does not exist"),
        )
        .with("queue", json!(queue)));
    };
    let backlog = |grp: &str, partition: &str| {
        s.groups
            .iter()
            .find(|g| g.group == grp && g.partition == partition)
            .map(|g| g.pending)
    };
    let named: Vec<&str> = {
        let mut v: Vec<&str> = s
            .groups
            .iter()
            .map(|g| g.group.as_str())
            .filter(|g| *g != QUEUE_MODE)
            .collect();
        v.dedup();
        v
    };
    let has_queue_mode = s.groups.iter().any(|g| g.group == QUEUE_MODE);
    let partitions: Vec<Value> = s
        .rings
        .iter()
        .map(|r| {
            let pending = match &group {
                // a group that never popped starts at the oldest retained message
                Some(g) => backlog(g, &r.partition).unwrap_or(r.length),
                None if !named.is_empty() => named
                    .iter()
                    .map(|g| backlog(g, &r.partition).unwrap_or(r.length))
                    .max()
                    .unwrap_or(0),
                None if has_queue_mode => backlog(QUEUE_MODE, &r.partition).unwrap_or(r.length),
                None => r.length,
            };
            json!({ "partition": r.partition, "pending": pending, "bytes": r.bytes })
        })
        .collect();
    let pending: i64 = partitions
        .iter()
        .filter_map(|p| p["pending"].as_i64())
        .sum();
    let partitions_pending = partitions
        .iter()
        .filter(|p| p["pending"].as_i64().unwrap_or(0) > 0)
        .count();
    let mut groups: Vec<Value> = Vec::new();
    let mut names: Vec<&str> = s.groups.iter().map(|g| g.group.as_str()).collect();
    names.dedup();
    for g in names {
        let rows = s.groups.iter().filter(|x| x.group == g);
        let (pending, dropped) = rows.fold((0, 0), |(p, d), x| (p + x.pending, x.dropped.max(d)));
        groups.push(json!({ "group": g, "pending": pending, "skipped": dropped }));
    }
    Ok(json_with(
        StatusCode::OK,
        json!({
            "queue": queue,
            "group": group,
            "tier": tier(&s),
            "pending": pending,
            "partitionsPending": partitions_pending,
            "bytes": s.rings.iter().map(|r| r.bytes).sum::<i64>(),
            "partitions": partitions,
            "groups": groups,
        }),
    ))
}
