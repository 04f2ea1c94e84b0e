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

    /// Reads `var`, falling back to its alias; returns the name that was set.
    fn raw_aliased(
        &self,
        var: &'static str,
        alias: &'static str,
    ) -> Option<(&'static str, String)> {
        self.raw(var)
            .map(|v| (var, v))
            .or_else(|| self.raw(alias).map(|v| (alias, v)))
    }

    fn parsed<T: FromStr>(&self, var: &'static str, default: T) -> Result<T, ConfigError>
    where
        T::Err: fmt::Display,
    {
        Ok(self.optional(var)?.unwrap_or(default))
    }

    /// Parses `var` when it is set.
    fn optional<T: FromStr>(&self, var: &'static str) -> Result<Option<T>, ConfigError>
    where
        T::Err: fmt::Display,
    {
        self.raw(var)
            .map(|v| {
                v.trim().parse().map_err(|e: T::Err| ConfigError {
                    var,
                    value: v.clone(),
                    reason: e.to_string(),
                })
            })
            .transpose()
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
    /// `PG_USE_SSL`: TLS is required on every connection.
    pub use_ssl: bool,
    /// `PG_SSL_REJECT_UNAUTHORIZED`: the server's certificate must chain to a
    /// trusted root and name the host; `false` encrypts without checking who
    /// answers.
    pub ssl_reject_unauthorized: bool,
    /// `PG_SSL_ROOT_CERT`: a PEM file of CA certificates trusted on top of
    /// the system's.
    pub ssl_root_cert: Option<std::path::PathBuf>,
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

/// How replicas authenticate mesh connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MeshAuth {
    /// No secret: any well-formed HELLO is accepted.
    Off,
    /// HMAC-SHA256 over the dialer's nonce (the seed design).
    Hmac,
    /// Timestamped HELLO, replay cache and a MAC on every frame.
    HmacStrict,
}

impl MeshAuth {
    /// The name the boot log and the stats surface show.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Hmac => "hmac",
            Self::HmacStrict => "hmac-strict",
        }
    }
}

/// The TCP mesh of best-effort hints between replicas (high-availability.md §2).
#[derive(Clone)]
pub struct MeshConfig {
    pub sync_enabled: bool,
    /// `host:port` of every other replica.
    pub peers: Vec<String>,
    pub port: u16,
    pub secret: String,
    pub heartbeat: Duration,
    pub auth: MeshAuth,
}

impl fmt::Debug for MeshConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MeshConfig")
            .field("sync_enabled", &self.sync_enabled)
            .field("peers", &self.peers)
            .field("port", &self.port)
            .field("secret", &"<redacted>")
            .field("auth", &self.auth)
            .finish_non_exhaustive()
    }
}

impl MeshConfig {
    /// The mesh runs only with sync enabled and at least one peer.
    pub fn is_active(&self) -> bool {
        self.sync_enabled && !self.peers.is_empty()
    }
}

/// Which algorithms verify bearer tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JwtAlgorithm {
    Hs256,
    Rs256,
    EdDsa,
    /// The token header's algorithm, among those a key is configured for.
    Auto,
}

/// JWT bearer authentication (http-api.md §1.7).
#[derive(Clone)]
pub struct AuthConfig {
    pub enabled: bool,
    pub algorithm: JwtAlgorithm,
    pub secret: String,
    /// PEM of the RSA or Ed25519 public key (the text, or a path to a file).
    pub public_key: String,
    /// `JWT_JWKS_URL`: a JWKS endpoint whose keys verify tokens too.
    pub jwks_url: Option<String>,
    pub jwks_refresh: Duration,
    pub jwks_timeout: Duration,
    /// Unknown `kid`s trigger a fetch of the set at most this often.
    pub jwks_min_refetch: Duration,
    pub issuer: Option<String>,
    pub audience: Option<String>,
    pub clock_skew_secs: u64,
    pub skip_paths: Vec<String>,
    pub roles_claim: String,
    pub roles_array_claim: String,
    pub role_admin: String,
    pub role_read_write: String,
    pub role_read_only: String,
}

impl fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthConfig")
            .field("enabled", &self.enabled)
            .field("algorithm", &self.algorithm)
            .field("secret", &"<redacted>")
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field("jwks_url", &self.jwks_url)
            .finish_non_exhaustive()
    }
}

