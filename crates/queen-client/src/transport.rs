//! HTTP to one or several brokers: failover between URLs, bounded retries
//! with backoff, typed errors.
//!
//! Every replica of a Queen cluster serves every route (the HA design), so a
//! request may go to any URL. Requests rotate over the URLs that are up; a
//! URL whose broker cannot be reached is skipped for
//! [`RetryPolicy::down_for`] and the request moves on to the next one at once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use reqwest::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER};
use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};

/// Longest `Retry-After` honoured; a broker asking for more is retried after this.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

/// How failed requests are retried.
///
/// ```
/// use std::time::Duration;
/// let policy = queen_client::RetryPolicy {
///     attempts: 5,
///     ..Default::default()
/// };
/// assert_eq!(policy.first_backoff, Duration::from_millis(100));
/// ```
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Attempts per call, the first included (at least 1).
    pub attempts: u32,
    /// Wait before the second attempt once every URL has failed; doubles each time.
    pub first_backoff: Duration,
    /// Longest wait between two attempts.
    pub max_backoff: Duration,
    /// How long a URL that could not be reached is skipped.
    pub down_for: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            // four tries span about 0.1 + 0.2 + 0.4 s of backoff: long enough
            // to ride over a replica restart, short enough for a CLI
            attempts: 4,
            first_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(2),
            // the official clients retry an unhealthy backend after 5 s
            down_for: Duration::from_secs(5),
        }
    }
}

/// Whether a request may be sent again when its outcome is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Replay {
    /// Repeating it cannot apply it twice (reads, pushes with transaction ids,
    /// acks, lease renewals, upserts).
    Safe,
    /// Only retried when it surely never reached a broker (transactions).
    IfNeverSent,
}

/// One request: method, path with query, optional JSON body.
#[derive(Debug)]
pub(crate) struct Call {
    pub method: Method,
    pub path: String,
    pub body: Option<Bytes>,
    /// Overrides the client's timeout (long polls wait longer).
    pub timeout: Option<Duration>,
    pub replay: Replay,
}

impl Call {
    pub fn get(path: impl Into<String>) -> Self {
        Self::new(Method::GET, path)
    }

    pub fn delete(path: impl Into<String>) -> Self {
        Self::new(Method::DELETE, path)
    }

    pub fn post(path: impl Into<String>, body: &impl serde::Serialize) -> Result<Self> {
        let mut call = Self::new(Method::POST, path);
        call.body = Some(serde_json::to_vec(body)?.into());
        Ok(call)
    }

    fn new(method: Method, path: impl Into<String>) -> Self {
        Self {
            method,
            path: path.into(),
            body: None,
            timeout: None,
            replay: Replay::Safe,
        }
    }

    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = Some(t);
        self
    }

    pub fn replay(mut self, r: Replay) -> Self {
        self.replay = r;
        self
    }
}

/// A successful answer: its status and body bytes (empty for `204`).
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: StatusCode,
    pub body: Bytes,
    pub url: String,
}

impl Answer {
    /// Parses the body as `T`.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_slice(&self.body).map_err(|e| Error::Decode {
            url: self.url.clone(),
            detail: e.to_string(),
        })
    }

    /// Whether the broker answered `204 No Content`.
    pub fn is_empty(&self) -> bool {
        self.status == StatusCode::NO_CONTENT || self.body.is_empty()
    }
}

#[derive(Debug)]
struct Endpoint {
    base: String,
    /// Until when this URL is skipped after a failure to reach it.
    down_until: Mutex<Option<Instant>>,
}

impl Endpoint {
    fn is_up(&self, now: Instant) -> bool {
        let down = self.down_until.lock().unwrap_or_else(|e| e.into_inner());
        down.is_none_or(|until| now >= until)
    }

    fn mark(&self, down_until: Option<Instant>) {
        *self.down_until.lock().unwrap_or_else(|e| e.into_inner()) = down_until;
    }
}

/// The shared HTTP side of a [`crate::Client`].
#[derive(Debug)]
pub(crate) struct Transport {
    http: reqwest::Client,
    endpoints: Vec<Endpoint>,
    next: AtomicUsize,
    auth: Option<HeaderValue>,
    timeout: Duration,
    pub(crate) retry: RetryPolicy,
}

