//! HTTP API v1: the router, CORS, and the fallback for unknown routes.

pub mod auth;
pub mod body;
#[cfg(feature = "dashboard")]
mod dashboard;
pub mod error;
mod jwks;
pub mod routes;

use axum::extract::Request;
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::Router;

use crate::app::AppState;
use error::ApiError;
use routes::{
    ack, cluster, consumer_groups as groups, dlq, health, lease, messages, metrics, pop, push,
    queues, resources, status, system, traces, transaction,
};

/// Builds the router of every route, with CORS on every answer and JWT
/// authentication when it is enabled.
pub fn router(state: AppState) -> anyhow::Result<Router> {
    let auth = &state.broker.config().auth;
    let verifier = if auth.enabled {
        Some(std::sync::Arc::new(auth::Verifier::new(auth)?))
    } else {
        None
    };
    let router = Router::new();
    #[cfg(feature = "dashboard")]
    let router = router.merge(dashboard::routes());
    Ok(router
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
        .route("/api/v1/pop", get(pop::pop_namespace))
        .route("/api/v1/dlq", get(dlq::list))
        .route("/api/v1/traces", post(traces::create))
        .route("/api/v1/traces/names", get(traces::names))
        .route("/api/v1/traces/by-name/{name}", get(traces::by_name))
        .route(
            "/api/v1/traces/{partition_id}/{transaction_id}",
            get(traces::of_message),
        )
        .route("/api/v1/consumer-groups", get(groups::list))
        .route("/api/v1/consumer-groups/lagging", get(groups::lagging))
        .route(
            "/api/v1/consumer-groups/{group}",
            get(groups::detail).delete(groups::delete),
        )
        .route(
            "/api/v1/consumer-groups/{group}/subscription",
            post(groups::update_subscription),
        )
        .route(
            "/api/v1/consumer-groups/{group}/queues/{queue}",
            delete(groups::delete_for_queue),
        )
        .route(
            "/api/v1/consumer-groups/{group}/queues/{queue}/seek",
            post(groups::seek),
        )
        .route(
            "/api/v1/consumer-groups/{group}/queues/{queue}/partitions/{partition}/seek",
            post(groups::seek_partition),
        )
        .route("/api/v1/resources/overview", get(resources::overview))
        .route("/api/v1/resources/queues", get(resources::queues))
        .route(
            "/api/v1/resources/queues/{queue}",
            get(resources::queue).delete(queues::delete_queue),
        )
        .route("/api/v1/resources/namespaces", get(resources::namespaces))
        .route("/api/v1/resources/tasks", get(resources::tasks))
        .route("/api/v1/messages", get(messages::list))
        .route(
            "/api/v1/messages/{partition_id}/{transaction_id}",
            get(messages::detail).delete(messages::delete),
        )
        .route("/api/v1/status", get(status::overview))
        .route("/api/v1/status/queues", get(status::queues))
        .route("/api/v1/status/queues/{queue}", get(status::queue))
        .route(
            "/api/v1/status/queues/{queue}/messages",
            get(status::queue_messages),
        )
        .route("/api/v1/status/analytics", get(status::analytics))
        .route("/api/v1/status/buffers", get(status::buffers))
        .route(
            "/api/v1/analytics/system-metrics",
            get(status::system_metrics),
        )
        .route(
            "/api/v1/analytics/worker-metrics",
            get(status::system_metrics),
        )
        .route(
            "/api/v1/analytics/postgres-stats",
            get(status::postgres_stats),
        )
        .route("/api/v1/analytics/queue-lag", get(groups::lagging))
        .route("/api/v1/analytics/queue-ops", get(status::overview))
        .route(
            "/api/v1/system/maintenance",
            get(system::get_maintenance).post(system::set_maintenance),
        )
        .route(
            "/api/v1/system/maintenance/pop",
            get(system::get_pop_maintenance).post(system::set_pop_maintenance),
        )
        .route("/api/v1/system/shared-state", get(cluster::shared_state))
        .route("/api/v1/stats/refresh", post(system::stats_refresh))
        .route("/metrics", get(metrics::json))
        .route("/metrics/prometheus", get(metrics::prometheus))
        .fallback(not_found)
        .method_not_allowed_fallback(not_found)
        .layer(middleware::from_fn_with_state(verifier, auth::authenticate))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            count_requests,
        ))
        .layer(middleware::from_fn(cors))
        .with_state(state))
}

async fn count_requests(
    axum::extract::State(app): axum::extract::State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    app.broker.count_http_request();
    next.run(req).await
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
