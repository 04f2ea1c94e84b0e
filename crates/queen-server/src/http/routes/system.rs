//! Maintenance modes and stats refresh.

use axum::body::Body;
use axum::extract::State;
use axum::Json;
use queen_proto::mesh::MaintenanceKind;
use queen_proto::status::{BufferStats, PopMaintenance, PushMaintenance, StatsRefreshed};
use serde_json::Value;

use crate::app::AppState;
use crate::broker::SpoolStatus;
use crate::http::body::{parse_object, read_bytes};
use crate::http::error::ApiError;

async fn enabled_from(app: &AppState, body: Body) -> Result<bool, ApiError> {
    let map = parse_object(&read_bytes(body, app.broker.config().max_body_bytes).await?)?;
    map.get("enabled")
        .and_then(Value::as_bool)
        .ok_or_else(|| ApiError::bad_request("enabled (boolean) is required"))
}

/// The disk spool's numbers (the maintenance answers, the System view).
pub(super) fn buffer_stats(spool: &SpoolStatus) -> BufferStats {
    let s = &spool.stats;
    BufferStats {
        pending: s.records,
        failed: s.failed,
        bytes: s.bytes,
        max_bytes: s.max_bytes,
        segments: s.segments,
        drained: s.drained_total,
        writable: s.healthy,
        database_reachable: spool.database_reachable,
        directory: spool.directory.display().to_string(),
    }
}

fn push_state(app: &AppState, message: Option<&'static str>) -> PushMaintenance {
    let spool = app.broker.spool_status();
    let s = &spool.stats;
    PushMaintenance {
        maintenance_mode: app.broker.maintenance(MaintenanceKind::Push),
        pop_maintenance_mode: app.broker.maintenance(MaintenanceKind::Pop),
        buffered_messages: s.records,
        buffer_healthy: spool.healthy,
        buffer_stats: buffer_stats(&spool),
        message,
        effective: app.broker.maintenance_modes(),
    }
}

pub async fn get_maintenance(State(app): State<AppState>) -> Json<PushMaintenance> {
    // while PostgreSQL is away the cached flags answer: the spool numbers matter most then
    if let Err(e) = app.broker.refresh_stored_maintenance().await {
        tracing::debug!(error = %e, "maintenance flags not re-read");
    }
    Json(push_state(&app, None))
}

pub async fn set_maintenance(
    State(app): State<AppState>,
    body: Body,
) -> Result<Json<PushMaintenance>, ApiError> {
    let enabled = enabled_from(&app, body).await?;
    app.broker
        .set_maintenance(MaintenanceKind::Push, enabled)
        .await?;
    Ok(Json(push_state(
        &app,
        Some(if enabled {
            "Push maintenance mode enabled: pushes are written to the disk spool"
        } else {
            "Push maintenance mode disabled: spooled pushes are being replayed"
        }),
    )))
}

pub async fn get_pop_maintenance(
    State(app): State<AppState>,
) -> Result<Json<PopMaintenance>, ApiError> {
    app.broker.refresh_stored_maintenance().await?;
    let on = app.broker.maintenance(MaintenanceKind::Pop);
    Ok(Json(PopMaintenance {
        effective: app.broker.maintenance_modes(),
        pop_maintenance_mode: on,
        message: if on {
            "Pop maintenance mode is on"
        } else {
            "Pop maintenance mode is off"
        },
    }))
}

pub async fn set_pop_maintenance(
    State(app): State<AppState>,
    body: Body,
) -> Result<Json<PopMaintenance>, ApiError> {
    let enabled = enabled_from(&app, body).await?;
    app.broker
        .set_maintenance(MaintenanceKind::Pop, enabled)
        .await?;
    Ok(Json(PopMaintenance {
        effective: app.broker.maintenance_modes(),
        pop_maintenance_mode: enabled,
        message: if enabled {
            "Pop maintenance mode enabled: pops answer empty"
        } else {
            "Pop maintenance mode disabled"
        },
    }))
}

/// Counts are computed on read; the refresh writes a metrics history sample
/// now (the analytics routes' next bucket) instead of waiting for the stats job.
pub async fn stats_refresh(State(app): State<AppState>) -> Result<Json<StatsRefreshed>, ApiError> {
    app.broker.record_metrics_now().await?;
    Ok(Json(StatsRefreshed {
        success: true,
        message: "Statistics are computed on read; a metrics history sample was written",
    }))
}