fn read_auth(r: &Reader<'_>) -> Result<AuthConfig, ConfigError> {
    let enabled = r.boolean("JWT_ENABLED", false)?;
    let algorithm = match r
        .string("JWT_ALGORITHM", "HS256")
        .trim()
        .to_ascii_uppercase()
        .as_str()
    {
        "HS256" => JwtAlgorithm::Hs256,
        "RS256" => JwtAlgorithm::Rs256,
        "EDDSA" => JwtAlgorithm::EdDsa,
        "AUTO" => JwtAlgorithm::Auto,
        other => {
            return Err(ConfigError {
                var: "JWT_ALGORITHM",
                value: other.to_owned(),
                reason: "expected HS256, RS256, EdDSA or auto".into(),
            })
        }
    };
    let secret = r.string("JWT_SECRET", "");
    let mut public_key = r.string("JWT_PUBLIC_KEY", "");
    if !public_key.is_empty() && !public_key.contains("-----BEGIN") {
        public_key = std::fs::read_to_string(public_key.trim()).map_err(|e| ConfigError {
            var: "JWT_PUBLIC_KEY",
            value: public_key.clone(),
            reason: format!("neither a PEM key nor a readable file: {e}"),
        })?;
    }
    let jwks_url = r.raw("JWT_JWKS_URL").filter(|u| !u.trim().is_empty());
    if let Some(url) = &jwks_url {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(ConfigError {
                var: "JWT_JWKS_URL",
                value: url.clone(),
                reason: "expected an http:// or https:// URL".into(),
            });
        }
    }
    let jwks_refresh = Duration::from_secs(r.parsed("JWT_JWKS_REFRESH_INTERVAL", 3600u64)?.max(1));
    let jwks_timeout = r
        .millis("JWT_JWKS_TIMEOUT_MS", 5000)?
        .max(Duration::from_millis(1));
    let jwks_min_refetch = r.millis("JWT_JWKS_MIN_REFETCH_MS", 10_000)?;
    if enabled {
        let needs_secret = matches!(algorithm, JwtAlgorithm::Hs256);
        let needs_key = matches!(algorithm, JwtAlgorithm::Rs256 | JwtAlgorithm::EdDsa);
        if needs_secret && secret.is_empty() {
            return Err(ConfigError {
                var: "JWT_SECRET",
                value: String::new(),
                reason: "JWT_ENABLED=true with HS256 needs a secret".into(),
            });
        }
        let no_key = public_key.is_empty() && jwks_url.is_none();
        if (needs_key && no_key) || (algorithm == JwtAlgorithm::Auto && secret.is_empty() && no_key)
        {
            return Err(ConfigError {
                var: "JWT_PUBLIC_KEY",
                value: String::new(),
                reason:
                    "JWT_ENABLED=true needs JWT_PUBLIC_KEY or JWT_JWKS_URL (or JWT_SECRET for HS256)"
                        .into(),
            });
        }
    }
    Ok(AuthConfig {
        enabled,
        algorithm,
        secret,
        public_key,
        jwks_url,
        jwks_refresh,
        jwks_timeout,
        jwks_min_refetch,
        issuer: r.raw("JWT_ISSUER"),
        audience: r.raw("JWT_AUDIENCE"),
        clock_skew_secs: r.parsed("JWT_CLOCK_SKEW", 30)?,
        skip_paths: r
            .string("JWT_SKIP_PATHS", "/health,/metrics/prometheus,/metrics,/")
            .split(',')
            .map(|p| p.trim().to_owned())
            .filter(|p| !p.is_empty())
            .collect(),
        roles_claim: r.string("JWT_ROLES_CLAIM", "role"),
        roles_array_claim: r.string("JWT_ROLES_ARRAY_CLAIM", "roles"),
        role_admin: r.string("JWT_ROLE_ADMIN", "admin"),
        role_read_write: r.string("JWT_ROLE_READ_WRITE", "read-write"),
        role_read_only: r.string("JWT_ROLE_READ_ONLY", "read-only"),
    })
}

/// Background jobs: retention, eviction, stats (http-api.md §5.7, §5.9).
#[derive(Debug, Clone)]
pub struct JobsConfig {
    pub retention_interval: Duration,
    pub retention_batch: i32,
    pub partition_cleanup_days: i32,
    pub metrics_retention_days: i32,
    pub eviction_interval: Duration,
    pub eviction_batch: i32,
    pub stats_interval: Duration,
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
    pub mesh: MeshConfig,
    pub jobs: JobsConfig,
    pub auth: AuthConfig,
    /// AES-256 key of `QUEEN_ENCRYPTION_KEY` (never printed).
    pub encryption_key: Option<[u8; 32]>,
    /// How often persisted cluster state (maintenance flags) is re-read.
    pub reconcile_interval: Duration,
    /// The disk spool that takes pushes while PostgreSQL is away.
    pub spool: SpoolConfig,
    pub log_level: String,
    pub log_format_json: bool,
    /// Worker threads of the async runtime; `None`: one per CPU.
    pub worker_threads: Option<std::num::NonZeroUsize>,
}

