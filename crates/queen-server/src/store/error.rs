//! The one place that reads SQLSTATEs: PostgreSQL and pool errors become
//! [`StoreError`], classified by code for the callers that branch on it, with
//! the original error kept as the source.

use std::fmt;
use std::sync::Arc;

use deadpool_postgres::PoolError;
use tokio_postgres::error::SqlState;

/// What went wrong talking to PostgreSQL, classified for the callers that branch on it.
///
/// The texts are part of the behaviour: `Rejected` and `UniqueViolation` are
/// what a client reads in a 400 answer or a failed transaction, the others are
/// logged and written to the spool's `failed/` records.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The database cannot be reached (connection refused or lost, shutdown, pool timeout).
    #[error("database unavailable: {0}")]
    Unavailable(#[source] DbError),
    /// A serialization failure or deadlock that outlived the retries.
    #[error("conflicting transaction: {0}")]
    Conflict(#[source] DbError),
    /// A unique constraint refused a row (a transaction pushing a known transactionId).
    #[error("{0}")]
    UniqueViolation(#[source] DbError),
    /// A stored function refused the request on purpose (`RAISE` in our SQL).
    #[error("{0}")]
    Rejected(#[source] DbError),
    /// PostgreSQL refused a value (SQLSTATE class 22, "data exception": a NUL
    /// in text or JSON, a number or time out of range, a malformed value): the
    /// request carried it, so it is the client's to fix (400). The text names
    /// the kind of value, never the server's message.
    #[error("{}", value_refusal(.0.code()))]
    InvalidValue(#[source] DbError),
    /// A statement cancelled by `statement_timeout` (SQLSTATE 57014) or a lock
    /// not granted within `lock_timeout` (55P03): the server did not answer in time.
    #[error("database error: {}", .0.coded())]
    Timeout(#[source] DbError),
    /// The schema is not migrated yet.
    #[error("database schema not ready")]
    NotReady,
    /// Anything else: a bug or an operator problem; logged, answered with a generic 500.
    #[error("database error: {}", .0.coded())]
    Other(#[source] DbError),
}

impl StoreError {
    /// True when the database could not be reached at all.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Self::Unavailable(_) | Self::NotReady)
    }

    /// True when a statement was cancelled by `statement_timeout`.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::Timeout(_))
    }

    /// True when running the same statement again may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Conflict(_))
    }

    /// True when the request itself was refused (our own `RAISE`, a
    /// duplicate row, a value PostgreSQL cannot store): a 400, not a failure.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            Self::Rejected(_) | Self::UniqueViolation(_) | Self::InvalidValue(_)
        )
    }

    /// The text a client may read: a refusal's own text, a fixed sentence
    /// for everything else (the server's messages, SQLSTATEs and causes go to
    /// the log only). `http/error.rs` answers with it, and so does a failed
    /// `/transaction`.
    pub fn client_text(&self) -> String {
        match self {
            Self::Unavailable(_) | Self::NotReady => "Database unavailable".into(),
            Self::Conflict(_) | Self::Timeout(_) => "Database busy; retry later".into(),
            Self::Rejected(_) | Self::UniqueViolation(_) | Self::InvalidValue(_) => {
                self.to_string()
            }
            Self::Other(_) => "Internal database error".into(),
        }
    }

    /// The class as a metrics label.
    pub fn class(&self) -> &'static str {
        match self {
            Self::Unavailable(_) => "unavailable",
            Self::Conflict(_) => "conflict",
            Self::UniqueViolation(_) => "unique_violation",
            Self::Rejected(_) => "rejected",
            Self::InvalidValue(_) => "invalid_value",
            Self::Timeout(_) => "timeout",
            Self::NotReady => "not_ready",
            Self::Other(_) => "other",
        }
    }

    /// The server's refusal of the broker's credentials, when that is what
    /// this error is (see [`DbError::credentials_refused`]).
    pub fn credentials_refused(&self) -> Option<String> {
        match self {
            Self::Unavailable(e) => e.credentials_refused(),
            _ => None,
        }
    }

    /// An unavailable error from the store's own machinery (not PostgreSQL).
    pub(crate) fn unavailable(what: &'static str) -> Self {
        Self::Unavailable(DbError::new(Cause::Internal(what.into())))
    }

    /// A refusal decided by the store itself (no SQL raised it), with the
    /// text the client reads.
    pub(crate) fn rejected(text: impl Into<String>) -> Self {
        Self::Rejected(DbError::new(Cause::Internal(text.into())))
    }

    /// An unclassified error from the store's own machinery, with its cause.
    pub(crate) fn other(
        context: &'static str,
        e: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::Other(DbError::new(Cause::Context(context, Box::new(e))))
    }

    /// An unclassified error from the store's own machinery or its setup.
    pub(crate) fn internal(what: impl Into<String>) -> Self {
        Self::Other(DbError::new(Cause::Internal(what.into())))
    }
}

