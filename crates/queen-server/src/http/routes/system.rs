//! Maintenance modes, shared state, stats refresh.

use axum::body::Body;
use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use crate::app::AppState;
use crate::http::body::{parse_object, read_bytes};
use crate::http::error::ApiError;

async fn enabled_from(app: &AppState, body: Body) -> Result<bool, ApiError> {
    let map = parse_object(&read_bytes(body, app.broker.config.max_body_bytes).await?)?;
    map.get("enabled")
        .and_then(Value::as_bool)
        .ok_or_else(|| ApiError::bad_request("enabled (boolean) is required"))
}

fn push_state(app: &AppState) -> Value {
    json!({
        "maintenanceMode": app.broker.flags.push_maintenance(),
        "popMaintenanceMode": app.broker.flags.pop_maintenance(),
        "bufferedMessages": 0,
        "bufferHealthy": true,
        "bufferStats": {"pending": 0, "failed": 0, "spool": "not available in this build"},
    })
}

pub async fn get_maintenance(State(app): State<AppState>) -> Result<Json<Value>, ApiError> {
    app.broker.reconcile().await?;
    Ok(Json(push_state(&app)))
}

pub async fn set_maintenance(
    State(app): State<AppState>,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    let enabled = enabled_from(&app, body).await?;
    app.broker.set_maintenance(false, enabled).await?;
    let mut state = push_state(&app);
    state["message"] = json!(if enabled {
        "Push maintenance mode enabled: pushes are refused with 503"
    } else {
        "Push maintenance mode disabled"
    });
    Ok(Json(state))
}

pub async fn get_pop_maintenance(State(app): State<AppState>) -> Result<Json<Value>, ApiError> {
    app.broker.reconcile().await?;
    let on = app.broker.flags.pop_maintenance();
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
    app.broker.set_maintenance(true, enabled).await?;
    Ok(Json(json!({
        "popMaintenanceMode": enabled,
        "message": if enabled {
            "Pop maintenance mode enabled: pops answer empty"
        } else {
            "Pop maintenance mode disabled"
        },
    })))
}

pub async fn shared_state(State(app): State<AppState>) -> Json<Value> {
    Json(json!({
        "enabled": false,
        "serverId": app.broker.config.server_id,
        "peers": [],
    }))
}

pub async fn stats_refresh() -> Json<Value> {
    // statistics are computed on read; there is nothing to refresh
    Json(json!({"success": true, "message": "Statistics are computed on read"}))
}
