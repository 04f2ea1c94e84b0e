//! The one place HTTP statuses are chosen for errors.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use queen_proto::push_binary::BinaryError;
use queen_proto::responses::ErrorBody;

use crate::broker::BrokerError;
use crate::store::StoreError;

/// An error answered as `{"error": "..."}` with a status.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

impl ApiError {
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
        }
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::NOT_FOUND,
            message: message.into(),
        }
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::CONFLICT,
            message: message.into(),
        }
    }

    pub fn payload_too_large(limit: usize) -> Self {
        Self {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            message: format!("Request body too large (limit {limit} bytes)"),
        }
    }
}

impl From<StoreError> for ApiError {
    /// The status by class; the text is `StoreError::client_text` (a
    /// refusal's own words, a fixed sentence otherwise: the server's messages
    /// go to the log only).
    fn from(e: StoreError) -> Self {
        let status = match e {
            StoreError::Unavailable(_) | StoreError::NotReady => {
                // the outage itself is logged once (spool outage detector, start-up);
                // one line per refused request would flood the log
                tracing::debug!(error = %e, "request failed: database unavailable");
                StatusCode::SERVICE_UNAVAILABLE
            }
            // our own refusals, duplicates, and values PostgreSQL cannot hold
            // (a NUL, a number or a time out of range): the client's to fix
            StoreError::Rejected(_) | StoreError::UniqueViolation(_) => StatusCode::BAD_REQUEST,
            StoreError::InvalidValue(_) => {
                tracing::debug!(error = ?e, "request refused: a value the database cannot hold");
                StatusCode::BAD_REQUEST
            }
            StoreError::Conflict(_) | StoreError::Timeout(_) => {
                // a lock wait or a statement past its timeout: the request may be retried
                tracing::warn!(error = %e, "request failed: database busy");
                StatusCode::SERVICE_UNAVAILABLE
            }
            StoreError::Other(_) => {
                tracing::error!(error = %e, "request failed");
                StatusCode::INTERNAL_SERVER_ERROR
            }
        };
        Self {
            status,
            message: e.client_text(),
        }
    }
}

impl From<BrokerError> for ApiError {
    fn from(e: BrokerError) -> Self {
        match e {
            BrokerError::Invalid(m) => Self::bad_request(m),
            BrokerError::Store(e) => e.into(),
            BrokerError::Spool(m) => Self {
                status: StatusCode::SERVICE_UNAVAILABLE,
                message: m,
            },
            BrokerError::Maintenance(m) => Self {
                status: StatusCode::SERVICE_UNAVAILABLE,
                message: m,
            },
            BrokerError::Sealed(m) => {
                tracing::error!(error = %m, "undeliverable encrypted payload");
                Self {
                    status: StatusCode::INTERNAL_SERVER_ERROR,
                    message: m,
                }
            }
            BrokerError::Internal(m) => {
                tracing::error!(error = %m, "internal error");
                Self {
                    status: StatusCode::INTERNAL_SERVER_ERROR,
                    message: "Internal error".into(),
                }
            }
        }
    }
}

impl From<BinaryError> for ApiError {
    /// A binary push or transaction body that does not decode: 400 naming the
    /// place, 413 for more items than one request may carry (as for JSON).
    fn from(e: BinaryError) -> Self {
        let status = match e {
            BinaryError::TooManyItems(_) => StatusCode::PAYLOAD_TOO_LARGE,
            _ => StatusCode::BAD_REQUEST,
        };
        Self {
            status,
            message: e.to_string(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            axum::Json(ErrorBody {
                error: self.message,
            }),
        )
            .into_response()
    }
}
