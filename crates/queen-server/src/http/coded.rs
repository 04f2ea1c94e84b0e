//! Errors answered with a machine-readable `code` beside the prose `error`
//! (`{"error": <text>, "code": <code>}`), the envelope of the ephemeral
//! routes; the status of a broker error is still chosen by `error.rs`.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};

use super::error::ApiError;
use crate::broker::BrokerError;

/// An error answer with a code and, optionally, more fields and `Retry-After`.
#[derive(Debug)]
pub struct Coded {
    pub status: StatusCode,
    pub body: Map<String, Value>,
    pub retry_after_seconds: Option<u64>,
}

impl Coded {
    pub fn new(status: StatusCode, code: &str, error: impl Into<String>) -> Self {
        let mut body = Map::new();
        body.insert("error".into(), Value::String(error.into()));
        body.insert("code".into(), Value::String(code.to_owned()));
        Self {
            status,
            body,
            retry_after_seconds: None,
        }
    }

    /// A 400 with `code`.
    pub fn bad_request(code: &str, error: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, error)
    }

    /// Adds a field to the body.
    pub fn with(mut self, key: &str, value: Value) -> Self {
        self.body.insert(key.to_owned(), value);
        self
    }

    /// Turns a broker error into a coded answer: the status from the one
    /// table of `error.rs`, the code from `unavailable` (5xx, with
    /// `Retry-After: 1` on 503) or `bad_request` (4xx).
    pub fn from_broker(e: BrokerError, bad_request: &str, unavailable: &str) -> Self {
        Self::from_api(ApiError::from(e), bad_request, unavailable)
    }

    pub fn from_api(e: ApiError, bad_request: &str, unavailable: &str) -> Self {
        if e.status.is_server_error() {
            let mut c = Self::new(e.status, unavailable, e.message);
            if e.status == StatusCode::SERVICE_UNAVAILABLE {
                c.retry_after_seconds = Some(1);
            }
            c
        } else {
            Self::new(e.status, bad_request, e.message)
        }
    }
}

impl IntoResponse for Coded {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(Value::Object(self.body))).into_response();
        if let Some(s) = self.retry_after_seconds {
            if let Ok(v) = HeaderValue::from_str(&s.to_string()) {
                response.headers_mut().insert(header::RETRY_AFTER, v);
            }
        }
        response
    }
}

/// A JSON answer with a status, for bodies built as values.
pub fn json_with(status: StatusCode, body: Value) -> Response {
    (status, axum::Json(body)).into_response()
}

/// `{"error": message}` with `status` and extra fields (the retry route's 404).
pub fn error_with(status: StatusCode, message: &str, extra: Value) -> Response {
    let mut body = json!({ "error": message });
    if let (Some(b), Value::Object(extra)) = (body.as_object_mut(), extra) {
        b.extend(extra);
    }
    json_with(status, body)
}
