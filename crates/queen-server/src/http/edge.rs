//! The request edge: what every request passes before a handler sees it, and
//! what every error answer looks like on its way out.
//!
//! - [`target_error`]: the path and query string, percent-decoded, must be
//!   UTF-8 and hold no NUL character (PostgreSQL text cannot), and its names
//!   (path parameters, query values of `limits::text_limit`) are bounded; the
//!   answer names the path parameter or query key (the route layer
//!   `layers::CheckTarget` asks it).
//! - [`body_deadline`]: the body must arrive within `HTTP_BODY_TIMEOUT_MS` of
//!   the head, however it is trickled (408 otherwise).
//! - [`json_error_rewrite`]: any 4xx/5xx answer that is not JSON yet (an
//!   extractor's rejection, a layer's plain text) becomes `{"error": ...}`
//!   with its status (`layers::Edge` asks it of every answer).

use std::borrow::Cow;
use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{MatchedPath, Request};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use super::error::ApiError;

/// Decodes `%XX` escapes (and `+` as a space when `plus_is_space`).
pub fn percent_decode(s: &str, plus_is_space: bool) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match b[i] {
            b'%' => match (
                b.get(i + 1).copied().and_then(hex),
                b.get(i + 2).copied().and_then(hex),
            ) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' if plus_is_space => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    out
}

/// Why a decoded part of the request target is refused, if it is.
fn target_problem(what: &str, decoded: &[u8]) -> Option<ApiError> {
    if std::str::from_utf8(decoded).is_err() {
        return Some(ApiError::bad_request(format!("{what} must be valid UTF-8")));
    }
    decoded.contains(&0).then(|| super::limits::nul_error(what))
}

/// Longer than `max` characters (a decoded, valid UTF-8 part of the target)?
fn too_long(what: &str, decoded: &[u8], max: usize) -> Option<ApiError> {
    // characters are never more than bytes: short parts need no count
    if decoded.len() <= max {
        return None;
    }
    let text = std::str::from_utf8(decoded).ok()?;
    super::limits::check_text(what, text, max).err()
}

/// [`percent_decode`], borrowing `s` when it has nothing to decode (most
/// targets): the request target is valid UTF-8 already (`http::Uri`).
fn decode(s: &str, plus_is_space: bool) -> Cow<'_, [u8]> {
    let escaped = |b: &u8| *b == b'%' || (plus_is_space && *b == b'+');
    if s.as_bytes().iter().any(escaped) {
        Cow::Owned(percent_decode(s, plus_is_space))
    } else {
        Cow::Borrowed(s.as_bytes())
    }
}

/// Whether a decoded part of the target is refused ([`target_problem`] says why).
fn is_refused(decoded: &[u8]) -> bool {
    decoded.contains(&0) || std::str::from_utf8(decoded).is_err()
}

/// Why the request target (path and query string) is refused, if it is;
/// records the matched route in the request's span on the way. Names are
/// only built for an answer: a target that passes allocates nothing.
pub fn target_error(req: &Request) -> Option<ApiError> {
    let uri = req.uri();
    let pattern = req
        .extensions()
        .get::<MatchedPath>()
        .map(MatchedPath::as_str);
    if let Some(route) = pattern {
        tracing::Span::current().record("http.route", route);
    }
    let mut pattern_segments = pattern.map(|p| p.split('/'));
    // ephemeral names have a limit of their own (routes::ephemeral)
    let own_limits = pattern.is_some_and(|p| p.starts_with("/api/v1/ephemeral/"));
    for segment in uri.path().split('/') {
        let param = pattern_segments
            .as_mut()
            .and_then(Iterator::next)
            .and_then(|p| p.strip_prefix('{'))
            .and_then(|p| p.strip_suffix('}'));
        let name = || param.map_or_else(|| "path".to_owned(), camel_case);
        let decoded = decode(segment, false);
        if is_refused(&decoded) {
            return target_problem(&name(), &decoded);
        }
        // a named parameter, not a wildcard (`{*key}`: a timer key, checked
        // whole by its route)
        let named = param.is_some_and(|p| !p.starts_with('*'));
        if named {
            if let Some(e) = path_rewritten(&name, &decoded) {
                return Some(e);
            }
        }
        let bounded = named && !own_limits;
        if bounded && decoded.len() > super::limits::MAX_NAME_CHARS {
            if let Some(e) = too_long(&name(), &decoded, super::limits::MAX_NAME_CHARS) {
                return Some(e);
            }
        }
    }
    // no query string: one empty pair, which nothing refuses
    for pair in uri.query()?.split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let key = decode(key, true);
        if is_refused(&key) {
            return target_problem("a query parameter name", &key);
        }
        let key = String::from_utf8_lossy(&key);
        let value = decode(value, true);
        if is_refused(&value) {
            return target_problem(&key, &value);
        }
        let limit = super::limits::text_limit(&key).filter(|_| !own_limits);
        if let Some(e) = limit.and_then(|max| too_long(&key, &value, max)) {
            return Some(e);
        }
    }
    None
}

