//! Maintenance modes, shared state, stats refresh.

use axum::body::Body;
use axum::extract::State;
use axum::Json;
use queen_proto::mesh::MaintenanceKind;
use serde_json::{json, Value};

use crate::app::AppState;
use crate::http::body::{parse_object, read_bytes};
use crate::http::error::ApiError;

async fn enabled_from(app: &AppState, body: Body) -> Result<bool, ApiError> {
    let map = parse_object(&read_bytes(body, app.broker.config().max_body_bytes).await?)?;
    map.get("enabled")
        .and_then(Value::as_bool)
        .ok_or_else(|| ApiError::bad_request("enabled (boolean) is required"))
}

fn push_state(app: &AppState) -> Value {
    let spool = app.broker.spool_status();
    let s = &spool.stats;
    json!({
        "maintenanceMode": app.broker.maintenance(MaintenanceKind::Push),
        "popMaintenanceMode": app.broker.maintenance(MaintenanceKind::Pop),
        "bufferedMessages": s.records,
        "bufferHealthy": spool.healthy,
        "bufferStats": {
            "pending": s.records,
            "failed": s.failed,
            "bytes": s.bytes,
            "maxBytes": s.max_bytes,
            "segments": s.segments,
            "drained": s.drained_total,
            "writable": s.healthy,
            "databaseReachable": spool.database_reachable,
            "directory": spool.directory.display().to_string(),
        },
    })
}

pub async fn get_maintenance(State(app): State<AppState>) -> Json<Value> {
    // while PostgreSQL is away the cached flags answer: the spool numbers matter most then
    if let Err(e) = app.broker.reconcile().await {
        tracing::debug!(error = %e, "maintenance flags not re-read");
    }
    Json(push_state(&app))
}

pub async fn set_maintenance(
    State(app): State<AppState>,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    let enabled = enabled_from(&app, body).await?;
    app.broker
        .set_maintenance(MaintenanceKind::Push, enabled)
        .await?;
    let mut state = push_state(&app);
    state["message"] = json!(if enabled {
        "Push maintenance mode enabled: pushes are written to the disk spool"
    } else {
        "Push maintenance mode disabled: spooled pushes are being replayed"
    });
    Ok(Json(state))
}

pub async fn get_pop_maintenance(State(app): State<AppState>) -> Result<Json<Value>, ApiError> {
    app.broker.reconcile().await?;
    let on = app.broker.maintenance(MaintenanceKind::Pop);
    Ok(Json(json!({
        "popMaintenanceMode": on,
        "message": if on { "Pop maintenance mode is on" } else { "Pop maintenance mode is off" },
    })))
}

pub async fn set_pop_maintenance(
    State(app): State<AppState>,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    let enabled = enabled_from(&app, body).await?;
    app.broker
        .set_maintenance(MaintenanceKind::Pop, enabled)
        .await?;
    Ok(Json(json!({
        "popMaintenanceMode": enabled,
        "message": if enabled {
            "Pop maintenance mode enabled: pops answer empty"
        } else {
            "Pop maintenance mode disabled"
        },
    })))
}

pub async fn stats_refresh() -> Json<Value> {
    // statistics are computed on read; there is nothing to refresh
    Json(json!({"success": true, "message": "Statistics are computed on read"}))
}