/// The error a [`StoreError`] came from. Shared (cheap to clone), so one
/// failure can answer every request of a merged push flight.
#[derive(Clone)]
pub struct DbError(Arc<Cause>);

enum Cause {
    Postgres(tokio_postgres::Error),
    Pool(PoolError),
    /// A failure of the store's own machinery, with the error behind it.
    Context(&'static str, Box<dyn std::error::Error + Send + Sync>),
    /// A failure of the store's own machinery (a stopped task, a missing answer).
    Internal(String),
}

impl DbError {
    fn new(cause: Cause) -> Self {
        Self(Arc::new(cause))
    }

    /// The SQLSTATE, when PostgreSQL answered with one.
    pub fn code(&self) -> Option<&SqlState> {
        match &*self.0 {
            Cause::Postgres(e) => e.code(),
            _ => None,
        }
    }

    /// `code: message` when PostgreSQL refused the credentials: SQLSTATE
    /// class 28, "invalid authorization specification" (28000 for a role
    /// that does not exist or no `pg_hba.conf` rule, 28P01 for a wrong
    /// password). `None` for every other error.
    pub fn credentials_refused(&self) -> Option<String> {
        match &*self.0 {
            Cause::Postgres(e) => refused_credentials(e),
            _ => None,
        }
    }

    /// `code: message` for errors PostgreSQL reported, the plain text otherwise.
    fn coded(&self) -> String {
        match self.code() {
            Some(code) => format!("{}: {self}", code.code()),
            None => self.to_string(),
        }
    }

    /// A test double: an error with `message` as its text.
    #[cfg(test)]
    pub(crate) fn message(message: &str) -> Self {
        Self::new(Cause::Internal(message.to_owned()))
    }
}

impl fmt::Display for DbError {
    /// The server's message for errors PostgreSQL reported; otherwise the
    /// error with its causes, `outer: inner: …` ("error performing TLS
    /// handshake" alone does not say that the certificate was refused).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &*self.0 {
            Cause::Postgres(e) => match e.as_db_error() {
                Some(db) => f.write_str(db.message()),
                None => f.write_str(&with_causes(e)),
            },
            Cause::Pool(e) => write!(f, "{e}"),
            Cause::Context(context, e) => write!(f, "{context}: {e}"),
            Cause::Internal(text) => f.write_str(text),
        }
    }
}

impl fmt::Debug for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &*self.0 {
            Cause::Postgres(e) => fmt::Debug::fmt(e, f),
            Cause::Pool(e) => fmt::Debug::fmt(e, f),
            Cause::Context(context, e) => write!(f, "{context}: {e:?}"),
            Cause::Internal(text) => fmt::Debug::fmt(text, f),
        }
    }
}

impl std::error::Error for DbError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &*self.0 {
            Cause::Postgres(e) => Some(e),
            Cause::Pool(e) => Some(e),
            Cause::Context(_, e) => Some(&**e),
            Cause::Internal(_) => None,
        }
    }
}

/// The client's text for a value PostgreSQL refused (class 22), by SQLSTATE.
fn value_refusal(code: Option<&SqlState>) -> &'static str {
    match code.map(SqlState::code) {
        // untranslatable_character, character_not_in_repertoire
        Some("22P05" | "22021") => {
            "invalid value: text holds a character that cannot be stored (NUL)"
        }
        // numeric_value_out_of_range
        Some("22003") => "invalid value: a number is out of range",
        // datetime_field_overflow, invalid_datetime_format, interval_field_overflow
        Some("22008" | "22007" | "22015") => "invalid value: a time is out of range",
        // string_data_right_truncation
        Some("22001") => "invalid value: a text is too long",
        _ => "invalid value: a value cannot be stored",
    }
}

/// `code: message` when `e` is the server refusing the credentials
/// (SQLSTATE class 28), for [`connect`](super::connect) to remember which
/// host refused them.
pub(super) fn refused_credentials(e: &tokio_postgres::Error) -> Option<String> {
    let db = e.as_db_error()?;
    let code = db.code().code();
    code.starts_with("28")
        .then(|| format!("{code}: {}", db.message()))
}

/// What a SQLSTATE means to the callers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Unavailable,
    Conflict,
    Unique,
    Rejected,
    Value,
    Timeout,
    NotReady,
    Other,
}

