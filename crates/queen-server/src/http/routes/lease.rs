//! `POST /api/v1/lease/:leaseId/extend`; the request body may be absent.
//!
//! Answered with one object. The 0.15 contract says a one-element array, but
//! the official Python client 1.3.0 reads the answer with `result.get(...)` and
//! reports every renewal as failed on an array; 2.6.0 accepts both shapes and
//! the JS client ignores the body, so the object works for all of them.
//!
//! A renewal that extends nothing answers 404 (`Lease not found`) or 409
//! (`Lease already expired`, `Lease not active`) with the same body: 1.3.0
//! reports a renewal as failed only on an HTTP error, 2.6.0 reads `success`,
//! and the JS client notices HTTP errors.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use queen_proto::responses::LeaseExtendResult;
use queen_proto::time::format_millis;
use serde_json::Value;
use uuid::Uuid;

use crate::app::AppState;
use crate::http::body::{parse_object, read_bytes};
use crate::http::error::ApiError;

/// Extension when the body names no `seconds`.
const DEFAULT_EXTEND_SECONDS: i64 = 60;
/// One day: the longest a single extension may reach.
const MAX_EXTEND_SECONDS: i64 = 86_400;

pub async fn extend(
    State(app): State<AppState>,
    Path(lease_id): Path<String>,
    body: Body,
) -> Result<(StatusCode, Json<LeaseExtendResult>), ApiError> {
    let lease = Uuid::parse_str(&lease_id)
        .map_err(|_| ApiError::bad_request("leaseId must be a valid UUID"))?;
    let map = parse_object(&read_bytes(body, app.broker.config().max_body_bytes).await?)?;
    let seconds = match map.get("seconds") {
        None | Some(Value::Null) => DEFAULT_EXTEND_SECONDS,
        Some(v) => v
            .as_i64()
            .or_else(|| v.as_f64().map(|f| f as i64))
            .filter(|s| (1..=MAX_EXTEND_SECONDS).contains(s))
            .ok_or_else(|| {
                ApiError::bad_request("seconds must be a positive integer of at most 86400")
            })?,
    };
    let ext = app
        .broker
        .extend_lease(lease, i32::try_from(seconds).unwrap_or(60))
        .await?;
    let expires = ext.expires_at.map(format_millis);
    let status = match ext.reason.as_deref() {
        None => StatusCode::OK,
        Some("Lease not found") => StatusCode::NOT_FOUND,
        Some(_) => StatusCode::CONFLICT,
    };
    Ok((
        status,
        Json(LeaseExtendResult {
            index: 0,
            lease_id,
            success: ext.renewed > 0,
            error: ext.reason,
            expires_at: expires.clone(),
            new_expires_at: expires,
            renewed: ext.renewed,
        }),
    ))
}
