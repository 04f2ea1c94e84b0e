//! The router's own layers as plain tower services.
//!
//! axum's `from_fn` and `map_response` clone the whole stack below them and
//! box a future for every request; these services call their inner service
//! in place and answer through a small enum future, so a request that
//! passes every check allocates nothing here. Only the rare answers that
//! need work of their own box a future: a token to verify, an error answer
//! whose body must be read to become JSON.
//!
//! - [`Edge`], outermost: preflights (any `OPTIONS`) answered 204 at once;
//!   the request's `http.request` span around everything below it; the
//!   JSON form of every error answer (`edge::json_error_rewrite`, the 413 of the
//!   body limit included); the CORS headers on every answer.
//! - [`Authenticate`]: JWT bearer tokens (`auth.rs`); not in the stack at
//!   all when `JWT_ENABLED` is off.
//! - [`CheckTarget`], on the matched route: the request target's check
//!   (`edge::target_error`).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Instant;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use tower::{Layer, Service};

use super::auth::{self, Verifier};
use super::edge;
use super::error::ApiError;

/// Methods every answer allows (the reference's list).
const ALLOWED_METHODS: HeaderValue = HeaderValue::from_static("GET, POST, PUT, DELETE, OPTIONS");
/// Request headers every answer allows.
const ALLOWED_HEADERS: HeaderValue = HeaderValue::from_static("Content-Type, Authorization");
/// How long browsers may cache a preflight answer: one day, in seconds.
const PREFLIGHT_MAX_AGE: HeaderValue = HeaderValue::from_static("86400");
/// Any origin may call (the contract's permissive policy).
const ANY_ORIGIN: HeaderValue = HeaderValue::from_static("*");
/// The request headers a preflight's answer depends on (caches key on them).
const VARY: HeaderValue = HeaderValue::from_static(
    "origin, access-control-request-method, access-control-request-headers",
);

/// A boxed answer, for the rare paths that need one.
type BoxAnswer = Pin<Box<dyn Future<Output = Response> + Send>>;

/// Layer of [`Edge`].
#[derive(Debug, Clone, Copy)]
pub struct EdgeLayer {
    /// `MAX_BODY_BYTES`, named in the JSON 413.
    body_limit: usize,
}

impl EdgeLayer {
    pub fn new(body_limit: usize) -> Self {
        Self { body_limit }
    }
}

impl<S> Layer<S> for EdgeLayer {
    type Service = Edge<S>;
    fn layer(&self, inner: S) -> Edge<S> {
        Edge {
            inner,
            body_limit: self.body_limit,
        }
    }
}

/// The outermost service (see the module documentation).
#[derive(Debug, Clone)]
pub struct Edge<S> {
    inner: S,
    body_limit: usize,
}

impl<S> Service<Request> for Edge<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
    S::Future: Unpin,
{
    type Response = Response;
    type Error = Infallible;
    type Future = EdgeFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        if req.method() == Method::OPTIONS {
            return EdgeFuture {
                state: EdgeState::Preflight,
                body_limit: self.body_limit,
            };
        }
        let span = super::request_span(&req);
        // the debug lines tower-http's `TraceLayer` wrote, under its targets
        let started = tracing::enabled!(
            target: "tower_http::trace::on_response",
            tracing::Level::DEBUG
        )
        .then(Instant::now);
        let future = {
            let _entered = span.enter();
            tracing::debug!(
                target: "tower_http::trace::on_request",
                "started processing request"
            );
            self.inner.call(req)
        };
        EdgeFuture {
            state: EdgeState::Inner {
                future,
                span,
                started,
            },
            body_limit: self.body_limit,
        }
    }
}

/// The answer of [`Edge`].
pub struct EdgeFuture<F> {
    state: EdgeState<F>,
    body_limit: usize,
}

enum EdgeState<F> {
    Preflight,
    Inner {
        future: F,
        span: tracing::Span,
        started: Option<Instant>,
    },
    /// An error answer being rewritten as JSON (its body is read first).
    Rewrite(BoxAnswer),
    Done,
}

