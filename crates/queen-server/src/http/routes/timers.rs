//! Timers: `POST /api/v1/timers` (schedule, reschedule, cancel; one
//! transaction), `DELETE /api/v1/timers/{queue}/{key…}` (cancel),
//! `GET /api/v1/timers/{queue}/{key…}` (peek), `GET /api/v1/timers/{queue}`
//! (list), and the parsing the `timers` rider of `/transaction` shares.

use std::collections::HashSet;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine;
use serde_json::{json, Map, Value};

use crate::app::AppState;
use crate::broker::TimerReq;
use crate::http::body::Query as QueryMap;
use crate::http::surface_error::{read_operations, SurfaceError};
use crate::store::recurrence::{
    CatchUp, Every, Recurrence, RecurrenceError, MAX_RECURRING_TXN_CHARS,
};
use crate::store::{TimerRow, TimerVerdict, TimerWrite};

/// Most operations per call.
pub const MAX_OPS: usize = 256;
/// Largest decoded payload.
pub const MAX_PAYLOAD_BYTES: usize = 1 << 20;
/// Longest timer key, in bytes.
pub const MAX_KEY_BYTES: usize = 512;
/// Furthest a timer may be scheduled: 90 days.
pub const HORIZON_MS: i64 = 90 * 24 * 3600 * 1000;

/// Fields the broker owns; a schedule that carries one is refused.
const SERVER_OWNED: &[&str] = &[
    "producerSub",
    "producer_sub",
    "messageId",
    "message_id",
    "tenant",
    "tenantId",
    "tenant_id",
    "deliverAt",
    "deliver_at",
    "delaySeconds",
    "delay_seconds",
    "attempts",
    "claimToken",
    "claim_token",
    "claimedUntil",
    "claimed_until",
];

fn bad(reason: &str, detail: impl Into<String>) -> SurfaceError {
    SurfaceError::bad("timers_bad_request", reason, detail)
}

fn unavailable(e: crate::broker::BrokerError) -> SurfaceError {
    SurfaceError::from_broker(
        e,
        "timers_bad_request",
        "timers_unavailable",
        "timers_error",
    )
}

pub async fn schedule(
    State(app): State<AppState>,
    caller: Option<axum::Extension<crate::http::auth::Caller>>,
    body: Body,
) -> Response {
    let run = async {
        let ops = read_operations(
            body,
            app.broker.config().max_body_bytes,
            "timers_bad_request",
            "timers_bad_body",
        )
        .await?;
        let sub = caller.as_ref().and_then(|c| c.0.subject.clone());
        let reqs = parse_ops(&ops, sub)?;
        let (writes, verdicts) = app.broker.timers(reqs).await.map_err(unavailable)?;
        let results: Vec<Value> = writes
            .iter()
            .zip(&verdicts)
            .map(|(w, v)| element(w, v))
            .collect();
        Ok::<_, SurfaceError>(Json(json!({ "results": results })).into_response())
    };
    run.await.unwrap_or_else(IntoResponse::into_response)
}

pub async fn cancel(
    State(app): State<AppState>,
    Path((queue, key)): Path<(String, String)>,
    Query(q): Query<QueryMap>,
) -> Response {
    let run = async {
        let queue = queue_of(&queue)?;
        let key = key_of(Some(&Value::String(key)))?;
        let txn = q.get("txn").filter(|t| !t.is_empty()).cloned();
        let (writes, verdicts) = app
            .broker
            .timers(vec![TimerReq::Cancel {
                queue,
                timer_key: key,
                txn,
            }])
            .await
            .map_err(unavailable)?;
        Ok::<_, SurfaceError>(Json(element(&writes[0], &verdicts[0])).into_response())
    };
    run.await.unwrap_or_else(IntoResponse::into_response)
}

