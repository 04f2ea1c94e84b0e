//! How to reach PostgreSQL: `DATABASE_URL` or the `PG_*` variables, TLS, and
//! the pool's size and timeouts.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use super::defaults;
use super::env::{at_least_one, ConfigError, Reader};

/// How to reach PostgreSQL.
#[derive(Clone)]
pub struct DbConfig {
    /// `DATABASE_URL`, when set, wins over the `PG_*` variables.
    pub url: Option<String>,
    pub host: String,
    pub port: u16,
    pub user: String,
    pub password: String,
    pub dbname: String,
    /// `PG_USE_SSL`: TLS is required on every connection.
    pub use_ssl: bool,
    /// `PG_SSL_REJECT_UNAUTHORIZED`: the server's certificate must chain to a
    /// trusted root and name the host; `false` encrypts without checking who
    /// answers.
    pub ssl_reject_unauthorized: bool,
    /// `PG_SSL_ROOT_CERT`: a PEM file of CA certificates trusted on top of
    /// the system's.
    pub ssl_root_cert: Option<PathBuf>,
    pub pool_size: usize,
    pub idle_timeout: Duration,
    pub connect_timeout: Duration,
    pub statement_timeout: Duration,
    pub lock_timeout: Duration,
}

impl fmt::Debug for DbConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DbConfig")
            .field("url", &self.url.as_ref().map(|u| redact_url(u)))
            .field("host", &self.host)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .field("dbname", &self.dbname)
            .field("use_ssl", &self.use_ssl)
            .field("ssl_reject_unauthorized", &self.ssl_reject_unauthorized)
            .field("ssl_root_cert", &self.ssl_root_cert)
            .field("pool_size", &self.pool_size)
            .finish_non_exhaustive()
    }
}

/// Replaces the password of a `postgres://user:pass@host/db` URL.
pub(super) fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let creds = &url[scheme + 3..at];
            match creds.find(':') {
                Some(colon) => format!(
                    "{}{}:<redacted>{}",
                    &url[..scheme + 3],
                    &creds[..colon],
                    &url[at..]
                ),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

pub(super) fn read_db(r: &Reader<'_>) -> Result<DbConfig, ConfigError> {
    Ok(DbConfig {
        url: r.raw("DATABASE_URL"),
        host: r.string("PG_HOST", defaults::PG_HOST),
        port: r.parsed("PG_PORT", defaults::PG_PORT)?,
        user: r.string("PG_USER", defaults::PG_USER),
        password: r.string("PG_PASSWORD", defaults::PG_PASSWORD),
        dbname: r.string("PG_DB", defaults::PG_DB),
        use_ssl: r.boolean("PG_USE_SSL", defaults::PG_USE_SSL)?,
        ssl_reject_unauthorized: r.boolean(
            "PG_SSL_REJECT_UNAUTHORIZED",
            defaults::PG_SSL_REJECT_UNAUTHORIZED,
        )?,
        ssl_root_cert: r.raw("PG_SSL_ROOT_CERT").map(PathBuf::from),
        pool_size: at_least_one(
            "DB_POOL_SIZE",
            r.parsed("DB_POOL_SIZE", defaults::DB_POOL_SIZE)?,
        )?,
        idle_timeout: r.millis("DB_IDLE_TIMEOUT", defaults::DB_IDLE_TIMEOUT_MS)?,
        connect_timeout: r.millis("DB_CONNECTION_TIMEOUT", defaults::DB_CONNECTION_TIMEOUT_MS)?,
        statement_timeout: r.millis("DB_STATEMENT_TIMEOUT", defaults::DB_STATEMENT_TIMEOUT_MS)?,
        lock_timeout: r.millis("DB_LOCK_TIMEOUT", defaults::DB_LOCK_TIMEOUT_MS)?,
    })
}
