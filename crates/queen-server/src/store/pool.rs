//! The connection pool: building it from the configuration, readiness,
//! dedicated connections, occupancy, and the server checks of start-up.

use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};

use super::op::{with_op, Db, DbOp};
use super::{batcher, run_migrations, tls, Store, StoreError};
use crate::config::DbConfig;

/// Connection pool occupancy.
#[derive(Debug, Clone, Copy)]
pub struct PoolStatus {
    pub max_size: usize,
    pub open: usize,
    pub idle: usize,
    pub waiting: usize,
}

impl PoolStatus {
    /// Connections in use by a request right now.
    pub fn active(&self) -> usize {
        self.open.saturating_sub(self.idle)
    }
}

/// How long idle connections are kept alive by TCP keepalives (60 s).
const KEEPALIVE_IDLE: Duration = Duration::from_secs(60);
/// The least a request waits for a pooled connection (5 s), so a short
/// `PG_CONNECT_TIMEOUT` does not fail requests that queue behind a burst.
const MIN_POOL_WAIT: Duration = Duration::from_secs(5);

impl Store {
    /// Builds the pool; no connection is opened until the first statement.
    pub fn new(db: &DbConfig) -> Result<Self, StoreError> {
        let mut pg = match &db.url {
            Some(url) => url
                .parse::<tokio_postgres::Config>()
                .map_err(|e| StoreError::other("invalid DATABASE_URL", e))?,
            None => {
                let mut c = tokio_postgres::Config::new();
                c.host(&db.host)
                    .port(db.port)
                    .user(&db.user)
                    .password(&db.password)
                    .dbname(&db.dbname);
                c
            }
        };
        pg.connect_timeout(db.connect_timeout)
            .application_name("queen-server")
            .keepalives(true)
            .keepalives_idle(KEEPALIVE_IDLE)
            .options(format!(
                "-c statement_timeout={} -c lock_timeout={}",
                db.statement_timeout.as_millis(),
                db.lock_timeout.as_millis()
            ));
        let tls = tls::configure(db, &mut pg)?;
        let manager = Manager::from_config(
            pg.clone(),
            tls.clone(),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(db.pool_size)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(db.connect_timeout.max(MIN_POOL_WAIT)))
            .create_timeout(Some(db.connect_timeout))
            .recycle_timeout(Some(db.connect_timeout))
            .build()
            .map_err(|e| StoreError::other("building pool", e))?;
        let db = Db::new(pool);
        Ok(Self {
            batcher: batcher::Batcher::start(db.clone()),
            db,
            pg_config: pg,
            tls,
        })
    }

    /// Opens a dedicated connection outside the pool (migrations, advisory locks).
    pub async fn connect_direct(&self) -> Result<tokio_postgres::Client, StoreError> {
        let (client, conn) = self.pg_config.connect(self.tls.clone()).await?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "direct connection closed");
            }
        });
        Ok(client)
    }

    /// Applies pending migrations and marks the store ready.
    pub async fn migrate(&self) -> Result<usize, StoreError> {
        let mut client = self.connect_direct().await?;
        let applied = run_migrations(&mut client).await?;
        self.db.set_ready();
        Ok(applied)
    }

    /// True once the schema is known to be migrated.
    pub fn is_ready(&self) -> bool {
        self.db.is_ready()
    }

    /// The per-operation metrics, to register in the broker's registry.
    pub fn metric_collectors(&self) -> Vec<Box<dyn prometheus::core::Collector>> {
        self.db.collectors()
    }

    /// Closes pooled connections idle for longer than `idle`; returns how many.
    pub fn close_idle_connections(&self, idle: Duration) -> usize {
        self.db
            .pool()
            .retain(|_, metrics| metrics.last_used() < idle)
            .removed
            .len()
    }

    /// The pool's limit, open connections, idle connections and waiting requests.
    pub fn pool_status(&self) -> PoolStatus {
        let s = self.db.pool().status();
        PoolStatus {
            max_size: s.max_size,
            open: s.size,
            idle: s.available,
            waiting: s.waiting,
        }
    }

    /// Answers whether the database takes a trivial query (migrated or not).
    pub async fn ping(&self) -> Result<(), StoreError> {
        with_op!(self.db, DbOp::Ping, |client| {
            client.simple_query("SELECT 1").await?;
            Ok(())
        })
    }

    /// Reads `max_connections` of the server.
    pub async fn max_connections(&self) -> Result<i64, StoreError> {
        with_op!(self.db, DbOp::Settings, |client| {
            let row = client
                .query_one(
                    "SELECT current_setting('max_connections')::bigint AS max_connections",
                    &[],
                )
                .await?;
            Ok(row.try_get("max_connections")?)
        })
    }
}
