//! HTTP API v1: the router, CORS, and the fallback for unknown routes.

pub mod body;
pub mod error;
pub mod routes;

use axum::extract::Request;
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::Router;

use crate::app::AppState;
use error::ApiError;
use routes::{ack, health, lease, pop, push, queues, transaction};

/// Builds the router of every route, with CORS on every answer.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/health", get(health::health))
        .route("/api/v1/configure", post(queues::configure))
        .route("/api/v1/push", post(push::push))
        .route("/api/v1/pop/queue/{queue}", get(pop::pop_queue))
        .route(
            "/api/v1/pop/queue/{queue}/partition/{partition}",
            get(pop::pop_partition),
        )
        .route("/api/v1/ack", post(ack::ack))
        .route("/api/v1/ack/batch", post(ack::ack_batch))
        .route("/api/v1/transaction", post(transaction::transaction))
        .route("/api/v1/lease/{lease_id}/extend", post(lease::extend))
        .route(
            "/api/v1/resources/queues/{queue}",
            delete(queues::delete_queue),
        )
        .fallback(not_found)
        .method_not_allowed_fallback(not_found)
        .layer(middleware::from_fn(cors))
        .with_state(state)
}

async fn not_found() -> ApiError {
    ApiError::not_found("Not found")
}

/// Answers preflight requests and adds the permissive CORS headers of the contract.
async fn cors(req: Request, next: Next) -> Response {
    let mut response = if req.method() == Method::OPTIONS {
        let mut r = StatusCode::NO_CONTENT.into_response();
        r.headers_mut().insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static("86400"),
        );
        r
    } else {
        next.run(req).await
    };
    let h = response.headers_mut();
    h.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, PUT, DELETE, OPTIONS"),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("Content-Type, Authorization"),
    );
    response
}
