//! The connection pool: building it from the configuration, readiness,
//! dedicated connections, occupancy, and the server checks of start-up.

use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::config::TargetSessionAttrs;

use super::consume;
use super::op::{with_op, Db, DbOp, Deadlines};
use super::{batcher, connect, flights, run_migrations, tls, Store, StoreError};
use crate::config::{split_list, DbConfig};

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

/// The least a request waits for a pooled connection (5 s), so a short
/// `PG_CONNECT_TIMEOUT` does not fail requests that queue behind a burst.
const MIN_POOL_WAIT: Duration = Duration::from_secs(5);

/// One driver configuration per host of `DATABASE_URL` or `PG_HOST`/`PG_PORT`.
fn host_configs(db: &DbConfig) -> Result<Vec<tokio_postgres::Config>, StoreError> {
    match &db.url {
        Some(url) => connect::split_url(url)
            .iter()
            .map(|u| {
                u.parse::<tokio_postgres::Config>()
                    .map_err(|e| StoreError::other("invalid DATABASE_URL", e))
            })
            .collect(),
        None => {
            let hosts = split_list(&db.host);
            let several = hosts.len() > 1;
            Ok(hosts
                .iter()
                .enumerate()
                .map(|(i, host)| {
                    let mut c = tokio_postgres::Config::new();
                    let port = db.ports.get(i).or(db.ports.first()).copied();
                    c.host(*host)
                        .port(port.unwrap_or(5432))
                        .user(&db.user)
                        .password(&db.password)
                        .dbname(&db.dbname);
                    if several {
                        // a list names a primary and its standbys: only the
                        // one that takes writes will do
                        c.target_session_attrs(TargetSessionAttrs::ReadWrite);
                    }
                    c
                })
                .collect())
        }
    }
}

/// The settings of every connection: timeouts, keepalives, session options.
fn apply_settings(db: &DbConfig, pg: &mut tokio_postgres::Config) {
    pg.connect_timeout(db.connect_timeout)
        .application_name("queen-server")
        .options(format!(
            "-c statement_timeout={} -c lock_timeout={}",
            db.statement_timeout.as_millis(),
            db.lock_timeout.as_millis()
        ));
    if db.keepalives_idle.is_zero() {
        pg.keepalives(false);
    } else {
        pg.keepalives(true)
            .keepalives_idle(db.keepalives_idle)
            .keepalives_interval(db.keepalives_interval.max(Duration::from_secs(1)))
            .keepalives_retries(db.keepalives_count);
    }
    if !db.tcp_user_timeout.is_zero() {
        pg.tcp_user_timeout(db.tcp_user_timeout);
    }
}

impl Store {
    /// Builds the pool; no connection is opened until the first statement.
    pub fn new(db: &DbConfig) -> Result<Self, StoreError> {
        let mut configs = host_configs(db)?;
        let mut tls = None;
        for pg in &mut configs {
            apply_settings(db, pg);
            tls = Some(tls::configure(db, pg)?);
        }
        let tls = tls.ok_or_else(|| StoreError::internal("no PostgreSQL host configured"))?;
        let pg = configs[0].clone();
        let hosts = connect::Hosts::new(configs, tls, db.connect_timeout);
        let manager = Manager::from_connect(
            pg,
            hosts.clone(),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let round = hosts.round_deadline() + Duration::from_millis(250);
        let pool = Pool::builder(manager)
            .max_size(db.pool_size)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(round.max(MIN_POOL_WAIT)))
            .create_timeout(Some(round))
            .recycle_timeout(Some(db.connect_timeout))
            .build()
            .map_err(|e| StoreError::other("building pool", e))?;
        let db = Db::new(
            pool,
            Deadlines {
                op: db.op_deadline(),
                checkout: round.max(MIN_POOL_WAIT) + Duration::from_secs(1),
                probe: db.probe_timeout,
            },
        );
        let flight_metrics = flights::FlightMetrics::new();
        Ok(Self {
            batcher: batcher::Batcher::start(db.clone()),
            consume_flights: flights::Flights::start(
                consume::ConsumeFly { db: db.clone() },
                consume::LIMITS,
                &flight_metrics,
            ),
            flight_metrics,
            db,
            hosts,
        })
    }

    /// Opens a dedicated connection outside the pool (migrations, advisory
    /// locks, the liveness probe), within the connect deadline of each host.
    pub async fn connect_direct(&self) -> Result<tokio_postgres::Client, StoreError> {
        let (client, conn) = self.hosts.open().await?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "direct connection closed");
            }
        });
        Ok(client)
    }

    /// Refuses a schema `queen` that another program created, when the
    /// database can be reached within the connect deadline; an unreachable
    /// one is left to the migration job, which checks again.
    pub async fn check_schema_owner(&self) -> Result<(), StoreError> {
        let attempt = async {
            let client = self.connect_direct().await?;
            super::migrate::refuse_foreign_schema(&client).await
        };
        match tokio::time::timeout(self.hosts.round_deadline() * 2, attempt).await {
            Ok(Err(e)) if super::is_foreign_schema(&e) => Err(e),
            _ => Ok(()),
        }
    }

    /// Applies pending migrations and marks the store ready.
    pub async fn migrate(&self) -> Result<usize, StoreError> {
        let mut client = self.connect_direct().await?;
        let applied = run_migrations(&mut client).await?;
        self.db.set_ready();
        Ok(applied)
    }

    /// `host:port: code: message` while connections fail because the
    /// server refuses the credentials (SQLSTATE class 28: a role that does
    /// not exist, a wrong password); `None` once a connection succeeds or
    /// when they fail for another reason.
    pub fn credentials_refused(&self) -> Option<String> {
        self.hosts.credentials_refused()
    }

    /// True once the schema is known to be migrated.
    pub fn is_ready(&self) -> bool {
        self.db.is_ready()
    }

    /// The per-operation metrics, to register in the broker's registry.
    pub fn metric_collectors(&self) -> Vec<Box<dyn prometheus::core::Collector>> {
        let mut all = self.db.collectors();
        all.extend(self.flight_metrics.collectors());
        all
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
            Ok::<(), StoreError>(())
        })?;
        self.db.mark_answering();
        Ok(())
    }

    /// Changes the most connections the pool opens.
    pub fn resize_pool(&self, max_size: usize) {
        self.db.pool().resize(max_size.max(1));
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
