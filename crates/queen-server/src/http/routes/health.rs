//! `GET /health`: 200 when the database answers, 503 otherwise.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use serde_json::json;

use crate::app::AppState;

pub async fn health(State(app): State<AppState>) -> impl IntoResponse {
    let healthy = app.broker.health().await.healthy;
    let status = if healthy {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = json!({
        "status": if healthy { "healthy" } else { "unhealthy" },
        "database": if healthy { "connected" } else { "disconnected" },
        "server": "Queen (Rust)",
        "version": env!("CARGO_PKG_VERSION"),
        "worker_id": app.broker.config().server_id,
        "shared_state": { "enabled": false },
        "queen": { "worker_id": app.broker.config().server_id, "status": "active" },
    });
    (status, Json(body))
}
