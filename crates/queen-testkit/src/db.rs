//! `TestDb`: a database cloned from a migrated template, dropped afterwards.

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use tokio_postgres::{Client, NoTls};

/// Prefix of every database a test creates; crashed runs' leftovers are swept by it.
const TEST_DB_PREFIX: &str = "queen_t_";
/// Leftover test databases older than this are dropped at the next start (2 hours).
const STALE_AFTER_SECS: u64 = 7_200;
/// Advisory lock key that serialises template creation across test processes.
const TEMPLATE_LOCK_KEY: i64 = 0x7175_6565_6e74_706c;

/// Connection string of the admin database.
pub fn admin_conn_string() -> String {
    std::env::var("QUEEN_TEST_PG")
        .unwrap_or_else(|_| "host=127.0.0.1 port=5432 user=postgres dbname=postgres".to_owned())
}

async fn connect(conn: &str) -> anyhow::Result<Client> {
    let (client, connection) = tokio_postgres::connect(conn, NoTls)
        .await
        .with_context(|| format!("connect to PostgreSQL ({conn})"))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

/// A private database with the Queen schema, dropped when this value drops.
#[derive(Debug)]
pub struct TestDb {
    pub name: String,
    /// Host, port and user of the server, for brokers pointed at this database.
    pub host: String,
    pub port: u16,
    pub user: String,
}

impl TestDb {
    /// Creates a fresh migrated database.
    pub async fn new() -> anyhow::Result<Self> {
        Self::create(true).await
    }

    /// Creates a fresh database without the Queen schema (to test migrations).
    pub async fn empty() -> anyhow::Result<Self> {
        Self::create(false).await
    }

    async fn create(migrated: bool) -> anyhow::Result<Self> {
        let conn = admin_conn_string();
        let admin = connect(&conn).await?;
        sweep_stale(&admin).await;
        let template = if migrated {
            ensure_template(&admin, &conn).await?
        } else {
            "template0".to_owned()
        };
        let name = format!(
            "{TEST_DB_PREFIX}{}_{}",
            now_secs(),
            uuid::Uuid::new_v4().simple()
        );
        let mut attempts = 0;
        loop {
            attempts += 1;
            let sql = format!("CREATE DATABASE \"{name}\" TEMPLATE \"{template}\"");
            match admin.batch_execute(&sql).await {
                Ok(()) => break,
                // the template is briefly busy while another test clones it
                Err(e) if attempts < 50 => {
                    tracing_free_sleep(e, attempts).await;
                }
                Err(e) => return Err(e).context("create test database"),
            }
        }
        let cfg: tokio_postgres::Config = conn.parse()?;
        let host = match cfg.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
            _ => "127.0.0.1".to_owned(),
        };
        Ok(Self {
            name,
            host,
            port: cfg.get_ports().first().copied().unwrap_or(5432),
            user: cfg.get_user().unwrap_or("postgres").to_owned(),
        })
    }

    /// A connection to this database, for assertions on stored state.
    pub async fn client(&self) -> anyhow::Result<Client> {
        connect(&format!(
            "host={} port={} user={} dbname={}",
            self.host, self.port, self.user, self.name
        ))
        .await
    }
}

async fn tracing_free_sleep(_e: tokio_postgres::Error, attempt: u32) {
    tokio::time::sleep(std::time::Duration::from_millis(
        20 * u64::from(attempt.min(10)),
    ))
    .await;
}

/// Creates (once per schema, across processes) the migrated template, named
/// after the fingerprint of the migrations and the stored function files.
async fn ensure_template(admin: &Client, conn: &str) -> anyhow::Result<String> {
    let template = format!(
        "queen_tpl_{:016x}",
        queen_server::store::migrations_fingerprint()
    );
    admin
        .execute("SELECT pg_advisory_lock($1)", &[&TEMPLATE_LOCK_KEY])
        .await?;
    let result = async {
        let exists = admin
            .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&template])
            .await?
            .is_some();
        if !exists {
            let building = format!("{template}_building");
            admin
                .batch_execute(&format!(
                    "DROP DATABASE IF EXISTS \"{building}\" WITH (FORCE)"
                ))
                .await?;
            admin
                .batch_execute(&format!("CREATE DATABASE \"{building}\""))
                .await?;
            {
                let mut cfg: tokio_postgres::Config = conn.parse()?;
                cfg.dbname(&building);
                let (mut client, connection) = cfg.connect(NoTls).await?;
                let handle = tokio::spawn(connection);
                queen_server::store::run_migrations(&mut client)
                    .await
                    .map_err(|e| anyhow::anyhow!("migrate template: {e}"))?;
                drop(client);
                let _ = handle.await;
            }
            admin
                .batch_execute(&format!(
                    "ALTER DATABASE \"{building}\" RENAME TO \"{template}\""
                ))
                .await?;
        }
        anyhow::Ok(())
    }
    .await;
    admin
        .execute("SELECT pg_advisory_unlock($1)", &[&TEMPLATE_LOCK_KEY])
        .await?;
    result?;
    Ok(template)
}

/// Drops test databases left behind by crashed runs.
async fn sweep_stale(admin: &Client) {
    let Ok(rows) = admin
        .query(
            "SELECT datname FROM pg_database WHERE datname LIKE $1",
            &[&format!("{TEST_DB_PREFIX}%")],
        )
        .await
    else {
        return;
    };
    let now = now_secs();
    for row in rows {
        let name: String = row.get(0);
        let created: u64 = name
            .trim_start_matches(TEST_DB_PREFIX)
            .split('_')
            .next()
            .and_then(|s| s.parse().ok())
            .unwrap_or(now);
        if now.saturating_sub(created) > STALE_AFTER_SECS {
            let _ = admin
                .batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
                .await;
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let name = self.name.clone();
        let conn = admin_conn_string();
        // a runtime of its own: Drop may run inside or outside the test's runtime
        let handle = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                if let Ok(admin) = connect(&conn).await {
                    let _ = admin
                        .batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
                        .await;
                }
            });
        });
        let _ = handle.join();
    }
}
