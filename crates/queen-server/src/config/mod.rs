//! Configuration from environment variables, with the reference broker's names.
//!
//! Every variable is read through [`EnvSource`], so tests pass a map instead of
//! touching the process environment, and every error names its variable. One
//! file per concern: `env` (the source and the typed readers), `defaults`
//! (every default, with why), `db`, `auth` (JWT), `mesh`, `spool`, `pop`,
//! `jobs`, `server` (replica name, logging, runtime, encryption key) and
//! `describe` (the boot log line).

mod auth;
mod db;
mod defaults;
mod describe;
mod env;
mod jobs;
mod limits;
mod mesh;
mod pop;
mod server;
mod shutdown;
mod spool;
mod unused;

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;

pub use auth::{AuthConfig, JwtAlgorithm};
pub use db::{split_list, DbConfig};
pub use env::{ConfigError, EnvSource, ProcessEnv};
pub use jobs::JobsConfig;
pub use limits::LimitsConfig;
pub use mesh::{MeshAuth, MeshConfig};
pub use pop::{AutopilotConfig, AutopilotMode, PopConfig, SubscriptionMode};
pub use shutdown::ShutdownConfig;
pub use spool::SpoolConfig;
pub use unused::unused_variable_warnings;

use env::Reader;

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
    /// Deadlines, connection cap and request sizes of the HTTP listener.
    pub limits: LimitsConfig,
    /// The graceful stop on SIGTERM / SIGINT.
    pub shutdown: ShutdownConfig,
}

impl Config {
    /// Reads the configuration from `env`.
    pub fn from_env(env: &dyn EnvSource) -> Result<Self, ConfigError> {
        Self::read(&Reader::new(env))
    }

    /// Returns every variable name the loader reads.
    pub fn variable_names() -> Vec<&'static str> {
        let empty: HashMap<String, String> = HashMap::new();
        let reader = Reader::new(&empty);
        let _ = Self::read(&reader);
        reader.into_asked()
    }

    fn read(r: &Reader<'_>) -> Result<Self, ConfigError> {
        let server_id = server::read_server_id(r);
        Ok(Self {
            host: r.parsed("HOST", defaults::HOST)?,
            port: r.parsed("PORT", defaults::PORT)?,
            db: db::read_db(r)?,
            pop: pop::read_pop(r)?,
            max_body_bytes: r.parsed("MAX_BODY_BYTES", defaults::MAX_BODY_BYTES)?,
            queue_config_max_age: r
                .millis("QUEUE_CONFIG_MAX_AGE_MS", defaults::QUEUE_CONFIG_MAX_AGE_MS)?,
            mesh: mesh::read_mesh(r, &server_id)?,
            jobs: jobs::read_jobs(r)?,
            auth: auth::read_auth(r)?,
            encryption_key: server::read_encryption_key(r)?,
            reconcile_interval: r.millis(
                "QUEEN_RECONCILE_INTERVAL_MS",
                defaults::QUEEN_RECONCILE_INTERVAL_MS,
            )?,
            spool: spool::read_spool(r)?,
            log_level: server::read_log_level(r)?,
            log_format_json: server::read_log_format_json(r)?,
            worker_threads: server::read_worker_threads(r)?,
            limits: limits::read_limits(r)?,
            shutdown: shutdown::read_shutdown(r)?,
            server_id,
        })
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
    fn connection_and_memory_settings_are_read() {
        let c = Config::from_env(&env(&[])).unwrap();
        assert_eq!(c.limits.idle_timeout, Duration::from_secs(30));
        assert_eq!(c.limits.memory_trim_interval, Some(Duration::from_secs(10)));
        let c = Config::from_env(&env(&[
            ("HTTP_IDLE_TIMEOUT_MS", "1500"),
            ("MEMORY_TRIM_INTERVAL_MS", "0"),
        ]))
        .unwrap();
        assert_eq!(c.limits.idle_timeout, Duration::from_millis(1500));
        assert_eq!(c.limits.memory_trim_interval, None);
        let e = Config::from_env(&env(&[("HTTP_IDLE_TIMEOUT_MS", "0")])).unwrap_err();
        assert_eq!(e.var, "HTTP_IDLE_TIMEOUT_MS");
    }

    #[test]
    fn the_stop_drains_for_a_load_balancer_then_ends_within_its_timeout() {
        let c = Config::from_env(&env(&[])).unwrap();
        assert_eq!(c.shutdown.drain, Duration::from_secs(6));
        assert_eq!(c.shutdown.timeout, Duration::from_secs(20));
        let c = Config::from_env(&env(&[
            ("SHUTDOWN_DRAIN_MS", "0"),
            ("SHUTDOWN_TIMEOUT_MS", "500"),
        ]))
        .unwrap();
        assert_eq!(c.shutdown.drain, Duration::ZERO);
        assert_eq!(c.shutdown.timeout, Duration::from_millis(500));
        let e = Config::from_env(&env(&[
            ("SHUTDOWN_DRAIN_MS", "30000"),
            ("SHUTDOWN_TIMEOUT_MS", "30000"),
        ]))
        .unwrap_err();
        assert_eq!(e.var, "SHUTDOWN_TIMEOUT_MS");
        let e = Config::from_env(&env(&[("SHUTDOWN_DRAIN_MS", "soon")])).unwrap_err();
        assert_eq!(e.var, "SHUTDOWN_DRAIN_MS");
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
        let doc = include_str!("../../../../docs/configuration.md");
        for name in Config::variable_names() {
            assert!(
                doc.contains(&format!("`{name}`")),
                "{name} missing from docs/configuration.md"
            );
        }
    }
}