/// Classifies a SQLSTATE: class 08, the shutdown/overload codes, a
/// read-only server (a standby) and refused credentials (class 28) mean the
/// primary cannot be used, 40001/40P01 are worth retrying, 23505 is a duplicate
/// row, our own `RAISE`s are refusals, class 22 is a value the database
/// cannot hold, a missing schema object means the migrations have not run.
fn classify(code: &SqlState) -> Class {
    if code.code().starts_with("08")
        || *code == SqlState::ADMIN_SHUTDOWN
        || *code == SqlState::CRASH_SHUTDOWN
        || *code == SqlState::CANNOT_CONNECT_NOW
        || *code == SqlState::TOO_MANY_CONNECTIONS
        // a standby (or a demoted primary): this connection takes no writes
        || *code == SqlState::READ_ONLY_SQL_TRANSACTION
        // the credentials refused (no such role, a wrong password, no
        // pg_hba.conf rule): the database cannot be used as configured, so
        // pushes wait in the spool until an operator fixes them
        || code.code().starts_with("28")
    {
        Class::Unavailable
    } else if *code == SqlState::T_R_SERIALIZATION_FAILURE
        || *code == SqlState::T_R_DEADLOCK_DETECTED
    {
        Class::Conflict
    } else if *code == SqlState::UNIQUE_VIOLATION {
        Class::Unique
    } else if *code == SqlState::RAISE_EXCEPTION
        || *code == SqlState::NO_DATA_FOUND
        || *code == SqlState::INVALID_PARAMETER_VALUE
    {
        Class::Rejected
    } else if *code == SqlState::QUERY_CANCELED || *code == SqlState::LOCK_NOT_AVAILABLE {
        Class::Timeout
    } else if code.code().starts_with("22") {
        // data exception: a value of the request the database cannot hold
        Class::Value
    } else if *code == SqlState::UNDEFINED_FUNCTION
        || *code == SqlState::UNDEFINED_TABLE
        || *code == SqlState::INVALID_SCHEMA_NAME
    {
        Class::NotReady
    } else {
        Class::Other
    }
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(e: tokio_postgres::Error) -> Self {
        let class = match e.code() {
            Some(code) => classify(code),
            None if is_connection_failure(&e) => Class::Unavailable,
            None => Class::Other,
        };
        let source = DbError::new(Cause::Postgres(e));
        match class {
            Class::Unavailable => Self::Unavailable(source),
            Class::Conflict => Self::Conflict(source),
            Class::Unique => Self::UniqueViolation(source),
            Class::Rejected => Self::Rejected(source),
            Class::Value => Self::InvalidValue(source),
            Class::Timeout => Self::Timeout(source),
            Class::NotReady => Self::NotReady,
            Class::Other => Self::Other(source),
        }
    }
}

impl From<PoolError> for StoreError {
    fn from(e: PoolError) -> Self {
        match e {
            PoolError::Backend(e) => e.into(),
            other => Self::Unavailable(DbError::new(Cause::Pool(other))),
        }
    }
}

/// The error and its causes, `outer: inner: …`.
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

/// True for errors without a SQLSTATE that mean the server could not be
/// reached or the link broke: closed connections, I/O errors, connect and
/// server timeouts. The driver exposes no error kind, so the last two are
/// told by the text of its own (not the server's) messages.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlstates_are_classified_by_code() {
        let cases = [
            ("08006", Class::Unavailable),
            ("08001", Class::Unavailable),
            ("57P01", Class::Unavailable),
            ("57P02", Class::Unavailable),
            ("57P03", Class::Unavailable),
            ("53300", Class::Unavailable),
            ("25006", Class::Unavailable),
            ("28000", Class::Unavailable),
            ("28P01", Class::Unavailable),
            ("40001", Class::Conflict),
            ("40P01", Class::Conflict),
            ("23505", Class::Unique),
            ("P0001", Class::Rejected),
            ("P0002", Class::Rejected),
            ("22023", Class::Rejected),
            ("57014", Class::Timeout),
            ("55P03", Class::Timeout),
            ("42883", Class::NotReady),
            ("42P01", Class::NotReady),
            ("3F000", Class::NotReady),
            ("22P02", Class::Value),
            ("22P05", Class::Value),
            ("22021", Class::Value),
            ("22003", Class::Value),
            ("22008", Class::Value),
            ("XX000", Class::Other),
        ];
        for (code, want) in cases {
            assert_eq!(classify(&SqlState::from_code(code)), want, "{code}");
        }
    }

    #[test]
    fn texts_keep_their_shape_and_the_source_is_kept() {
        let e = StoreError::Timeout(DbError::message("canceling statement"));
        assert!(e.is_timeout() && !e.is_unavailable() && !e.is_retryable());
        assert_eq!(e.to_string(), "database error: canceling statement");
        let e = StoreError::other("building pool", std::io::Error::other("no runtime"));
        assert_eq!(e.to_string(), "database error: building pool: no runtime");
        let source = std::error::Error::source(&e).expect("a source");
        assert!(source.source().is_some(), "the cause behind the context");
        let e = StoreError::unavailable("push batcher stopped");
        assert_eq!(e.to_string(), "database unavailable: push batcher stopped");
        assert_eq!(e.class(), "unavailable");
    }
}