/// Default pool size of the reference broker.
const DEFAULT_POOL_SIZE: usize = 150;
/// 16 MiB: large enough for big batches, small enough to bound memory per request.
const DEFAULT_MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
/// 5 s: a lost config invalidation costs at most this long.
const DEFAULT_QUEUE_CONFIG_MAX_AGE_MS: u64 = 5_000;

/// Default TCP port of the mesh listener.
const DEFAULT_MESH_PORT: u16 = 6633;

fn read_mesh(r: &Reader<'_>, server_id: &str) -> Result<MeshConfig, ConfigError> {
    let port = match r.raw_aliased("QUEEN_MESH_PORT", "QUEEN_UDP_NOTIFY_PORT") {
        None => DEFAULT_MESH_PORT,
        Some((var, v)) => v
            .trim()
            .parse()
            .map_err(|e: std::num::ParseIntError| ConfigError {
                var,
                value: v.clone(),
                reason: e.to_string(),
            })?,
    };
    let mut peers = Vec::new();
    if let Some((var, list)) = r.raw_aliased("QUEEN_MESH_PEERS", "QUEEN_UDP_PEERS") {
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let Some((host, peer_port)) = entry.rsplit_once(':') else {
                return Err(ConfigError {
                    var,
                    value: entry.to_owned(),
                    reason: "expected host:port".into(),
                });
            };
            let peer_port: u16 = peer_port.parse().map_err(|_| ConfigError {
                var,
                value: entry.to_owned(),
                reason: "port must be a number".into(),
            })?;
            // entries that name this replica are skipped
            let is_self = peer_port == port
                && (host == server_id
                    || host == "localhost"
                    || host == "127.0.0.1"
                    || host == "::1");
            if !is_self {
                peers.push(entry.to_owned());
            }
        }
    }
    let secret = r.string("QUEEN_SYNC_SECRET", "");
    let strict = match r.string("QUEEN_MESH_AUTH", "hmac").trim() {
        "" | "hmac" | "base" => false,
        "strict" | "hmac-strict" => true,
        other => {
            return Err(ConfigError {
                var: "QUEEN_MESH_AUTH",
                value: other.to_owned(),
                reason: "expected hmac or strict".into(),
            })
        }
    };
    let auth = match (secret.is_empty(), strict) {
        (true, true) => {
            return Err(ConfigError {
                var: "QUEEN_MESH_AUTH",
                value: "strict".into(),
                reason: "strict mode needs QUEEN_SYNC_SECRET".into(),
            })
        }
        (true, false) => MeshAuth::Off,
        (false, false) => MeshAuth::Hmac,
        (false, true) => MeshAuth::HmacStrict,
    };
    let heartbeat = r.millis("QUEEN_SYNC_HEARTBEAT_MS", 1_000)?;
    if heartbeat.is_zero() {
        return Err(ConfigError {
            var: "QUEEN_SYNC_HEARTBEAT_MS",
            value: "0".into(),
            reason: "must be at least 1".into(),
        });
    }
    Ok(MeshConfig {
        sync_enabled: r.boolean("QUEEN_SYNC_ENABLED", true)?,
        peers,
        port,
        secret,
        heartbeat,
        auth,
    })
}

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
        // read by the runtime too, which panics on a bad value: checked here first
        let worker_threads = r.optional("TOKIO_WORKER_THREADS")?;
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
        let mesh = read_mesh(r, &server_id)?;
        let jobs = JobsConfig {
            retention_interval: r.millis("RETENTION_INTERVAL", 300_000)?,
            retention_batch: r.parsed("RETENTION_BATCH_SIZE", 1000)?,
            partition_cleanup_days: r.parsed("PARTITION_CLEANUP_DAYS", 30)?,
            metrics_retention_days: r.parsed("METRICS_RETENTION_DAYS", 90)?,
            eviction_interval: r.millis("EVICTION_INTERVAL", 60_000)?,
            eviction_batch: r.parsed("EVICTION_BATCH_SIZE", 1000)?,
            stats_interval: r.millis("STATS_INTERVAL_MS", 10_000)?,
        };
        let auth = read_auth(r)?;
        let encryption_key = match r.raw("QUEEN_ENCRYPTION_KEY") {
            None => None,
            Some(hex_key) => {
                let bytes = hex::decode(hex_key.trim()).ok().filter(|b| b.len() == 32);
                let Some(bytes) = bytes else {
                    return Err(ConfigError {
                        var: "QUEEN_ENCRYPTION_KEY",
                        value: "<redacted>".into(),
                        reason: "must be 64 hex characters (a 32-byte AES-256 key)".into(),
                    });
                };
                let mut key = [0u8; 32];
                key.copy_from_slice(&bytes);
                Some(key)
            }
        };
        Ok(Self {
            encryption_key,
            mesh,
            jobs,
            auth,
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
                ssl_reject_unauthorized: r.boolean("PG_SSL_REJECT_UNAUTHORIZED", true)?,
                ssl_root_cert: r.raw("PG_SSL_ROOT_CERT").map(std::path::PathBuf::from),
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
            spool: read_spool(r)?,
            worker_threads,
        })
    }

    /// Describes the effective configuration for the boot log, secrets redacted.
    pub fn describe(&self) -> String {
        let mut db = match &self.db.url {
            Some(url) => format!("url={}", redact_url(url)),
            None => format!(
                "host={} port={} db={} user={} password=<redacted>",
                self.db.host, self.db.port, self.db.dbname, self.db.user
            ),
        };
        db.push_str(&format!(
            " ssl={} verify={}",
            self.db.use_ssl, self.db.ssl_reject_unauthorized
        ));
        if let Some(ca) = &self.db.ssl_root_cert {
            db.push_str(&format!(" root_cert={}", ca.display()));
        }
        let sync = format!(
            "sync[enabled={} mesh={} port={} peers={} auth: {} heartbeat_ms={}]",
            self.mesh.sync_enabled,
            if self.mesh.is_active() { "on" } else { "off" },
            self.mesh.port,
            if self.mesh.peers.is_empty() {
                "-".to_owned()
            } else {
                self.mesh.peers.join(",")
            },
            self.mesh.auth.as_str(),
            self.mesh.heartbeat.as_millis(),
        );
        format!(
            "listen={}:{} server_id={} workers={} db[{db} pool={} stmt_timeout_ms={}] pop[batch={} timeout_ms={} subscription={}] max_body_bytes={} {sync} jwt={}",
            self.host,
            self.port,
            self.server_id,
            self.worker_threads
                .map_or_else(|| "cpus".to_owned(), |n| n.to_string()),
            self.db.pool_size,
            self.db.statement_timeout.as_millis(),
            self.pop.default_batch,
            self.pop.default_timeout.as_millis(),
            self.pop.default_subscription_mode.as_str(),
            self.max_body_bytes,
            if self.auth.enabled { "on" } else { "off" },
        )
    }
}