impl Transport {
    pub fn new(
        urls: &[String],
        token: Option<&str>,
        timeout: Duration,
        retry: RetryPolicy,
        max_idle_per_host: usize,
    ) -> Result<Self> {
        if urls.is_empty() {
            return Err(Error::Config("no broker URL given".into()));
        }
        let mut endpoints = Vec::with_capacity(urls.len());
        for url in urls {
            let base = url.trim().trim_end_matches('/').to_owned();
            let parsed = reqwest::Url::parse(&base)
                .map_err(|e| Error::Config(format!("broker URL {base:?}: {e}")))?;
            if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
                return Err(Error::Config(format!(
                    "broker URL {base:?} must look like http://host:port"
                )));
            }
            endpoints.push(Endpoint {
                base,
                down_until: Mutex::new(None),
            });
        }
        let auth = match token {
            Some(t) => Some(
                HeaderValue::from_str(&format!("Bearer {}", t.trim())).map_err(|_| {
                    Error::Config("the token has characters a header cannot carry".into())
                })?,
            ),
            None => None,
        };
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(max_idle_per_host)
            .tcp_nodelay(true)
            .build()
            .map_err(|e| Error::Config(format!("build HTTP client: {e}")))?;
        Ok(Self {
            http,
            endpoints,
            next: AtomicUsize::new(0),
            auth,
            timeout,
            retry,
        })
    }

    /// The broker URLs, as given.
    pub fn urls(&self) -> impl Iterator<Item = &str> {
        self.endpoints.iter().map(|e| e.base.as_str())
    }

    /// Picks the next URL that is up, rotating; when none is, the next one anyway.
    fn pick(&self, now: Instant) -> &Endpoint {
        let n = self.endpoints.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        (0..n)
            .map(|i| &self.endpoints[(start + i) % n])
            .find(|e| e.is_up(now))
            .unwrap_or(&self.endpoints[start % n])
    }

    /// Sends `call`, failing over and retrying as the policy allows.
    pub async fn send(&self, call: &Call) -> Result<Answer> {
        let attempts = self.retry.attempts.max(1);
        let mut backoff = self.retry.first_backoff;
        let mut failed_in_round = 0usize;
        let mut attempt = 1;
        loop {
            let endpoint = self.pick(Instant::now());
            let err = match self.send_once(endpoint, call).await {
                Ok(answer) => {
                    endpoint.mark(None);
                    return Ok(answer);
                }
                Err(e) => e,
            };
            let replayable = match call.replay {
                Replay::Safe => err.is_retryable(),
                Replay::IfNeverSent => err.is_retryable() && err.never_sent(),
            };
            if !replayable || attempt >= attempts {
                return Err(err);
            }
            attempt += 1;
            if matches!(
                err,
                Error::Connect { .. }
                    | Error::Status {
                        status: 502..=504,
                        ..
                    }
            ) {
                endpoint.mark(Some(Instant::now() + self.retry.down_for));
            }
            tracing::debug!(url = %endpoint.base, path = %call.path, attempt, error = %err, "retrying request");
            failed_in_round += 1;
            // another URL is worth trying at once; after a full round, back off
            let others_up = self.endpoints.iter().any(|e| e.is_up(Instant::now()));
            if failed_in_round < self.endpoints.len() && others_up && err.retry_after().is_none() {
                continue;
            }
            failed_in_round = 0;
            // a Retry-After is honoured up to a bound, so a bad header cannot park a caller
            let wait = err
                .retry_after()
                .map_or_else(|| jitter(backoff), |w| w.min(MAX_RETRY_AFTER));
            tokio::time::sleep(wait).await;
            backoff = (backoff * 2).min(self.retry.max_backoff);
        }
    }

    async fn send_once(&self, endpoint: &Endpoint, call: &Call) -> Result<Answer> {
        let url = format!("{}{}", endpoint.base, call.path);
        let timeout = call.timeout.unwrap_or(self.timeout);
        let mut req = self
            .http
            .request(call.method.clone(), &url)
            .timeout(timeout);
        if let Some(auth) = &self.auth {
            req = req.header(AUTHORIZATION, auth.clone());
        }
        if let Some(body) = &call.body {
            req = req
                .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
                .body(body.clone());
        }
        let classify = |e: reqwest::Error| classify(e, &url, timeout);
        let resp = req.send().await.map_err(classify)?;
        let status = resp.status();
        let retry_after = resp
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let body = resp.bytes().await.map_err(classify)?;
        if status.is_success() {
            return Ok(Answer { status, body, url });
        }
        let (message, code) = error_text(&body);
        Err(Error::Status {
            method: call.method.to_string(),
            path: call.path.clone(),
            status: status.as_u16(),
            message: if message.is_empty() {
                status.canonical_reason().unwrap_or("error").to_owned()
            } else {
                message
            },
            code,
            retry_after,
        })
    }

    /// Sends `call` and parses the JSON answer.
    pub async fn json<T: DeserializeOwned>(&self, call: &Call) -> Result<T> {
        self.send(call).await?.json()
    }
}