pub async fn peek(
    State(app): State<AppState>,
    Path((queue, key)): Path<(String, String)>,
) -> Response {
    let run = async {
        queue_of(&queue)?;
        key_of(Some(&Value::String(key.clone())))?;
        let row = app
            .broker
            .timer_peek(&queue, &key)
            .await
            .map_err(unavailable)?;
        Ok::<_, SurfaceError>(
            Json(match row {
                Some(r) => {
                    let mut v = row_json(&r);
                    v["found"] = json!(true);
                    v
                }
                None => json!({ "found": false, "queue": queue, "timerKey": key }),
            })
            .into_response(),
        )
    };
    run.await.unwrap_or_else(IntoResponse::into_response)
}

pub async fn list(
    State(app): State<AppState>,
    Path(queue): Path<String>,
    Query(q): Query<QueryMap>,
) -> Response {
    let run = async {
        queue_of(&queue)?;
        let after = q.get("after").filter(|a| !a.is_empty()).map(String::as_str);
        let limit = q
            .get("limit")
            .and_then(|l| l.parse::<i64>().ok())
            .unwrap_or(100)
            .clamp(1, 1000);
        let (rows, more) = app
            .broker
            .timer_list(&queue, after, limit)
            .await
            .map_err(unavailable)?;
        let next = more
            .then(|| rows.last().map(|r| r.timer_key.clone()))
            .flatten();
        Ok::<_, SurfaceError>(
            Json(json!({
                "rows": rows.iter().map(row_json).collect::<Vec<_>>(),
                "truncated": more,
                "nextAfter": next,
            }))
            .into_response(),
        )
    };
    run.await.unwrap_or_else(IntoResponse::into_response)
}

fn row_json(r: &TimerRow) -> Value {
    let t = queen_proto::time::format_micros;
    let mut v = json!({
        "queue": r.queue,
        "timerKey": r.timer_key,
        "partition": r.partition,
        "deliverAt": t(r.deliver_at),
        "txn": r.txn,
        "messageId": r.message_id.to_string(),
        "payloadZstd": false,
        "encrypted": r.encrypted,
        "producerSub": r.producer_sub,
        "attempts": r.attempts,
        "lastError": r.last_error,
        "claimed": false,
        "createdAt": t(r.created_at),
        "updatedAt": t(r.updated_at),
    });
    if let Some(tick) = r.tick_at {
        add_schedule(
            &mut v,
            r.interval_ms,
            r.cron.as_deref(),
            r.timezone.as_deref(),
            r.catch_up.as_deref().unwrap_or("one"),
        );
        v["nextTickAt"] = json!(t(tick));
        v["fires"] = json!(r.fires);
    }
    if let Some(p) = &r.payload {
        v["payload"] = json!(base64::engine::general_purpose::STANDARD.encode(p));
    }
    v
}

/// The schedule fields of a recurring timer, as it was given.
fn add_schedule(
    v: &mut Value,
    interval_ms: Option<i64>,
    cron: Option<&str>,
    timezone: Option<&str>,
    catch_up: &str,
) {
    v["recurring"] = json!(true);
    if let Some(ms) = interval_ms {
        v["intervalMs"] = json!(ms);
    }
    if let Some(expr) = cron {
        v["cron"] = json!(expr);
        v["timezone"] = json!(timezone.unwrap_or("UTC"));
    }
    v["catchUp"] = json!(catch_up);
}

/// One result element (§5.4 of the client surface sheet).
pub fn element(w: &TimerWrite, v: &TimerVerdict) -> Value {
    let (queue, key) = (w.queue(), w.timer_key());
    match v {
        TimerVerdict::Scheduled {
            rescheduled,
            txn,
            message_id,
            deliver_at,
        } => {
            let mut e = json!({
                "ok": true,
                "status": if *rescheduled { "rescheduled" } else { "scheduled" },
                "queue": queue, "timerKey": key, "txn": txn,
                "messageId": message_id.to_string(),
                "deliverAt": queen_proto::time::format_micros(*deliver_at),
            });
            if let TimerWrite::Schedule(s) = w {
                if let Some(r) = &s.recurrence {
                    let (interval_ms, cron, timezone) = r.stored();
                    add_schedule(&mut e, interval_ms, cron, timezone, r.catch_up.as_str());
                    e["nextTickAt"] = e["deliverAt"].clone();
                }
            }
            e
        }
        TimerVerdict::Cancelled { txn } => json!({
            "ok": true, "status": "cancelled", "queue": queue, "timerKey": key, "txn": txn,
        }),
        TimerVerdict::Absent { txn } => json!({
            "ok": false, "status": "absent", "queue": queue, "timerKey": key, "txn": txn,
        }),
    }
}