impl<F> Future for EdgeFuture<F>
where
    F: Future<Output = Result<Response, Infallible>> + Unpin,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        loop {
            match &mut this.state {
                EdgeState::Preflight => {
                    this.state = EdgeState::Done;
                    return Poll::Ready(Ok(preflight()));
                }
                EdgeState::Inner {
                    future,
                    span,
                    started,
                } => {
                    let response = {
                        let _entered = span.enter();
                        let Ok(response) = ready!(Pin::new(future).poll(cx));
                        if let Some(started) = started {
                            finished(&response, started.elapsed());
                        }
                        response
                    };
                    let response = json_413(response, this.body_limit);
                    match edge::json_error_rewrite(response) {
                        Ok(response) => {
                            this.state = EdgeState::Done;
                            return Poll::Ready(Ok(with_cors(response)));
                        }
                        Err(rewrite) => this.state = EdgeState::Rewrite(rewrite),
                    }
                }
                EdgeState::Rewrite(rewrite) => {
                    let response = ready!(rewrite.as_mut().poll(cx));
                    this.state = EdgeState::Done;
                    return Poll::Ready(Ok(with_cors(response)));
                }
                EdgeState::Done => panic!("EdgeFuture polled after it answered"),
            }
        }
    }
}

/// tower-http's `DefaultOnResponse` line, at debug.
fn finished(response: &Response, latency: std::time::Duration) {
    tracing::debug!(
        target: "tower_http::trace::on_response",
        latency = %format_args!("{} ms", latency.as_millis()),
        status = i32::from(response.status().as_u16()),
        "finished processing request"
    );
}

/// The answer to a preflight: 204, no body, the CORS headers.
fn preflight() -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::NO_CONTENT;
    let h = response.headers_mut();
    h.insert(header::VARY, VARY);
    h.insert(header::ACCESS_CONTROL_MAX_AGE, PREFLIGHT_MAX_AGE);
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, ANY_ORIGIN);
    h.insert(header::ACCESS_CONTROL_ALLOW_METHODS, ALLOWED_METHODS);
    h.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, ALLOWED_HEADERS);
    response
}

/// The CORS headers every other answer carries.
fn with_cors(mut response: Response) -> Response {
    let h = response.headers_mut();
    h.append(header::VARY, VARY);
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, ANY_ORIGIN);
    h.insert(header::ACCESS_CONTROL_ALLOW_METHODS, ALLOWED_METHODS);
    h.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, ALLOWED_HEADERS);
    response
}

/// `RequestBodyLimitLayer` refuses a body whose `Content-Length` is over the
/// limit with a plain-text 413; the contract's answer is JSON.
fn json_413(response: Response, limit: usize) -> Response {
    if response.status() == StatusCode::PAYLOAD_TOO_LARGE && !edge::is_json(&response) {
        return ApiError::payload_too_large(limit).into_response();
    }
    response
}

/// Layer of [`Authenticate`].
#[derive(Debug, Clone)]
pub struct AuthLayer {
    verifier: Arc<Verifier>,
}

impl AuthLayer {
    pub fn new(verifier: Arc<Verifier>) -> Self {
        Self { verifier }
    }
}

impl<S> Layer<S> for AuthLayer {
    type Service = Authenticate<S>;
    fn layer(&self, inner: S) -> Authenticate<S> {
        Authenticate {
            inner,
            verifier: self.verifier.clone(),
        }
    }
}

/// Refuses requests without a sufficient token and hands the
/// [`Caller`](auth::Caller) to the handlers as a request extension.
#[derive(Debug, Clone)]
pub struct Authenticate<S> {
    inner: S,
    verifier: Arc<Verifier>,
}