/// A path parameter no client could have sent as itself (`..`, `a%2F.%2Fb`):
/// the rule of `queen_proto::names::path_problem`, the one every name is
/// created under.
fn path_rewritten(name: &dyn Fn() -> String, decoded: &[u8]) -> Option<ApiError> {
    let text = std::str::from_utf8(decoded).ok()?;
    queen_proto::names::path_problem(text).map(|p| ApiError::bad_request(format!("{} {p}", name())))
}

/// `transaction_id` → `transactionId`: path parameters named as the API's fields.
fn camel_case(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut upper = false;
    for c in s.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// A body that did not arrive in time.
#[derive(Debug)]
pub struct BodyDeadline(pub Duration);

impl fmt::Display for BodyDeadline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "request body not received within {} ms",
            self.0.as_millis()
        )
    }
}

impl StdError for BodyDeadline {}

/// A request body with a total deadline, counted from when the head was read.
struct DeadlineBody {
    inner: Body,
    sleep: Pin<Box<tokio::time::Sleep>>,
    limit: Duration,
}

impl HttpBody for DeadlineBody {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|r| r.map_err(Into::into)));
        }
        if self.sleep.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err(Box::new(BodyDeadline(self.limit)))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// A request map: the request body must be complete within `limit`.
pub fn body_deadline(limit: Duration) -> impl Fn(Request) -> Request + Clone {
    move |req: Request| {
        let (parts, body) = req.into_parts();
        if body.is_end_stream() {
            return Request::from_parts(parts, body);
        }
        let body = Body::new(DeadlineBody {
            inner: body,
            sleep: Box::pin(tokio::time::sleep(limit)),
            limit,
        });
        Request::from_parts(parts, body)
    }
}

/// How reading a body failed, from the error's chain.
pub fn body_error(e: &(dyn StdError + 'static), limit: usize) -> ApiError {
    let mut cur: Option<&(dyn StdError + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(d) = err.downcast_ref::<BodyDeadline>() {
            return ApiError {
                status: StatusCode::REQUEST_TIMEOUT,
                message: d.to_string(),
            };
        }
        if err.to_string().contains("length limit exceeded") {
            return ApiError::payload_too_large(limit);
        }
        cur = err.source();
    }
    ApiError::bad_request(format!("Malformed request body: {e}"))
}

/// Longest error text taken over from a non-JSON error answer.
const MAX_ERROR_TEXT: usize = 4_096;

/// Whether an answer's body is JSON already.
pub fn is_json<B>(response: &axum::http::Response<B>) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"))
}

/// An answer that must be rewritten as JSON, as a future reading its body.
pub type JsonRewrite = Pin<Box<dyn Future<Output = Response> + Send>>;

/// Every error answer is JSON with an `error` field: a 4xx/5xx answer that
/// is not JSON yet comes back as the future that rewrites it (it reads the
/// old body for the message); any other answer comes back as it is.
pub fn json_error_rewrite(response: Response) -> Result<Response, JsonRewrite> {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) || is_json(&response) {
        return Ok(response);
    }
    Err(Box::pin(json_error(response)))
}

/// The JSON form of the error answer `response` (see [`json_error_rewrite`]).
async fn json_error(response: Response) -> Response {
    let status = response.status();
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, MAX_ERROR_TEXT)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .unwrap_or_default();
    let message = if text.is_empty() {
        status.canonical_reason().unwrap_or("Error").to_owned()
    } else {
        text
    };
    let mut out = ApiError { status, message }.into_response();
    // keep what the layers set (allow, retry-after), but not the old body's framing
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            out.headers_mut().append(name.clone(), value.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("a%00b", false), b"a\0b");
        assert_eq!(percent_decode("a+b%2", true), b"a b%2");
        assert_eq!(percent_decode("%ff%FE%", false), [0xff, 0xfe, b'%']);
        assert_eq!(percent_decode("%zz", false), b"%zz");
    }

    #[test]
    fn only_escaped_parts_are_copied() {
        assert!(matches!(decode("plain-name", false), Cow::Borrowed(_)));
        assert!(matches!(decode("a+b", false), Cow::Borrowed(_)));
        assert_eq!(&*decode("a+b", true), b"a b");
        assert_eq!(&*decode("a%00b", false), b"a\0b");
        assert!(is_refused(&decode("a%00b", false)));
        assert!(is_refused(&decode("%ff", true)));
        assert!(!is_refused(&decode("caf%C3%A9", false)));
        // lengths count characters, and short parts are not counted at all
        let e = "é".repeat(200);
        assert!(too_long("queue", e.as_bytes(), 255).is_none());
        let long = "é".repeat(256);
        assert_eq!(
            too_long("queue", long.as_bytes(), 255).unwrap().message,
            "queue must be at most 255 characters"
        );
    }

    #[test]
    fn target_problems_name_the_part() {
        assert!(target_problem("group", b"ok").is_none());
        assert_eq!(
            target_problem("group", b"a\0").unwrap().message,
            "group must not contain NUL characters"
        );
        assert_eq!(
            target_problem("queue", &[0xff]).unwrap().message,
            "queue must be valid UTF-8"
        );
    }
}
