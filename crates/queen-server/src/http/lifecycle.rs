//! The broker's lifecycle at the HTTP edge (the state itself is
//! [`Lifecycle`](crate::app::Lifecycle)):
//!
//! - before the schema is known to be migrated, every route but `/health` and
//!   the metrics is answered 503 `starting` ([`ReadinessGate`]): a push must
//!   not be spooled as `buffered`, nor an ack refused, only because the
//!   start-up migration check has not finished;
//! - from the stop signal on, every answer carries `Connection: close`
//!   ([`close_when_draining`]): the client's next request opens a connection,
//!   which the load balancer sends to a broker that is not draining. Idle
//!   keep-alive connections are not closed during the drain: a request a
//!   client is writing onto one at that moment would get no answer.

use std::convert::Infallible;
use std::future::Ready;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::http::header::{CONNECTION, CONTENT_TYPE, RETRY_AFTER};
use axum::http::{HeaderValue, Request, Response, StatusCode};
use tower::util::future::EitherResponseFuture;
use tower::util::Either;
use tower::{Layer, Service};

use crate::app::{AppState, Readiness};

/// The body of a request refused while the broker starts.
pub const STARTING_ERROR: &str = "Broker starting: the database schema is not ready yet; retry";

/// Routes served while the broker starts: the health check and the metrics.
fn served_while_starting(path: &str) -> bool {
    matches!(path, "/health" | "/metrics" | "/metrics/prometheus")
}

/// Adds `Connection: close` to every answer once the broker drains.
pub fn close_when_draining(
    app: AppState,
) -> impl Fn(Response<Body>) -> Response<Body> + Clone + Send + Sync + 'static {
    move |mut response: Response<Body>| {
        if app.lifecycle.is_draining() {
            response
                .headers_mut()
                .insert(CONNECTION, HeaderValue::from_static("close"));
        }
        response
    }
}

/// Wraps a service in a [`ReadinessGate`].
#[derive(Debug, Clone)]
pub struct ReadinessGateLayer {
    app: AppState,
}

impl ReadinessGateLayer {
    pub fn new(app: AppState) -> Self {
        Self { app }
    }
}

impl<S> Layer<S> for ReadinessGateLayer {
    type Service = ReadinessGate<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ReadinessGate {
            inner,
            app: self.app.clone(),
        }
    }
}

/// Answers 503 `starting` to every route but `/health` and the metrics until
/// the schema is ready; then hands every request on.
#[derive(Debug, Clone)]
pub struct ReadinessGate<S> {
    inner: S,
    app: AppState,
}

impl<S> Service<Request<Body>> for ReadinessGate<S>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = EitherResponseFuture<Ready<Result<Response<Body>, Infallible>>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let starting = self.app.readiness() == Readiness::Starting;
        if starting && !served_while_starting(req.uri().path()) {
            Either::<StartingAnswer, &mut S>::Left(StartingAnswer).call(req)
        } else {
            Either::<StartingAnswer, &mut S>::Right(&mut self.inner).call(req)
        }
    }
}

/// The 503 of a request that came before the schema was ready.
#[derive(Debug, Clone, Copy)]
struct StartingAnswer;

impl Service<Request<Body>> for StartingAnswer {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Ready<Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<Body>) -> Self::Future {
        let body = serde_json::json!({ "error": STARTING_ERROR, "status": "starting" }).to_string();
        let mut response = Response::new(Body::from(body));
        *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(RETRY_AFTER, HeaderValue::from_static("1"));
        std::future::ready(Ok(response))
    }
}

#[cfg(test)]
mod tests {
    use super::served_while_starting;

    #[test]
    fn only_health_and_metrics_are_served_while_starting() {
        for path in ["/health", "/metrics", "/metrics/prometheus"] {
            assert!(served_while_starting(path), "{path}");
        }
        for path in [
            "/api/v1/push",
            "/api/v1/ack",
            "/health/x",
            "/",
            "/api/v1/pop",
        ] {
            assert!(!served_while_starting(path), "{path}");
        }
    }
}