fn classify(e: reqwest::Error, url: &str, timeout: Duration) -> Error {
    let url = url.to_owned();
    if e.is_timeout() {
        Error::Timeout { url, timeout }
    } else if e.is_connect() {
        Error::Connect {
            url,
            source: Box::new(e),
        }
    } else {
        Error::Transport {
            url,
            source: Box::new(e),
        }
    }
}

/// Reads `{"error": .., "code": ..}` from an error body, or its text.
fn error_text(body: &[u8]) -> (String, Option<String>) {
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(v) => {
            let message = match v.get("error") {
                Some(serde_json::Value::String(s)) => s.clone(),
                Some(other) if !other.is_null() => other.to_string(),
                _ => v.to_string(),
            };
            let code = v.get("code").and_then(|c| c.as_str()).map(str::to_owned);
            (message, code)
        }
        Err(_) => (String::from_utf8_lossy(body).trim().to_owned(), None),
    }
}

/// A wait between half of `d` and `d`, so that many clients do not retry in step.
fn jitter(d: Duration) -> Duration {
    let half = d / 2;
    half + half.mul_f64(fastrand::f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_text_reads_the_error_field_or_the_text() {
        assert_eq!(
            error_text(br#"{"error":"queue is required","code":"bad"}"#),
            ("queue is required".to_owned(), Some("bad".to_owned()))
        );
        assert_eq!(
            error_text(b"Bad Gateway\n"),
            ("Bad Gateway".to_owned(), None)
        );
    }

    #[test]
    fn jitter_stays_within_half_and_whole() {
        for _ in 0..100 {
            let j = jitter(Duration::from_millis(200));
            assert!(j >= Duration::from_millis(100) && j <= Duration::from_millis(200));
        }
    }

    #[test]
    fn urls_are_checked() {
        let bad = Transport::new(
            &["localhost:6632".into()],
            None,
            Duration::from_secs(1),
            RetryPolicy::default(),
            4,
        );
        assert!(matches!(bad, Err(Error::Config(_))), "{bad:?}");
        assert!(matches!(
            Transport::new(&[], None, Duration::from_secs(1), RetryPolicy::default(), 4),
            Err(Error::Config(_))
        ));
        let ok = Transport::new(
            &["http://127.0.0.1:1/".into(), "http://127.0.0.1:2".into()],
            None,
            Duration::from_secs(1),
            RetryPolicy::default(),
            4,
        )
        .unwrap();
        assert_eq!(
            ok.urls().collect::<Vec<_>>(),
            ["http://127.0.0.1:1", "http://127.0.0.1:2"]
        );
    }

    #[test]
    fn pick_skips_urls_that_are_down() {
        let t = Transport::new(
            &[
                "http://a:1".into(),
                "http://b:1".into(),
                "http://c:1".into(),
            ],
            None,
            Duration::from_secs(1),
            RetryPolicy::default(),
            4,
        )
        .unwrap();
        let now = Instant::now();
        t.endpoints[1].mark(Some(now + Duration::from_secs(60)));
        for _ in 0..10 {
            assert_ne!(t.pick(now).base, "http://b:1");
        }
        // when every URL is down, one is still tried
        for e in &t.endpoints {
            e.mark(Some(now + Duration::from_secs(60)));
        }
        let _ = t.pick(now);
        // a URL comes back once its time is up
        t.endpoints[0].mark(None);
        assert_eq!(t.pick(now).base, "http://a:1");
    }
}
