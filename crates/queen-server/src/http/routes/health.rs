//! `GET /health`: 200 `healthy` when the database answers; 503 `unhealthy`
//! when it does not (with `database_error` when the server refused the
//! credentials), `starting` before the schema is ready, `draining` once
//! the broker was told to stop (the load balancer takes it out of rotation
//! while it still serves). The mesh as it is, the version and the commit.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use queen_proto::status::{Health, HealthWorker, SharedStateFlag};

use crate::app::{AppState, Readiness};

pub async fn health(State(app): State<AppState>) -> (StatusCode, Json<Health>) {
    let readiness = app.readiness();
    let health = app.broker.health().await;
    let database = health.healthy;
    let (code, status) = match readiness {
        Readiness::Draining => (StatusCode::SERVICE_UNAVAILABLE, "draining"),
        Readiness::Starting => (StatusCode::SERVICE_UNAVAILABLE, "starting"),
        Readiness::Ready if database => (StatusCode::OK, "healthy"),
        Readiness::Ready => (StatusCode::SERVICE_UNAVAILABLE, "unhealthy"),
    };
    let worker_id = app.broker.config().server_id.clone();
    let mesh = app.broker.mesh_peers();
    let body = Health {
        status,
        database: if database {
            "connected"
        } else {
            "disconnected"
        },
        database_error: health.database_error,
        server: "Queen (Rust)",
        version: crate::VERSION,
        commit: crate::COMMIT,
        worker_id: worker_id.clone(),
        shared_state: SharedStateFlag {
            enabled: mesh.is_some(),
            peers: mesh.map(|(peers, _)| peers),
            peers_connected: mesh.map(|(_, connected)| connected),
        },
        queen: HealthWorker {
            worker_id,
            status: if readiness == Readiness::Draining {
                "draining"
            } else {
                "active"
            },
        },
    };
    (code, Json(body))
}
