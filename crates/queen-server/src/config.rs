//! Configuration from environment variables, with the reference broker's names.
//!
//! Every variable is read through [`EnvSource`], so tests pass a map instead of
//! touching the process environment, and every error names its variable.

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;
use std::sync::Mutex;
use std::time::Duration;

/// Where configuration values come from.
pub trait EnvSource {
    /// Returns the value of `name`, if set.
    fn get(&self, name: &str) -> Option<String>;
}

/// The process environment.
#[derive(Debug, Default)]
pub struct ProcessEnv;

impl EnvSource for ProcessEnv {
    fn get(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
}

impl EnvSource for HashMap<String, String> {
    fn get(&self, name: &str) -> Option<String> {
        HashMap::get(self, name).cloned()
    }
}

/// A bad configuration value; the message names the variable.
#[derive(Debug, thiserror::Error)]
#[error("invalid {var}={value:?}: {reason}")]
pub struct ConfigError {
    pub var: &'static str,
    pub value: String,
    pub reason: String,
}

/// Records every variable name it is asked for, so a test can check the docs list them all.
struct Reader<'a> {
    env: &'a dyn EnvSource,
    asked: Mutex<Vec<&'static str>>,
}

impl Reader<'_> {
    fn raw(&self, var: &'static str) -> Option<String> {
        if let Ok(mut asked) = self.asked.lock() {
            asked.push(var);
        }
        self.env.get(var).filter(|v| !v.trim().is_empty())
    }

    fn parsed<T: FromStr>(&self, var: &'static str, default: T) -> Result<T, ConfigError>
    where
        T::Err: fmt::Display,
    {
        match self.raw(var) {
            None => Ok(default),
            Some(v) => v.trim().parse().map_err(|e: T::Err| ConfigError {
                var,
                value: v.clone(),
                reason: e.to_string(),
            }),
        }
    }

    fn string(&self, var: &'static str, default: &str) -> String {
        self.raw(var).unwrap_or_else(|| default.to_owned())
    }

    /// Booleans are true only for the literal `true` (and `1`); anything else that is set
    /// must be `false` or `0`.
    fn boolean(&self, var: &'static str, default: bool) -> Result<bool, ConfigError> {
        match self.raw(var).as_deref().map(str::trim) {
            None => Ok(default),
            Some("true" | "1") => Ok(true),
            Some("false" | "0") => Ok(false),
            Some(v) => Err(ConfigError {
                var,
                value: v.to_owned(),
                reason: "expected true or false".into(),
            }),
        }
    }

    fn millis(&self, var: &'static str, default_ms: u64) -> Result<Duration, ConfigError> {
        Ok(Duration::from_millis(self.parsed(var, default_ms)?))
    }
}

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
    pub use_ssl: bool,
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
            .field("pool_size", &self.pool_size)
            .finish_non_exhaustive()
    }
}

/// Replaces the password of a `postgres://user:pass@host/db` URL.
fn redact_url(url: &str) -> String {
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

/// Defaults and timing of pops.
#[derive(Debug, Clone)]
pub struct PopConfig {
    /// `DEFAULT_BATCH_SIZE`: messages per pop when the request names no `batch`.
    pub default_batch: u32,
    /// `DEFAULT_TIMEOUT`: long-poll budget when the request names no `timeout`.
    pub default_timeout: Duration,
    /// `DEFAULT_SUBSCRIPTION_MODE`: `""`/`all`, `new` or `new-only`.
    pub default_subscription_mode: SubscriptionMode,
    /// First re-check interval of a parked long poll.
    pub wait_initial_interval: Duration,
    /// Empty re-checks before the interval starts to grow.
    pub wait_backoff_threshold: u32,
    pub wait_backoff_multiplier: f64,
    /// Ceiling of the re-check interval: the longest a lost wake-up can cost.
    pub wait_max_interval: Duration,
}

/// Where a consumer group starts on first contact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubscriptionMode {
    All,
    New,
}

impl SubscriptionMode {
    /// Parses a mode; `new-only` is `new`, anything unknown is `all`.
    pub fn parse_lenient(s: &str) -> Self {
        match s.trim() {
            "new" | "new-only" => Self::New,
            _ => Self::All,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::New => "new",
        }
    }
}