/// The disk spool (`FILE_BUFFER_*`, http-api.md §6.4 and §7).
#[derive(Debug, Clone)]
pub struct SpoolConfig {
    /// `FILE_BUFFER_DIR`: this broker's own directory.
    pub dir: std::path::PathBuf,
    /// `FILE_BUFFER_FLUSH_MS`: how often the drainer looks for spooled records.
    pub flush_interval: Duration,
    /// `FILE_BUFFER_MAX_BATCH`: records replayed per PostgreSQL call.
    pub max_batch: usize,
    /// `FILE_BUFFER_EVENTS_PER_FILE`: records per segment file before it is sealed.
    pub events_per_file: u64,
    /// `FILE_BUFFER_MAX_BYTES`: size limit of the spool; past it pushes get 503.
    pub max_bytes: u64,
}

/// 1 GiB: hours of a busy broker's pushes, well below a typical data disk.
const DEFAULT_SPOOL_MAX_BYTES: u64 = 1 << 30;

/// The platform state directory: `$XDG_STATE_HOME/queen/buffers`, else
/// `/var/lib/queen/buffers` for root, else `$HOME/.local/state/queen/buffers`.
fn default_spool_dir(r: &Reader<'_>) -> std::path::PathBuf {
    use std::os::unix::fs::MetadataExt as _;
    use std::path::PathBuf;
    if let Some(state) = r.raw("XDG_STATE_HOME") {
        return PathBuf::from(state).join("queen/buffers");
    }
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    match r.raw("HOME") {
        Some(home) if !root => PathBuf::from(home).join(".local/state/queen/buffers"),
        _ => PathBuf::from("/var/lib/queen/buffers"),
    }
}

