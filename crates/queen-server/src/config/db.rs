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
    /// `PG_HOST`: one host or a comma list; with several, the broker
    /// connects to the first that accepts writes (issue 16).
    pub host: String,
    /// `PG_PORT`: one port for every host, or one per host.
    pub ports: Vec<u16>,
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
    /// Whether `DB_POOL_SIZE` was set: unset, the pool is sized to fit the
    /// server's `max_connections` once it is known.
    pub pool_size_explicit: bool,
    pub idle_timeout: Duration,
    pub connect_timeout: Duration,
    pub statement_timeout: Duration,
    pub lock_timeout: Duration,
    /// `DB_KEEPALIVES_IDLE`: TCP keepalive idle time; zero turns keepalives off.
    pub keepalives_idle: Duration,
    /// `DB_KEEPALIVES_INTERVAL`: gap between unanswered keepalive probes.
    pub keepalives_interval: Duration,
    /// `DB_KEEPALIVES_COUNT`: unanswered probes before the kernel drops the link.
    pub keepalives_count: u32,
    /// `DB_TCP_USER_TIMEOUT_MS`: sent data unacknowledged this long drops the
    /// link; zero leaves the kernel's default.
    pub tcp_user_timeout: Duration,
    /// `DB_PROBE_INTERVAL_MS`: period of the liveness probe.
    pub probe_interval: Duration,
    /// `DB_PROBE_TIMEOUT_MS`: a probe unanswered this long declares the
    /// database hung: in-flight calls are abandoned, pushes go to the spool.
    pub probe_timeout: Duration,
}

impl DbConfig {
    /// The client-side deadline of one database operation: the statement
    /// timeout plus a margin, so the server's own cancellation comes first
    /// when the server still works.
    pub fn op_deadline(&self) -> Duration {
        self.statement_timeout + Duration::from_millis(defaults::DB_OP_DEADLINE_MARGIN_MS)
    }

    /// Where the broker connects, for messages: the URL (password
    /// redacted), or `user@host:port/db` for each host.
    pub fn target(&self) -> String {
        if let Some(url) = &self.url {
            return redact_url(url);
        }
        let hosts = split_list(&self.host);
        hosts
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let port = self
                    .ports
                    .get(i)
                    .or(self.ports.first())
                    .copied()
                    .unwrap_or(5432);
                format!("{}@{h}:{port}/{}", self.user, self.dbname)
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// How many hosts the configuration names.
    pub fn host_count(&self) -> usize {
        match &self.url {
            Some(url) => url_host_count(url),
            None => split_list(&self.host).len().max(1),
        }
    }
}

/// The non-empty entries of a comma list, trimmed.
pub fn split_list(text: &str) -> Vec<&str> {
    text.split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .collect()
}

/// How many hosts a `postgresql://` URL or a `key=value` string names.
fn url_host_count(url: &str) -> usize {
    url.parse::<tokio_postgres::Config>()
        .map(|c| c.get_hosts().len().max(1))
        .unwrap_or(1)
}

/// Parses `PG_PORT`: one port, or a comma list with one per host.
fn read_ports(r: &Reader<'_>, hosts: usize) -> Result<Vec<u16>, ConfigError> {
    let Some(text) = r.raw("PG_PORT") else {
        return Ok(vec![defaults::PG_PORT]);
    };
    let ports = split_list(&text)
        .into_iter()
        .map(|p| {
            p.parse::<u16>()
                .map_err(|e| ConfigError::new("PG_PORT", text.clone(), e.to_string()))
        })
        .collect::<Result<Vec<u16>, ConfigError>>()?;
    match ports.len() {
        0 => Err(ConfigError::new("PG_PORT", text, "no port given")),
        1 => Ok(ports),
        n if n == hosts => Ok(ports),
        n => Err(ConfigError::new(
            "PG_PORT",
            text,
            format!("{n} ports for {hosts} hosts in PG_HOST: give one port, or one per host"),
        )),
    }
}

impl fmt::Debug for DbConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DbConfig")
            .field("url", &self.url.as_ref().map(|u| redact_url(u)))
            .field("host", &self.host)
            .field("ports", &self.ports)
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
    let host = r.string("PG_HOST", defaults::PG_HOST);
    if split_list(&host).is_empty() {
        return Err(ConfigError::new("PG_HOST", host, "no host given"));
    }
    let ports = read_ports(r, split_list(&host).len())?;
    let secs = |var: &'static str, default: u64| -> Result<Duration, ConfigError> {
        Ok(Duration::from_secs(r.parsed(var, default)?))
    };
    Ok(DbConfig {
        url: r.raw("DATABASE_URL"),
        host,
        ports,
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
        pool_size_explicit: r.raw("DB_POOL_SIZE").is_some(),
        idle_timeout: r.millis("DB_IDLE_TIMEOUT", defaults::DB_IDLE_TIMEOUT_MS)?,
        connect_timeout: r.millis("DB_CONNECTION_TIMEOUT", defaults::DB_CONNECTION_TIMEOUT_MS)?,
        statement_timeout: r.millis("DB_STATEMENT_TIMEOUT", defaults::DB_STATEMENT_TIMEOUT_MS)?,
        lock_timeout: r.millis("DB_LOCK_TIMEOUT", defaults::DB_LOCK_TIMEOUT_MS)?,
        keepalives_idle: secs("DB_KEEPALIVES_IDLE", defaults::DB_KEEPALIVES_IDLE_SECS)?,
        keepalives_interval: secs(
            "DB_KEEPALIVES_INTERVAL",
            defaults::DB_KEEPALIVES_INTERVAL_SECS,
        )?,
        keepalives_count: r.parsed("DB_KEEPALIVES_COUNT", defaults::DB_KEEPALIVES_COUNT)?,
        tcp_user_timeout: r.millis("DB_TCP_USER_TIMEOUT_MS", defaults::DB_TCP_USER_TIMEOUT_MS)?,
        probe_interval: at_least_one_ms(
            "DB_PROBE_INTERVAL_MS",
            r.millis("DB_PROBE_INTERVAL_MS", defaults::DB_PROBE_INTERVAL_MS)?,
        )?,
        probe_timeout: at_least_one_ms(
            "DB_PROBE_TIMEOUT_MS",
            r.millis("DB_PROBE_TIMEOUT_MS", defaults::DB_PROBE_TIMEOUT_MS)?,
        )?,
    })
}

/// Refuses a zero duration.
fn at_least_one_ms(var: &'static str, d: Duration) -> Result<Duration, ConfigError> {
    if d.is_zero() {
        Err(ConfigError::new(var, "0", "must be at least 1"))
    } else {
        Ok(d)
    }
}
