//! Read-only listings for the dashboard's Key/value and Timers views:
//! `GET /api/v1/kv/namespaces`, `GET /api/v1/kv/keys?ns=&after=&limit=`,
//! `GET /api/v1/timers` (a queue's timers are `GET /api/v1/timers/:queue`).
//! Errors in the surfaces' envelope (`surface_error.rs`).

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::kv::is_namespace;
use crate::app::AppState;
use crate::http::body::Query as QueryMap;
use crate::http::surface_error::SurfaceError;

fn kv_failed(e: crate::broker::BrokerError) -> SurfaceError {
    SurfaceError::from_broker(e, "kv_bad_request", "kv_unavailable", "kv_error")
}

pub async fn kv_namespaces(State(app): State<AppState>) -> Response {
    match app.broker.kv_namespaces().await {
        Ok(list) => Json(json!({
            "namespaces": list.iter().map(|n| json!({
                "ns": n.ns,
                "keys": n.keys,
                "nextExpiry": n.next_expiry.map(queen_proto::time::format_micros),
            })).collect::<Vec<_>>(),
        }))
        .into_response(),
        Err(e) => kv_failed(e).into_response(),
    }
}

pub async fn kv_keys(State(app): State<AppState>, Query(q): Query<QueryMap>) -> Response {
    let run = async {
        let ns = q.get("ns").map(String::as_str).unwrap_or("");
        if !is_namespace(ns) {
            return Err(SurfaceError::bad(
                "kv_bad_request",
                "kv_bad_namespace",
                "ns must match ^[a-z0-9][a-z0-9._-]{0,63}$",
            ));
        }
        let after = q.get("after").filter(|a| !a.is_empty()).map(String::as_str);
        let limit = match q.get("limit") {
            None => 100,
            Some(l) => l.parse::<i64>().map_err(|_| {
                SurfaceError::bad("kv_bad_request", "kv_bad_limit", "limit must be an integer")
            })?,
        }
        .clamp(1, 1000);
        let (rows, more) = app
            .broker
            .kv_entries(ns, after, limit)
            .await
            .map_err(kv_failed)?;
        let t = queen_proto::time::format_micros;
        Ok(Json(json!({
            "ns": ns,
            "rows": rows.iter().map(|r| json!({
                "key": r.key,
                "value": r.value,
                "version": r.version,
                "expiresAt": r.expires_at.map(t),
                "updatedAt": t(r.updated_at),
            })).collect::<Vec<_>>(),
            "truncated": more,
            "nextAfter": more.then(|| rows.last().map(|r| r.key.clone())).flatten(),
        }))
        .into_response())
    };
    run.await.unwrap_or_else(IntoResponse::into_response)
}

pub async fn timer_queues(State(app): State<AppState>) -> Response {
    match app.broker.timer_queues().await {
        Ok(list) => Json(json!({
            "queues": list.iter().map(|t| json!({
                "queue": t.queue,
                "timers": t.timers,
                "recurring": t.recurring,
                "nextDeliverAt": queen_proto::time::format_micros(t.next_deliver_at),
            })).collect::<Vec<_>>(),
        }))
        .into_response(),
        Err(e) => SurfaceError::from_broker(
            e,
            "timers_bad_request",
            "timers_unavailable",
            "timers_error",
        )
        .into_response(),
    }
}