fn read_spool(r: &Reader<'_>) -> Result<SpoolConfig, ConfigError> {
    let at_least_one = |var: &'static str, v: u64| {
        if v == 0 {
            Err(ConfigError {
                var,
                value: "0".into(),
                reason: "must be at least 1".into(),
            })
        } else {
            Ok(v)
        }
    };
    let default_dir = default_spool_dir(r);
    Ok(SpoolConfig {
        dir: r
            .raw("FILE_BUFFER_DIR")
            .map_or(default_dir, std::path::PathBuf::from),
        flush_interval: r
            .millis("FILE_BUFFER_FLUSH_MS", 100)?
            .max(Duration::from_millis(1)),
        max_batch: at_least_one(
            "FILE_BUFFER_MAX_BATCH",
            r.parsed("FILE_BUFFER_MAX_BATCH", 100)?,
        )? as usize,
        events_per_file: at_least_one(
            "FILE_BUFFER_EVENTS_PER_FILE",
            r.parsed("FILE_BUFFER_EVENTS_PER_FILE", 10_000)?,
        )?,
        max_bytes: at_least_one(
            "FILE_BUFFER_MAX_BYTES",
            r.parsed("FILE_BUFFER_MAX_BYTES", DEFAULT_SPOOL_MAX_BYTES)?,
        )?,
    })
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
        for bad in ["0", "two", "-1"] {
            let e = Config::from_env(&env(&[("TOKIO_WORKER_THREADS", bad)])).unwrap_err();
            assert_eq!(e.var, "TOKIO_WORKER_THREADS");
        }
        let c = Config::from_env(&env(&[("TOKIO_WORKER_THREADS", "1")])).expect("valid");
        assert_eq!(c.worker_threads.map(std::num::NonZeroUsize::get), Some(1));
    }

    #[test]
    fn mesh_settings_have_aliases_and_skip_self() {
        let c = Config::from_env(&env(&[
            ("QUEEN_UDP_PEERS", "a:7000, localhost:7001,b:7002"),
            ("QUEEN_UDP_NOTIFY_PORT", "7001"),
            ("QUEEN_SYNC_SECRET", "s3cret"),
        ]))
        .unwrap();
        assert_eq!(c.mesh.port, 7001);
        assert_eq!(c.mesh.peers, vec!["a:7000", "b:7002"]);
        assert_eq!(c.mesh.auth, MeshAuth::Hmac);
        assert!(c.describe().contains("auth: hmac"));
        assert!(!c.describe().contains("s3cret"));
        let c = Config::from_env(&env(&[
            ("QUEEN_MESH_PEERS", "x:1"),
            ("QUEEN_UDP_PEERS", "y:2"),
        ]))
        .unwrap();
        assert_eq!(c.mesh.peers, vec!["x:1"], "the QUEEN_MESH_* name wins");
        assert_eq!(c.mesh.auth, MeshAuth::Off);
        assert!(c.describe().contains("auth: off"));
        let e = Config::from_env(&env(&[("QUEEN_MESH_PEERS", "nohostport")])).unwrap_err();
        assert_eq!(e.var, "QUEEN_MESH_PEERS");
        let e = Config::from_env(&env(&[("QUEEN_MESH_AUTH", "strict")])).unwrap_err();
        assert_eq!(e.var, "QUEEN_MESH_AUTH");
        let c = Config::from_env(&env(&[
            ("QUEEN_SYNC_ENABLED", "false"),
            ("QUEEN_MESH_PEERS", "x:1"),
        ]))
        .unwrap();
        assert!(!c.mesh.is_active());
    }

    #[test]
    fn spool_settings_default_per_platform_and_validate() {
        let c = Config::from_env(&env(&[("XDG_STATE_HOME", "/tmp/st")])).unwrap();
        assert_eq!(
            c.spool.dir,
            std::path::PathBuf::from("/tmp/st/queen/buffers")
        );
        assert_eq!(c.spool.flush_interval, Duration::from_millis(100));
        assert_eq!((c.spool.max_batch, c.spool.events_per_file), (100, 10_000));
        let c = Config::from_env(&env(&[("FILE_BUFFER_DIR", "/x/y")])).unwrap();
        assert_eq!(c.spool.dir, std::path::PathBuf::from("/x/y"));
        let e = Config::from_env(&env(&[("FILE_BUFFER_MAX_BATCH", "0")])).unwrap_err();
        assert_eq!(e.var, "FILE_BUFFER_MAX_BATCH");
        let e = Config::from_env(&env(&[("FILE_BUFFER_MAX_BYTES", "lots")])).unwrap_err();
        assert_eq!(e.var, "FILE_BUFFER_MAX_BYTES");
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
