//! The client's error type: what went wrong, and whether trying again can help.

use std::time::Duration;

/// A boxed transport error kept as the source of an [`Error`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Everything a call of this crate can fail with.
///
/// Branch on the variant, or ask [`Error::is_retryable`]: the client already
/// retried what was retryable (see [`crate::RetryPolicy`]) before handing an
/// error back, so a retryable error here means every attempt failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The broker answered with an HTTP error status.
    #[error("{method} {path}: broker answered {status}: {message}")]
    Status {
        method: String,
        path: String,
        status: u16,
        /// The `error` field of the answer, or its text when it was not JSON.
        message: String,
        /// The `code` field of the answer, when it had one.
        code: Option<String>,
        /// The `Retry-After` header, when the broker sent one.
        retry_after: Option<Duration>,
    },
    /// No connection could be opened: nothing was sent.
    #[error("cannot connect to {url}: {source}")]
    Connect {
        url: String,
        #[source]
        source: BoxError,
    },
    /// The broker did not answer in time; the request may or may not have been applied.
    #[error("{url} did not answer within {timeout:?}")]
    Timeout { url: String, timeout: Duration },
    /// The connection failed after the request was sent; it may or may not have been applied.
    #[error("connection to {url} failed: {source}")]
    Transport {
        url: String,
        #[source]
        source: BoxError,
    },
    /// A 2xx answer whose body is not what the API promises.
    #[error("unexpected answer from {url}: {detail}")]
    Decode { url: String, detail: String },
    /// The broker is up but its database is not (a pop answered `success: false`).
    #[error("broker storage unavailable: {0}")]
    Unavailable(String),
    /// A transaction was refused by the broker; nothing of it was applied.
    #[error("transaction failed: {error}")]
    TransactionFailed {
        error: String,
        /// The per-operation results the broker built before it stopped.
        results: Vec<serde_json::Value>,
    },
    /// An argument was refused before anything was sent.
    #[error("invalid argument: {0}")]
    InvalidInput(String),
    /// A payload could not be turned into JSON, or an answer into the requested type.
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    /// The client was built without any broker URL, or with one it cannot use.
    #[error("client configuration: {0}")]
    Config(String),
}

impl Error {
    /// Returns whether the same call may succeed if made again later.
    ///
    /// True for connection failures, timeouts, `429`, `502`, `503`, `504` and
    /// a broker whose database is unavailable. Every call of this crate is
    /// safe to repeat except [`crate::Transaction::commit`] after a timeout or
    /// a broken connection (the commit may have been applied).
    ///
    /// ```
    /// let e = queen_client::Error::Unavailable("database unavailable".into());
    /// assert!(e.is_retryable());
    /// let e = queen_client::Error::InvalidInput("queue name is empty".into());
    /// assert!(!e.is_retryable());
    /// ```
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Status { status, .. } => matches!(status, 429 | 502 | 503 | 504),
            Self::Connect { .. } | Self::Timeout { .. } | Self::Transport { .. } => true,
            Self::Unavailable(_) => true,
            Self::Decode { .. }
            | Self::TransactionFailed { .. }
            | Self::InvalidInput(_)
            | Self::Json(_)
            | Self::Config(_) => false,
        }
    }

    /// Returns the HTTP status of a [`Error::Status`], `None` otherwise.
    ///
    /// ```
    /// # async fn run(client: queen_client::Client) {
    /// match client.admin().queue("missing").await {
    ///     Err(e) if e.status() == Some(404) => println!("no such queue"),
    ///     other => println!("{other:?}"),
    /// }
    /// # }
    /// ```
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Returns whether the request surely never reached a broker.
    pub(crate) fn never_sent(&self) -> bool {
        matches!(self, Self::Connect { .. })
            || matches!(self, Self::Status { status, .. } if *status == 429 || *status == 503)
    }

    /// The delay the broker asked for before the next attempt, if any.
    pub(crate) fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
