//! `/metrics` (JSON) and `/metrics/prometheus` (text exposition format 0.0.4).

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use crate::app::AppState;
use crate::broker::status_rss_bytes;
use crate::http::error::ApiError;

pub async fn json(State(app): State<AppState>) -> Json<Value> {
    let m = app.broker.metrics_summary();
    let pool = m.pool;
    Json(json!({
        "uptime": m.uptime_secs,
        "requests": {"total": m.http_requests, "rate": 0},
        "messages": {
            "total": m.pushed,
            "rate": m.rates.pushed_per_second,
            "popped": m.popped,
            "acked": m.acked,
        },
        "database": {
            "poolSize": pool.max_size, "openConnections": pool.open,
            "idleConnections": pool.idle, "waitingRequests": pool.waiting,
        },
        "memory": {"rss": status_rss_bytes(), "heapTotal": 0, "heapUsed": 0, "external": 0, "arrayBuffers": 0},
        "cpu": {"user": 0, "system": 0},
    }))
}

pub async fn prometheus(State(app): State<AppState>) -> Result<Response, ApiError> {
    let text = app
        .broker
        .prometheus_text()
        .await
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response())
}
