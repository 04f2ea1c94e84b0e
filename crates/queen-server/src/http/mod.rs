//! HTTP API v1: the router and its middleware, in one place.
//!
//! Layers, outermost first: the edge (`layers::Edge`: preflights, any
//! `OPTIONS`, answer 204; one span per request, `http.request` with the
//! method, the matched route and, once a handler knows them, the queue,
//! partition and consumer group; every error answer as `{"error": ...}`
//! whoever made it, `error.rs` and `edge::json_error_rewrite`, the 413 of
//! the body limit included; the CORS headers, any origin and the allowed
//! methods and headers in the reference's spelling, on every answer), the
//! body deadline, the request counter, JWT authentication (only when
//! enabled), the body limit (`RequestBodyLimitLayer`, `MAX_BODY_BYTES`);
//! then routing, and on the matched route the request target's check
//! (`edge.rs`: UTF-8, no NUL, bounded names). The stack wraps the router
//! once instead of every route, and is made of plain services that neither
//! box a future nor clone the stack per request: see [`router`].
//! Outside them all: `Connection: close` on every answer once the broker
//! drains, and before the schema is ready a 503 `starting` for every route but
//! `/health` and the metrics (`lifecycle.rs`).
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
pub mod layers;
pub mod lifecycle;
pub mod limits;
pub mod routes;
pub mod serve;
pub mod surface_error;

use std::convert::Infallible;

use axum::body::Body;
use axum::http::{Request, Response};
use axum::routing::{delete, get, post};
use axum::Router;
use hyper::body::Incoming;
use tower::util::{MapRequestLayer, MapResponseLayer};
use tower::{Service, ServiceBuilder};
use tower_http::limit::RequestBodyLimitLayer;

use crate::app::AppState;
use error::ApiError;
use routes::{
    ack, analytics, cluster, consumer_groups as groups, dlq, dlq_delete, health, lease, messages,
    metrics, migration, pop, push, queues, resources, status, system, traces, transaction,
};
use routes::{ephemeral, reads};
use routes::{kv, locks, timers};

/// What a connection is served by: the router of every route with its
/// layers (see the module docs), taking hyper's requests as they come.
pub trait HttpService:
    Service<
        Request<Incoming>,
        Response = Response<Body>,
        Error = Infallible,
        Future: Send + 'static,
    > + Clone
    + Send
    + 'static
{
}

impl<S> HttpService for S where
    S: Service<
            Request<Incoming>,
            Response = Response<Body>,
            Error = Infallible,
            Future: Send + 'static,
        > + Clone
        + Send
        + 'static
{
}

/// Builds the router of every route with its layers (see the module docs).
pub fn router(state: AppState) -> anyhow::Result<impl HttpService> {
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
        .route("/api/v1/kv/namespaces", get(routes::browse::kv_namespaces))
        .route("/api/v1/kv/keys", get(routes::browse::kv_keys))
        .route("/api/v1/locks", post(locks::locks))
        .route(
            "/api/v1/timers",
            get(routes::browse::timer_queues).post(timers::schedule),
        )
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
        .layer(layers::CheckTargetLayer)
        .with_state(state.clone());
    // The other layers wrap the routed service once, outside routing: layers
    // added with `Router::layer` are copied onto every route and cloned, box by
    // box, for every request (about 40 % of a one-message push's broker CPU).
    // They are plain services (`layers.rs`, tower-http's body limit, request
    // maps): no boxed future and no clone of the stack below per request.
    // hyper's connection serves this stack itself (cloned per request: a few
    // reference counts), not an outer `Router` holding it as its fallback
    let layered = ServiceBuilder::new()
        .layer(MapRequestLayer::new(|req: Request<Incoming>| {
            req.map(Body::new)
        }))
        // the stop's `Connection: close` and the start's gate (lifecycle.rs)
        .layer(MapResponseLayer::new(lifecycle::close_when_draining(
            state.clone(),
        )))
        .layer(lifecycle::ReadinessGateLayer::new(state.clone()))
        .layer(layers::EdgeLayer::new(body_limit))
        .layer(MapRequestLayer::new(edge::body_deadline(
            state.broker.config().limits.body_timeout,
        )))
        .layer(MapRequestLayer::new(count_requests(state.clone())))
        // with JWT_ENABLED off there is no authentication layer at all
        .option_layer(verifier.map(layers::AuthLayer::new))
        // axum's body type for the layers above (the limit answers with its own)
        .layer(MapResponseLayer::new(|r: Response<_>| r.map(Body::new)))
        // innermost of the stack: the body type it hands on is one only the
        // router takes
        .layer(RequestBodyLimitLayer::new(body_limit))
        .service(routes);
    Ok(layered)
}

/// The span of one request; handlers fill in `queue.name`, `partition.name`
/// and `consumer_group` when they know them ([`record_target`]).
pub(crate) fn request_span<B>(req: &Request<B>) -> tracing::Span {
    tracing::info_span!(
        "http.request",
        http.method = %req.method(),
        // recorded once routing matched it (`edge::target_error`)
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

fn count_requests(app: AppState) -> impl Fn(Request<Body>) -> Request<Body> + Clone {
    move |req: Request<Body>| {
        app.broker.count_http_request();
        req
    }
}

async fn not_found() -> ApiError {
    ApiError::not_found("Not found")
}