fn too_large() -> SurfaceError {
    SurfaceError::too_large(
        "timers_payload_too_large",
        format!("payload larger than {MAX_PAYLOAD_BYTES} bytes (decoded and decompressed)"),
    )
}

/// Decompresses a zstd payload (one frame or several), never holding more
/// than [`MAX_PAYLOAD_BYTES`] of output: a frame that declares a larger
/// content size is refused before anything is allocated, and one that does
/// not declare it is decoded into a buffer of exactly the bound, so a
/// decompression bomb fails with `413` once the buffer is full.
fn unzstd(compressed: &[u8]) -> Result<Vec<u8>, SurfaceError> {
    let not_zstd = |e: &dyn std::fmt::Display| {
        bad(
            "timers_payload_not_zstd",
            format!("payloadZstd is set but the payload is not a zstd frame: {e}"),
        )
    };
    if let Ok(Some(n)) = zstd::zstd_safe::get_frame_content_size(compressed) {
        if n > MAX_PAYLOAD_BYTES as u64 {
            return Err(too_large());
        }
    }
    let mut out = Vec::with_capacity(MAX_PAYLOAD_BYTES);
    let mut dctx = zstd::zstd_safe::DCtx::create();
    match dctx.decompress(&mut out, compressed) {
        Ok(_) => Ok(out),
        Err(code) if code_is_dst_too_small(code) => Err(too_large()),
        Err(code) => Err(not_zstd(&zstd::zstd_safe::get_error_name(code))),
    }
}

fn code_is_dst_too_small(code: zstd::zstd_safe::ErrorCode) -> bool {
    zstd::zstd_safe::get_error_name(code) == "Destination buffer is too small"
}

fn queue_of(s: &str) -> Result<queen_proto::QueueName, SurfaceError> {
    queen_proto::QueueName::new(s).map_err(|e| bad("timers_bad_queue", e.to_string()))
}

/// A timer key: it travels in the path of peek and cancel with its `/` kept
/// literal, so a key with a segment a URL path rewrites is refused
/// (`queen_proto::names::path_problem`).
fn key_of(v: Option<&Value>) -> Result<String, SurfaceError> {
    match v {
        Some(Value::String(s))
            if !s.is_empty() && !s.contains('\0') && s.len() <= MAX_KEY_BYTES =>
        {
            if let Some(p) = queen_proto::names::path_problem(s) {
                return Err(bad("timers_bad_key", format!("timerKey {p}")));
            }
            Ok(s.clone())
        }
        None | Some(Value::Null) => Err(bad("timers_key_required", "timerKey is required")),
        _ => Err(bad(
            "timers_bad_key",
            format!(
                "timerKey must be a non-empty string of at most {MAX_KEY_BYTES} bytes without NUL"
            ),
        )),
    }
}

fn txn_of(m: &Map<String, Value>) -> Result<Option<String>, SurfaceError> {
    match m.get("txn") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s))
            if !s.is_empty() && !s.contains('\0') && s.chars().count() <= 255 =>
        {
            Ok(Some(s.clone()))
        }
        _ => Err(bad(
            "timers_bad_txn",
            "txn must be a non-empty string of at most 255 characters without NUL",
        )),
    }
}

