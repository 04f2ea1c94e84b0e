//! The one place that reads SQLSTATEs: PostgreSQL errors become [`StoreError`].

use deadpool_postgres::PoolError;
use tokio_postgres::error::SqlState;

/// What went wrong talking to PostgreSQL, classified for the callers that branch on it.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database cannot be reached (connection refused or lost, shutdown, pool timeout).
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// A serialization failure or deadlock that outlived the retries.
    #[error("conflicting transaction: {0}")]
    Conflict(String),
    /// A unique constraint refused a row (a transaction pushing a known transactionId).
    #[error("{0}")]
    UniqueViolation(String),
    /// A stored function refused the request on purpose (`RAISE` in our SQL).
    #[error("{0}")]
    Rejected(String),
    /// The schema is not migrated yet.
    #[error("database schema not ready")]
    NotReady,
    /// Anything else: a bug or an operator problem; logged, answered with a generic 500.
    #[error("database error: {0}")]
    Other(String),
}

impl StoreError {
    /// True when the database could not be reached at all.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Self::Unavailable(_) | Self::NotReady)
    }

    /// True when a statement was cancelled by `statement_timeout` (SQLSTATE 57014):
    /// the server did not answer in time.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::Other(m) if m.starts_with("57014"))
    }

    /// True when running the same statement again may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Conflict(_))
    }
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(e: tokio_postgres::Error) -> Self {
        let Some(db) = e.as_db_error() else {
            return if is_connection_failure(&e) {
                Self::Unavailable(with_causes(&e))
            } else {
                Self::Other(with_causes(&e))
            };
        };
        let code = db.code();
        let message = db.message().to_owned();
        if code.code().starts_with("08")
            || *code == SqlState::ADMIN_SHUTDOWN
            || *code == SqlState::CRASH_SHUTDOWN
            || *code == SqlState::CANNOT_CONNECT_NOW
            || *code == SqlState::TOO_MANY_CONNECTIONS
        {
            Self::Unavailable(message)
        } else if *code == SqlState::T_R_SERIALIZATION_FAILURE
            || *code == SqlState::T_R_DEADLOCK_DETECTED
        {
            Self::Conflict(message)
        } else if *code == SqlState::UNIQUE_VIOLATION {
            Self::UniqueViolation(message)
        } else if *code == SqlState::RAISE_EXCEPTION
            || *code == SqlState::NO_DATA_FOUND
            || *code == SqlState::INVALID_PARAMETER_VALUE
        {
            Self::Rejected(message)
        } else if *code == SqlState::UNDEFINED_FUNCTION
            || *code == SqlState::UNDEFINED_TABLE
            || *code == SqlState::INVALID_SCHEMA_NAME
        {
            Self::NotReady
        } else {
            Self::Other(format!("{}: {message}", code.code()))
        }
    }
}

/// The error and its causes, `outer: inner: …` ("error performing TLS
/// handshake" alone does not say that the certificate was refused).
fn with_causes(e: &tokio_postgres::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let part = s.to_string();
        if !text.ends_with(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

/// True for errors that mean the server could not be reached or the link broke:
/// closed connections, I/O errors, connect and server timeouts.
fn is_connection_failure(e: &tokio_postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if s.is::<std::io::Error>() {
            return true;
        }
        source = s.source();
    }
    let text = e.to_string();
    text.starts_with("error connecting")
        || text.starts_with("error communicating")
        || text.starts_with("timeout")
}

impl From<PoolError> for StoreError {
    fn from(e: PoolError) -> Self {
        match e {
            PoolError::Backend(e) => e.into(),
            other => Self::Unavailable(other.to_string()),
        }
    }
}
