//! Errors in the envelope of KV, locks and timers (the ephemeral routes use
//! `coded.rs`: the two surfaces of the 2.6.0 client read different shapes):
//! `{"error": <code>, "reason": <id>, "detail": <text>}` with a status. The
//! official 2.6.0 client branches on `error`/`reason`, never on prose.

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::body::read_bytes;
use super::error::ApiError;
use crate::broker::BrokerError;

/// A refusal with a machine-readable code.
#[derive(Debug)]
pub struct SurfaceError {
    pub status: StatusCode,
    pub error: &'static str,
    pub reason: String,
    pub detail: String,
}

impl SurfaceError {
    /// 400 `{error: <code>, reason, detail}`.
    pub fn bad(error: &'static str, reason: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            error,
            reason: reason.into(),
            detail: detail.into(),
        }
    }

    /// 413 `{error: "payload_too_large", reason, detail}`.
    pub fn too_large(reason: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            error: "payload_too_large",
            reason: reason.into(),
            detail: detail.into(),
        }
    }

    /// Any status with a code.
    pub fn with_status(
        status: StatusCode,
        error: &'static str,
        reason: impl Into<String>,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            status,
            error,
            reason: reason.into(),
            detail: detail.into(),
        }
    }

    /// A broker failure of a surface: `unavailable` (e.g. `kv_unavailable`)
    /// for a database that is away (503, nothing was applied), `internal` for
    /// other 5xx, `bad_request` (e.g. `kv_bad_request`) for a value the
    /// database refused (400, the text names it); the status from the one
    /// table of `error.rs`.
    pub fn from_broker(
        e: BrokerError,
        bad_request: &'static str,
        unavailable: &'static str,
        internal: &'static str,
    ) -> Self {
        let api = ApiError::from(e);
        let error = match api.status {
            StatusCode::SERVICE_UNAVAILABLE => unavailable,
            s if s.is_server_error() => internal,
            _ => bad_request,
        };
        Self {
            status: api.status,
            error,
            reason: error.to_owned(),
            detail: api.message,
        }
    }
}

impl IntoResponse for SurfaceError {
    fn into_response(self) -> Response {
        let body = json!({ "error": self.error, "reason": self.reason, "detail": self.detail });
        let mut resp = (self.status, axum::Json(body)).into_response();
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            resp.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static("1"),
            );
        }
        resp
    }
}

/// The operations of a batch body: `{"operations": [...]}` or a bare array.
pub fn operations(bytes: &[u8]) -> Option<Vec<serde_json::Value>> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    match serde_json::from_slice::<serde_json::Value>(bytes).ok()? {
        serde_json::Value::Array(a) => Some(a),
        serde_json::Value::Object(mut m) => match m.remove("operations")? {
            serde_json::Value::Array(a) => Some(a),
            _ => None,
        },
        _ => None,
    }
}

/// Reads a call's body and its operations (see [`operations`]): `error` is
/// the surface's 400 code (`kv_bad_request`), `reason` the reason a body
/// that is too large or not of that shape is refused with (`kv_bad_body`).
pub async fn read_operations(
    body: Body,
    max_bytes: usize,
    error: &'static str,
    reason: &'static str,
) -> Result<Vec<serde_json::Value>, SurfaceError> {
    let bytes = read_bytes(body, max_bytes)
        .await
        .map_err(|e| SurfaceError::too_large(reason, e.message))?;
    operations(&bytes).ok_or_else(|| {
        SurfaceError::bad(
            error,
            reason,
            "the body must be a JSON array or {\"operations\": [...]}",
        )
    })
}

/// KV and lock times: ISO-8601 UTC ending in `+00:00`, fractional seconds
/// trimmed of trailing zeros and left out when zero.
pub fn kv_time(t: chrono::DateTime<chrono::Utc>) -> String {
    let base = t.format("%Y-%m-%dT%H:%M:%S").to_string();
    let micros = t.timestamp_subsec_micros();
    if micros == 0 {
        format!("{base}+00:00")
    } else {
        let frac = format!("{micros:06}");
        format!("{base}.{}+00:00", frac.trim_end_matches('0'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kv_times_trim_their_fraction() {
        let t = chrono::DateTime::parse_from_rfc3339("2026-01-02T03:04:05.120000Z")
            .unwrap()
            .to_utc();
        assert_eq!(kv_time(t), "2026-01-02T03:04:05.12+00:00");
        let t = chrono::DateTime::parse_from_rfc3339("2026-01-02T03:04:05Z")
            .unwrap()
            .to_utc();
        assert_eq!(kv_time(t), "2026-01-02T03:04:05+00:00");
    }

    #[test]
    fn batch_bodies_are_an_envelope_or_an_array() {
        assert_eq!(operations(br#"[{"op":"get"}]"#).unwrap().len(), 1);
        assert_eq!(operations(br#"{"operations":[]}"#).unwrap().len(), 0);
        assert!(operations(br#"{"operations":{}}"#).is_none());
        assert!(operations(b"nope").is_none());
        assert!(operations(b"").is_none());
        assert!(operations(b"3").is_none());
    }
}