/// Validates a whole call (also the `timers` rider of `/transaction`).
pub fn parse_ops(
    ops: &[Value],
    producer_sub: Option<String>,
) -> Result<Vec<TimerReq>, SurfaceError> {
    if ops.len() > MAX_OPS {
        return Err(bad(
            "timers_too_many_ops",
            format!("at most {MAX_OPS} operations per call"),
        ));
    }
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(ops.len());
    for (i, v) in ops.iter().enumerate() {
        let req = parse_op(v, producer_sub.clone()).map_err(|mut c| {
            c.detail = format!("operation {i}: {}", c.detail);
            c
        })?;
        let key = match &req {
            TimerReq::Schedule {
                queue, timer_key, ..
            }
            | TimerReq::Cancel {
                queue, timer_key, ..
            } => (queue.as_str().to_owned(), timer_key.clone()),
        };
        if !seen.insert(key) {
            return Err(bad(
                "timers_duplicate_in_call",
                format!("operation {i}: the same (queue, timerKey) twice in one call"),
            ));
        }
        out.push(req);
    }
    Ok(out)
}

fn parse_op(v: &Value, producer_sub: Option<String>) -> Result<TimerReq, SurfaceError> {
    let m = v
        .as_object()
        .ok_or_else(|| bad("timers_bad_request", "an operation must be an object"))?;
    if let Some(f) = m
        .keys()
        .find(|k| k.starts_with('_') || SERVER_OWNED.contains(&k.as_str()))
    {
        return Err(bad(
            "timers_server_owned_field",
            format!("{f} is set by the broker, not by the caller"),
        ));
    }
    let queue = match m.get("queue") {
        Some(Value::String(q)) => queue_of(q)?,
        _ => return Err(bad("timers_queue_required", "queue is required")),
    };
    let timer_key = key_of(m.get("timerKey"))?;
    let txn = txn_of(m)?;
    match m.get("op").and_then(Value::as_str) {
        Some("schedule" | "reschedule") => {}
        Some("cancel") => {
            return Ok(TimerReq::Cancel {
                queue,
                timer_key,
                txn,
            })
        }
        other => {
            return Err(bad(
                "timers_unknown_op",
                format!(
                    "unknown op {}",
                    other.map_or("(none)".into(), |s| format!("{s:?}"))
                ),
            ))
        }
    }
    let partition = match m.get("partition") {
        None | Some(Value::Null) => queen_proto::PartitionName::new("Default"),
        Some(Value::String(p)) if !p.is_empty() => queen_proto::PartitionName::new(p),
        _ => {
            return Err(bad(
                "timers_bad_partition",
                "partition must be a non-empty string",
            ))
        }
    }
    .map_err(|e| bad("timers_bad_partition", e.to_string()))?;
    let recurrence = recurrence_of(m)?;
    let delay_ms = match m.get("delayMs") {
        None | Some(Value::Null) => None,
        // a delay <= 0 fires at the next sweep: clamped to 0, so no
        // negative delay (i64::MIN included) reaches the database's clock
        Some(Value::Number(n)) => Some(
            n.as_i64()
                .ok_or_else(|| bad("timers_bad_delay", "delayMs must be an integer"))?
                .max(0),
        ),
        Some(_) => return Err(bad("timers_bad_delay", "delayMs must be an integer")),
    };
    let (delay_ms, first_at) = match (delay_ms, &recurrence) {
        (Some(d), _) => (d, None),
        (None, None) => return Err(bad("timers_delay_required", "delayMs is required")),
        // a recurring timer without a delay fires first at its first tick
        (None, Some(r)) => match &r.every {
            Every::Interval { ms } => (*ms, None),
            Every::Cron { .. } => {
                let first = r
                    .next_after(chrono::Utc::now())
                    .ok_or_else(|| bad("timers_bad_cron", "cron never occurs"))?;
                (0, Some(first))
            }
        },
    };
    if recurrence.is_some()
        && txn
            .as_ref()
            .is_some_and(|t| t.chars().count() > MAX_RECURRING_TXN_CHARS)
    {
        return Err(bad(
            "timers_bad_txn",
            format!(
                "txn of a recurring timer must be at most {MAX_RECURRING_TXN_CHARS} characters \
                 (each fire's transactionId is txn@<tick>)"
            ),
        ));
    }
    if delay_ms > HORIZON_MS {
        return Err(SurfaceError::with_status(
            axum::http::StatusCode::FORBIDDEN,
            "timer_horizon_exceeded",
            "timers_horizon",
            format!("delayMs beyond the horizon of {HORIZON_MS} ms"),
        ));
    }
    let zstd = match m.get("payloadZstd") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(bad("timers_bad_zstd", "payloadZstd must be a boolean")),
    };
    let Some(Value::String(payload)) = m.get("payload") else {
        return Err(bad(
            "timers_payload_required",
            "payload (base64) is required",
        ));
    };
    if payload.len() > MAX_PAYLOAD_BYTES / 3 * 4 + 8 {
        return Err(too_large());
    }
    let mut bytes = base64::engine::general_purpose::STANDARD
        .decode(payload)
        .map_err(|_| bad("timers_payload_not_base64", "payload must be base64"))?;
    if zstd {
        bytes = unzstd(&bytes)?;
    }
    if bytes.len() > MAX_PAYLOAD_BYTES {
        return Err(too_large());
    }
    let text = String::from_utf8(bytes)
        .ok()
        .filter(|t| serde_json::from_str::<serde::de::IgnoredAny>(t).is_ok())
        .ok_or_else(|| {
            bad(
                "timers_payload_not_json",
                "the decoded payload must be JSON text (the client JSON-encodes non-bytes payloads)",
            )
        })?;
    Ok(TimerReq::Schedule {
        queue,
        timer_key,
        partition,
        delay_ms,
        first_at,
        recurrence,
        txn,
        payload: text,
        producer_sub,
    })
}

