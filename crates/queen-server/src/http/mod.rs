//! HTTP API v1: the router and its middleware, in one place.
//!
//! Layers, outermost first: CORS (tower-http `CorsLayer`; preflights answer
//! 204 and every answer carries the allowed methods and headers in the
//! reference's spelling), every error answer as `{"error": ...}` whoever made
//! it (`error.rs`, `edge::json_errors`), one span per request (`TraceLayer`:
//! `http.request` with the method, the matched route and, once a handler
//! knows them, the queue, partition and consumer group), the JSON form of
//! 413, the body deadline, the request counter, JWT authentication, the body
//! limit (`RequestBodyLimitLayer`, `MAX_BODY_BYTES`); then routing, and on
//! the matched route the request target's check (`edge.rs`: UTF-8, no NUL).
//! The stack wraps the router once instead of every route: see [`router`].
//! The listener itself (header deadline, connection cap) is `serve.rs`.

pub mod auth;
pub mod body;
pub mod coded;
pub mod conn_clock;
#[cfg(feature = "dashboard")]
mod dashboard;
pub mod edge;
pub mod error;
mod jwks;
pub mod limits;
pub mod routes;
pub mod serve;
pub mod surface_error;

use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::Router;
use tower::util::MapRequestLayer;
use tower::ServiceBuilder;
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::trace::TraceLayer;

use crate::app::AppState;
use error::ApiError;
use routes::{
    ack, analytics, cluster, consumer_groups as groups, dlq, dlq_delete, health, lease, messages,
    metrics, migration, pop, push, queues, resources, status, system, traces, transaction,
};
use routes::{ephemeral, reads};
use routes::{kv, locks, timers};

/// Methods every answer allows (the reference's list).
const ALLOWED_METHODS: &str = "GET, POST, PUT, DELETE, OPTIONS";
/// Request headers every answer allows.
const ALLOWED_HEADERS: &str = "Content-Type, Authorization";
/// How long browsers may cache a preflight answer (one day).
const PREFLIGHT_MAX_AGE: Duration = Duration::from_secs(86_400);

/// Builds the router of every route with its layers (see the module docs).
pub fn router(state: AppState) -> anyhow::Result<Router> {
    let body_limit = state.broker.config().max_body_bytes;
    let auth = &state.broker.config().auth;
    let verifier = if auth.enabled {
        Some(std::sync::Arc::new(auth::Verifier::new(auth)?))
    } else {
        None
    };
    let router = Router::new();
    #[cfg(feature = "dashboard")]
    let router = router.merge(dashboard::routes());
    let routes = router
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
        .route(
            "/api/v1/dlq/{partition_id}/{transaction_id}",
            delete(dlq_delete::delete),
        )
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
            get(analytics::worker_metrics),
        )
        .route(
            "/api/v1/analytics/postgres-stats",
            get(status::postgres_stats),
        )
        .route("/api/v1/analytics/queue-lag", get(analytics::queue_lag))
        .route("/api/v1/analytics/queue-ops", get(analytics::queue_ops))
        .route(
            "/api/v1/analytics/queue-parked-replicas",
            get(analytics::queue_parked_replicas),
        )
        .route("/api/v1/analytics/retention", get(analytics::retention))
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
        // issue 21: reads that move nothing, and ephemeral queues
        .route("/api/v1/fetch", post(reads::fetch))
        .route(
            "/api/v1/partitions/changed",
            post(reads::partitions_changed),
        )
        .route("/api/v1/resources/queues/{queue}/depth", get(reads::depth))
        .route(
            "/api/v1/messages/{partition_id}/{transaction_id}/retry",
            post(reads::retry),
        )
        .route("/api/v1/ephemeral/configure", post(ephemeral::configure))
        .route("/api/v1/ephemeral/reset", post(ephemeral::reset))
        .route("/api/v1/ephemeral/queue/{queue}", delete(ephemeral::delete))
        .route("/api/v1/ephemeral/push", post(ephemeral::push))
        .route("/api/v1/ephemeral/pop", get(ephemeral::pop))
        .route("/api/v1/ephemeral/ack", post(ephemeral::ack))
        .route("/api/v1/ephemeral/queues", get(ephemeral::queues))
        .route(
            "/api/v1/ephemeral/queues/{queue}/depth",
            get(ephemeral::depth),
        )
        .route("/api/v1/kv", post(kv::kv))
        .route("/api/v1/locks", post(locks::locks))
        .route("/api/v1/timers", post(timers::schedule))
        .route("/api/v1/timers/{queue}", get(timers::list))
        .route(
            "/api/v1/timers/{queue}/{*key}",
            get(timers::peek).delete(timers::cancel),
        )
        .route("/streams/v1/queries", post(routes::streams::register))
        .route("/streams/v1/cycle", post(routes::streams::cycle))
        .route("/streams/v1/state/get", post(routes::streams::state_get))
        .route("/api/v1/streams/queries", get(routes::streams::list))
        .route(
            "/api/v1/migration/test-connection",
            post(migration::test_connection),
        )
        .route("/api/v1/migration/start", post(migration::start))
        .route("/api/v1/migration/status", get(migration::status))
        .route("/api/v1/migration/validate", post(migration::validate))
        .route("/api/v1/migration/reset", post(migration::reset))
        .route("/metrics", get(metrics::json))
        .route("/metrics/prometheus", get(metrics::prometheus))
        .fallback(not_found)
        .method_not_allowed_fallback(not_found)
        // the only layer that needs the matched route (it names path parameters)
        .layer(middleware::from_fn(edge::check_target))
        .with_state(state.clone());
    // The other layers wrap the routed service once, outside routing: layers
    // added with `Router::layer` are copied onto every route and cloned, box by
    // box, for every request (about 40 % of a one-message push's broker CPU).
    let layered = ServiceBuilder::new()
        .layer(middleware::from_fn(preflight_no_content))
        // the reference's exact texts, on preflights and every other answer
        .layer(SetResponseHeaderLayer::overriding(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static(ALLOWED_HEADERS),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static(ALLOWED_METHODS),
        ))
        .layer(cors())
        // outside the span's layer, so CORS gets an axum body back (it needs
        // `Default` bodies for the answers it makes itself)
        .layer(middleware::map_response(edge::json_errors))
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(request_span)
                // errors are logged once where they are answered (error.rs)
                .on_failure(()),
        )
        .layer(middleware::map_response_with_state(body_limit, json_413))
        // plain request maps: no boxing and no clone of the inner stack per request
        .layer(MapRequestLayer::new(edge::body_deadline(
            state.broker.config().limits.body_timeout,
        )))
        .layer(MapRequestLayer::new(count_requests(state.clone())))
        .layer(middleware::from_fn_with_state(verifier, auth::authenticate))
        // innermost of the stack: the body type it hands on is one only the
        // router takes (axum's `from_fn` layers take its own body type)
        .layer(RequestBodyLimitLayer::new(body_limit))
        .service(routes);
    Ok(Router::new().fallback_service(layered))
}