/// The whole broker configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub host: IpAddr,
    pub port: u16,
    /// Name of this replica in logs, lease holders and stats.
    pub server_id: String,
    pub db: DbConfig,
    pub pop: PopConfig,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// Longest a cached queue configuration is used before it is re-read.
    pub queue_config_max_age: Duration,
    /// How often persisted cluster state (maintenance flags) is re-read.
    pub reconcile_interval: Duration,
    pub log_level: String,
    pub log_format_json: bool,
}

/// Default pool size of the reference broker.
const DEFAULT_POOL_SIZE: usize = 150;
/// 16 MiB: large enough for big batches, small enough to bound memory per request.
const DEFAULT_MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
/// 5 s: a lost config invalidation costs at most this long.
const DEFAULT_QUEUE_CONFIG_MAX_AGE_MS: u64 = 5_000;

/// 5 s: a maintenance flag set on another replica reaches this one within this time.
const DEFAULT_RECONCILE_INTERVAL_MS: u64 = 5_000;

impl Config {
    /// Reads the configuration from `env`.
    pub fn from_env(env: &dyn EnvSource) -> Result<Self, ConfigError> {
        Self::read(&Reader {
            env,
            asked: Mutex::new(Vec::new()),
        })
    }

    /// Returns every variable name the loader reads.
    pub fn variable_names() -> Vec<&'static str> {
        let empty: HashMap<String, String> = HashMap::new();
        let reader = Reader {
            env: &empty,
            asked: Mutex::new(Vec::new()),
        };
        let _ = Self::read(&reader);
        let mut names = reader.asked.into_inner().unwrap_or_default();
        names.sort_unstable();
        names.dedup();
        names
    }

    fn read(r: &Reader<'_>) -> Result<Self, ConfigError> {
        let pool_size: usize = r.parsed("DB_POOL_SIZE", DEFAULT_POOL_SIZE)?;
        if pool_size == 0 {
            return Err(ConfigError {
                var: "DB_POOL_SIZE",
                value: "0".into(),
                reason: "must be at least 1".into(),
            });
        }
        let default_batch: u32 = r.parsed("DEFAULT_BATCH_SIZE", 1)?;
        let multiplier: f64 = r.parsed("POP_WAIT_BACKOFF_MULTIPLIER", 2.0)?;
        if !(1.0..=100.0).contains(&multiplier) {
            return Err(ConfigError {
                var: "POP_WAIT_BACKOFF_MULTIPLIER",
                value: multiplier.to_string(),
                reason: "must be between 1 and 100".into(),
            });
        }
        let server_id = r
            .raw("QUEEN_SERVER_ID")
            .or_else(|| r.raw("WORKER_ID"))
            .or_else(|| r.raw("HOSTNAME"))
            .unwrap_or_else(|| "queen".to_owned());
        let log_format = r.string("LOG_FORMAT", "text");
        let log_format_json = match log_format.as_str() {
            "text" => false,
            "json" => true,
            other => {
                return Err(ConfigError {
                    var: "LOG_FORMAT",
                    value: other.to_owned(),
                    reason: "expected text or json".into(),
                })
            }
        };
        let log_level = r.string("LOG_LEVEL", "info").to_lowercase();
        if !["trace", "debug", "info", "warn", "error"].contains(&log_level.as_str()) {
            return Err(ConfigError {
                var: "LOG_LEVEL",
                value: log_level,
                reason: "expected trace, debug, info, warn or error".into(),
            });
        }
        let mode = r.string("DEFAULT_SUBSCRIPTION_MODE", "");
        let default_subscription_mode = match mode.trim() {
            "" | "all" => SubscriptionMode::All,
            "new" | "new-only" => SubscriptionMode::New,
            other => {
                return Err(ConfigError {
                    var: "DEFAULT_SUBSCRIPTION_MODE",
                    value: other.to_owned(),
                    reason: "expected empty, all, new or new-only".into(),
                })
            }
        };
        Ok(Self {
            host: r.parsed("HOST", IpAddr::from([0, 0, 0, 0]))?,
            port: r.parsed("PORT", 6632)?,
            server_id,
            db: DbConfig {
                url: r.raw("DATABASE_URL"),
                host: r.string("PG_HOST", "localhost"),
                port: r.parsed("PG_PORT", 5432)?,
                user: r.string("PG_USER", "postgres"),
                password: r.string("PG_PASSWORD", "postgres"),
                dbname: r.string("PG_DB", "postgres"),
                use_ssl: r.boolean("PG_USE_SSL", false)?,
                pool_size,
                idle_timeout: r.millis("DB_IDLE_TIMEOUT", 30_000)?,
                connect_timeout: r.millis("DB_CONNECTION_TIMEOUT", 2_000)?,
                statement_timeout: r.millis("DB_STATEMENT_TIMEOUT", 30_000)?,
                lock_timeout: r.millis("DB_LOCK_TIMEOUT", 10_000)?,
            },
            pop: PopConfig {
                default_batch: default_batch.max(1),
                default_timeout: r.millis("DEFAULT_TIMEOUT", 30_000)?,
                default_subscription_mode,
                wait_initial_interval: r.millis("POP_WAIT_INITIAL_INTERVAL_MS", 100)?,
                wait_backoff_threshold: r.parsed("POP_WAIT_BACKOFF_THRESHOLD", 3)?,
                wait_backoff_multiplier: multiplier,
                wait_max_interval: r.millis("POP_WAIT_MAX_INTERVAL_MS", 1_000)?,
            },
            max_body_bytes: r.parsed("MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES)?,
            queue_config_max_age: r
                .millis("QUEUE_CONFIG_MAX_AGE_MS", DEFAULT_QUEUE_CONFIG_MAX_AGE_MS)?,
            reconcile_interval: r
                .millis("QUEEN_RECONCILE_INTERVAL_MS", DEFAULT_RECONCILE_INTERVAL_MS)?,
            log_level,
            log_format_json,
        })
    }

    /// Describes the effective configuration for the boot log, secrets redacted.
    pub fn describe(&self) -> String {
        let db = match &self.db.url {
            Some(url) => format!("url={}", redact_url(url)),
            None => format!(
                "host={} port={} db={} user={} password=<redacted> ssl={}",
                self.db.host, self.db.port, self.db.dbname, self.db.user, self.db.use_ssl
            ),
        };
        format!(
            "listen={}:{} server_id={} db[{db} pool={} stmt_timeout_ms={}] pop[batch={} timeout_ms={} subscription={}] max_body_bytes={}",
            self.host,
            self.port,
            self.server_id,
            self.db.pool_size,
            self.db.statement_timeout.as_millis(),
            self.pop.default_batch,
            self.pop.default_timeout.as_millis(),
            self.pop.default_subscription_mode.as_str(),
            self.max_body_bytes,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_match_the_reference() {
        let c = Config::from_env(&env(&[])).unwrap();
        assert_eq!(c.port, 6632);
        assert_eq!(c.db.pool_size, 150);
        assert_eq!(c.pop.default_batch, 1);
        assert_eq!(c.pop.default_timeout, Duration::from_secs(30));
        assert_eq!(c.pop.default_subscription_mode, SubscriptionMode::All);
    }

    #[test]
    fn bad_values_name_their_variable() {
        let e = Config::from_env(&env(&[("PORT", "sixty")])).unwrap_err();
        assert_eq!(e.var, "PORT");
        assert!(e.to_string().contains("PORT"));
        let e = Config::from_env(&env(&[("PG_USE_SSL", "yes")])).unwrap_err();
        assert_eq!(e.var, "PG_USE_SSL");
        let e = Config::from_env(&env(&[("DEFAULT_SUBSCRIPTION_MODE", "later")])).unwrap_err();
        assert_eq!(e.var, "DEFAULT_SUBSCRIPTION_MODE");
    }

    #[test]
    fn secrets_are_redacted() {
        let c = Config::from_env(&env(&[
            ("PG_PASSWORD", "hunter2"),
            ("DATABASE_URL", "postgres://u:hunter2@h/db"),
        ]))
        .unwrap();
        assert!(!c.describe().contains("hunter2"));
        assert!(!format!("{c:?}").contains("hunter2"));
        assert!(c.describe().contains("postgres://u:<redacted>@h/db"));
    }

    #[test]
    fn every_variable_is_documented() {
        let doc = include_str!("../../../docs/configuration.md");
        for name in Config::variable_names() {
            assert!(
                doc.contains(&format!("`{name}`")),
                "{name} missing from docs/configuration.md"
            );
        }
    }
}