fn refused(e: RecurrenceError) -> SurfaceError {
    let reason = match e.field {
        "intervalMs" => "timers_bad_interval",
        "timezone" => "timers_bad_timezone",
        _ => "timers_bad_cron",
    };
    bad(reason, e.to_string())
}

/// The schedule of a recurring timer: `intervalMs` or `cron` (with
/// `timezone`), and `catchUp`; `None` for a one-shot timer.
fn recurrence_of(m: &Map<String, Value>) -> Result<Option<Recurrence>, SurfaceError> {
    let present = |k: &str| m.get(k).is_some_and(|v| !v.is_null());
    let catch_up = match m.get("catchUp") {
        None | Some(Value::Null) => CatchUp::One,
        Some(v) => v
            .as_str()
            .and_then(CatchUp::parse)
            .ok_or_else(|| bad("timers_bad_catch_up", "catchUp must be \"one\" or \"none\""))?,
    };
    let timezone = match m.get("timezone") {
        None | Some(Value::Null) => None,
        Some(Value::String(z)) => Some(z.as_str()),
        Some(_) => {
            return Err(bad(
                "timers_bad_timezone",
                "timezone must be an IANA time zone name",
            ))
        }
    };
    match (present("intervalMs"), present("cron")) {
        (true, true) => Err(bad(
            "timers_bad_schedule",
            "intervalMs and cron: give one of them, not both",
        )),
        (true, false) if timezone.is_some() => Err(bad(
            "timers_bad_timezone",
            "timezone applies to cron schedules only",
        )),
        (true, false) => {
            let ms = m["intervalMs"]
                .as_i64()
                .ok_or_else(|| bad("timers_bad_interval", "intervalMs must be an integer"))?;
            Recurrence::interval(ms, HORIZON_MS, catch_up)
                .map(Some)
                .map_err(refused)
        }
        (false, true) => {
            let Some(expr) = m["cron"].as_str() else {
                return Err(bad("timers_bad_cron", "cron must be a string"));
            };
            Recurrence::cron(expr, timezone, catch_up)
                .map(Some)
                .map_err(refused)
        }
        (false, false) if timezone.is_some() => Err(bad(
            "timers_bad_timezone",
            "timezone applies to cron schedules only",
        )),
        (false, false) if present("catchUp") => Err(bad(
            "timers_bad_catch_up",
            "catchUp applies to recurring timers (intervalMs or cron) only",
        )),
        (false, false) => Ok(None),
    }
}

#[cfg(test)]
mod tests;