/// The permissive CORS policy of the contract: any origin, preflights
/// cached for a day. The allowed methods and headers are set outside it, on
/// every answer, in the reference's spelling (`CorsLayer` would write them
/// lower-cased, without spaces, and on preflights only).
fn cors() -> CorsLayer {
    CorsLayer::new()
        .allow_origin(AllowOrigin::any())
        .max_age(PREFLIGHT_MAX_AGE)
}

/// Preflights (any `OPTIONS`, on any path) answer 204 with no body, as the
/// reference does; `CorsLayer` answers them itself with 200.
async fn preflight_no_content(req: Request, next: Next) -> Response {
    let preflight = req.method() == Method::OPTIONS;
    let mut response = next.run(req).await;
    if preflight && response.status() == StatusCode::OK {
        *response.status_mut() = StatusCode::NO_CONTENT;
    }
    response
}

/// The span of one request; handlers fill in `queue.name`, `partition.name`
/// and `consumer_group` when they know them ([`record_target`]).
fn request_span(req: &Request) -> tracing::Span {
    tracing::info_span!(
        "http.request",
        http.method = %req.method(),
        // recorded once routing matched it (`edge::check_target`)
        http.route = tracing::field::Empty,
        queue.name = tracing::field::Empty,
        partition.name = tracing::field::Empty,
        consumer_group = tracing::field::Empty,
    )
}

/// Records what a request works on in its span.
pub fn record_target(queue: Option<&str>, partition: Option<&str>, group: Option<&str>) {
    let span = tracing::Span::current();
    if let Some(q) = queue {
        span.record("queue.name", q);
    }
    if let Some(p) = partition {
        span.record("partition.name", p);
    }
    if let Some(g) = group {
        span.record("consumer_group", g);
    }
}

/// `RequestBodyLimitLayer` refuses a body whose `Content-Length` is over the
/// limit with a plain-text 413; the contract's answer is JSON.
async fn json_413(State(limit): State<usize>, response: Response) -> Response {
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if response.status() == StatusCode::PAYLOAD_TOO_LARGE && !is_json {
        return ApiError::payload_too_large(limit).into_response();
    }
    response
}

fn count_requests(app: AppState) -> impl Fn(Request) -> Request + Clone {
    move |req: Request| {
        app.broker.count_http_request();
        req
    }
}

async fn not_found() -> ApiError {
    ApiError::not_found("Not found")
}