impl<S> Service<Request> for Authenticate<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + Unpin + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Answer<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let needed = self.verifier.required_level(req.method(), req.uri().path());
        if needed == auth::Level::Public {
            return Answer::Inner(self.inner.call(req));
        }
        let Some(token) = auth::bearer_token(&req).map(str::to_owned) else {
            return Answer::Now(Some(auth::unauthorized("Authentication required")));
        };
        // the ready service goes with the request; its clone waits for the next
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let verifier = self.verifier.clone();
        Answer::Boxed(Box::pin(async move {
            match auth::admit(&verifier, &token, needed).await {
                Ok(caller) => {
                    let mut req = req;
                    req.extensions_mut().insert(caller);
                    let Ok(response) = inner.call(req).await;
                    response
                }
                Err(refused) => refused,
            }
        }))
    }
}

/// Layer of [`CheckTarget`] (a route layer: it needs the matched route).
#[derive(Debug, Clone, Copy, Default)]
pub struct CheckTargetLayer;

impl<S> Layer<S> for CheckTargetLayer {
    type Service = CheckTarget<S>;
    fn layer(&self, inner: S) -> CheckTarget<S> {
        CheckTarget { inner }
    }
}

/// Refuses a path or query string that no handler could use (`edge.rs`).
#[derive(Debug, Clone)]
pub struct CheckTarget<S> {
    inner: S,
}

impl<S> Service<Request> for CheckTarget<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
    S::Future: Unpin,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Answer<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        match edge::target_error(&req) {
            Some(e) => Answer::Now(Some(e.into_response())),
            None => Answer::Inner(self.inner.call(req)),
        }
    }
}

/// The answer of [`Authenticate`] and [`CheckTarget`]: one made at once, the
/// inner service's, or (verifying a token) a boxed one.
pub enum Answer<F> {
    /// `None` once taken.
    Now(Option<Response>),
    Inner(F),
    Boxed(BoxAnswer),
}

impl<F> Future for Answer<F>
where
    F: Future<Output = Result<Response, Infallible>> + Unpin,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            Answer::Now(response) => Poll::Ready(Ok(response
                .take()
                .expect("Answer polled after it answered"))),
            Answer::Inner(future) => Pin::new(future).poll(cx),
            Answer::Boxed(future) => future.as_mut().poll(cx).map(Ok),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preflights_and_answers_carry_the_reference_headers() {
        let p = preflight();
        assert_eq!(p.status(), StatusCode::NO_CONTENT);
        let names: Vec<&str> = p.headers().keys().map(|k| k.as_str()).collect();
        // tower-http's order, which the wire comparison of the change checked
        assert_eq!(
            names,
            [
                "vary",
                "access-control-max-age",
                "access-control-allow-origin",
                "access-control-allow-methods",
                "access-control-allow-headers",
            ]
        );
        let mut answer = Response::new(Body::empty());
        answer
            .headers_mut()
            .insert(header::VARY, HeaderValue::from_static("accept"));
        answer.headers_mut().insert(
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            HeaderValue::from_static("x"),
        );
        let answer = with_cors(answer);
        let h = answer.headers();
        // a handler's `vary` is kept, its allowed origin replaced
        let vary: Vec<_> = h.get_all(header::VARY).iter().collect();
        assert_eq!(vary, [&HeaderValue::from_static("accept"), &VARY]);
        assert_eq!(h[header::ACCESS_CONTROL_ALLOW_ORIGIN], "*");
        assert_eq!(
            h[header::ACCESS_CONTROL_ALLOW_METHODS],
            "GET, POST, PUT, DELETE, OPTIONS"
        );
        assert_eq!(
            h[header::ACCESS_CONTROL_ALLOW_HEADERS],
            "Content-Type, Authorization"
        );
    }

    #[test]
    fn plain_413s_become_json() {
        let mut plain = Response::new(Body::from("length limit exceeded"));
        *plain.status_mut() = StatusCode::PAYLOAD_TOO_LARGE;
        let answer = json_413(plain, 1024);
        assert!(edge::is_json(&answer));
        assert_eq!(answer.status(), StatusCode::PAYLOAD_TOO_LARGE);
    }
}
