//! `GET /health`: 200 when the database answers, 503 otherwise.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use queen_proto::status::{Health, HealthWorker, SharedStateFlag};

use crate::app::AppState;

pub async fn health(State(app): State<AppState>) -> (StatusCode, Json<Health>) {
    let healthy = app.broker.health().await.healthy;
    let status = if healthy {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let worker_id = app.broker.config().server_id.clone();
    let body = Health {
        status: if healthy { "healthy" } else { "unhealthy" },
        database: if healthy { "connected" } else { "disconnected" },
        server: "Queen (Rust)",
        version: env!("CARGO_PKG_VERSION"),
        worker_id: worker_id.clone(),
        shared_state: SharedStateFlag { enabled: false },
        queen: HealthWorker {
            worker_id,
            status: "active",
        },
    };
    (status, Json(body))
}
