//! The `kv` and `timers` riders of `POST /api/v1/transaction`: KV operations
//! (the guards of `.guard(lock)` among them) and timer writes that commit with
//! the bundle's acks and pushes, or not at all.
//!
//! `results` is one flat index space: a slot per push item and per ack, then
//! one per `kv` op, then one per `timers` op. A lost `required` op (a guard,
//! a `once`) answers HTTP 200 `{success: false, reason: "kv_precondition",
//! failedIndex: <flat>, kvReason, version, value, results: []}` and applies
//! nothing. A bad rider refuses the request with a 4xx before anything runs.

use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};

use super::{kv, timers};
use crate::app::AppState;
use crate::broker::{BundleRefusal, TimerReq, TxOp};
use crate::http::error::ApiError;
use crate::http::surface_error::SurfaceError;
use crate::store::KvOp;

/// The validated `kv` and `timers` riders of one transaction.
pub(super) type Riders = (Vec<KvOp>, Vec<TimerReq>);

/// The riders of a transaction body, or `None` when it has neither.
pub(super) fn parse(
    map: &Map<String, Value>,
    caller: Option<&crate::http::auth::Caller>,
) -> Result<Option<Riders>, SurfaceError> {
    let (kv_ops, timer_ops) = (map.get("kv"), map.get("timers"));
    if kv_ops.is_none() && timer_ops.is_none() {
        return Ok(None);
    }
    let array = |v: Option<&Value>, what: &str| -> Result<Vec<Value>, SurfaceError> {
        match v {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(a)) => Ok(a.clone()),
            Some(_) => Err(SurfaceError::bad(
                "bad_request",
                "bad_request",
                format!("{what} must be an array"),
            )),
        }
    };
    let kv_ops = kv::parse_ops(&array(kv_ops, "kv")?, kv::TX_MAX_OPS, kv::TX_MAX_KEYS, true)?;
    let sub = caller.and_then(|c| c.subject.clone());
    let timer_ops = timers::parse_ops(&array(timer_ops, "timers")?, sub)?;
    Ok(Some((kv_ops, timer_ops)))
}

/// Runs a bundle with riders and renders its answer.
pub(super) async fn run(
    app: &AppState,
    ops: Vec<TxOp>,
    kv_ops: Vec<KvOp>,
    timer_reqs: Vec<TimerReq>,
) -> Result<Response, ApiError> {
    if ops.is_empty() && kv_ops.is_empty() && timer_reqs.is_empty() {
        return Err(ApiError::bad_request(
            "the transaction has no operations, kv or timers",
        ));
    }
    let pushes_and_acks = ops.len();
    let result = app.broker.bundle(ops, kv_ops.clone(), timer_reqs).await?;
    let tid = result.transaction_id.to_string();
    let body = match result.outcome {
        Ok(done) => {
            let mut results: Vec<Value> = done
                .outcomes
                .iter()
                .enumerate()
                .map(|(i, o)| {
                    serde_json::to_value(super::transaction::entry(
                        i,
                        o,
                        &result.transaction_ids,
                        &result.queues,
                    ))
                    .unwrap_or(Value::Null)
                })
                .collect();
            for (i, (op, r)) in kv_ops.iter().zip(&done.kv).enumerate() {
                let mut e = kv::element(pushes_and_acks + i, op, r);
                e["opIndex"] = json!(i);
                e["type"] = json!("kv");
                results.push(e);
            }
            let base = pushes_and_acks + kv_ops.len();
            for (i, (w, v)) in done.timer_writes.iter().zip(&done.timers).enumerate() {
                let mut e = timers::element(w, v);
                e["index"] = json!(base + i);
                e["opIndex"] = json!(i);
                e["type"] = json!("timer");
                results.push(e);
            }
            json!({ "transactionId": tid, "success": true, "results": results })
        }
        Err(BundleRefusal::Precondition(p)) => {
            let mut v = kv::precondition(&p, pushes_and_acks + p.index);
            v["transactionId"] = json!(tid);
            v["success"] = json!(false);
            v["error"] = json!(format!(
                "QKV precondition failed at index {}: {}",
                pushes_and_acks + p.index,
                p.reason
            ));
            v["results"] = json!([]);
            v
        }
        Err(BundleRefusal::Failed(f)) => {
            if let Some(e) = &f.store {
                tracing::warn!(error = %e, "transaction failed");
            }
            json!({
                "transactionId": tid,
                "success": false,
                "reason": if f.store.is_some() { "transaction_error" } else { "rejected" },
                "error": f.message,
                "failedIndex": f.failed_at,
                "results": [],
            })
        }
    };
    Ok(Json(body).into_response())
}
