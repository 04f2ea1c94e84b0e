//! What the database copy (`/api/v1/migration/*`, `crate::dbcopy`) needs of
//! PostgreSQL: the source's connection parameters for `pg_dump`, connections
//! to the target, and row counts per table on either side.

use tokio_postgres::config::{Host, SslMode};
use tokio_postgres::{Client, Config};

use super::{col, Store, StoreError};
use crate::config::DbConfig;

/// Connection parameters of one side, as `pg_dump`/`pg_restore` take them
/// (the password goes through `PGPASSWORD`, never on a command line).
#[derive(Clone)]
pub struct PgEndpoint {
    pub host: String,
    pub port: u16,
    pub database: String,
    pub user: String,
    pub password: Option<String>,
    pub ssl: bool,
}

impl std::fmt::Debug for PgEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgEndpoint")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("database", &self.database)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("ssl", &self.ssl)
            .finish()
    }
}

impl PgEndpoint {
    fn pg_config(&self) -> Config {
        let mut c = Config::new();
        c.host(&self.host)
            .port(self.port)
            .dbname(&self.database)
            .user(&self.user)
            .application_name("queen-migration")
            .connect_timeout(std::time::Duration::from_secs(10));
        if let Some(p) = &self.password {
            c.password(p);
        }
        c
    }

    /// Opens a connection (TLS required when `ssl`, certificates not checked:
    /// the operator names the host).
    pub async fn connect(&self, base: &DbConfig) -> Result<Client, StoreError> {
        let mut pg = self.pg_config();
        let db = DbConfig {
            url: None,
            use_ssl: self.ssl,
            ssl_reject_unauthorized: false,
            ..base.clone()
        };
        let tls = super::tls::configure(&db, &mut pg)?;
        if !self.ssl {
            pg.ssl_mode(SslMode::Disable);
        }
        let (client, conn) = pg.connect(tls).await?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "migration connection closed");
            }
        });
        Ok(client)
    }
}

/// The server version string of a connection.
pub async fn server_version(client: &Client) -> Result<String, StoreError> {
    let row = client.query_one("SELECT version() AS v", &[]).await?;
    col(&row, "v")
}

/// `(table, rows)` of every ordinary table of `schema`, by name.
pub async fn row_counts(client: &Client, schema: &str) -> Result<Vec<(String, i64)>, StoreError> {
    let tables = client
        .query(
            "SELECT tablename FROM pg_tables WHERE schemaname = $1 ORDER BY tablename",
            &[&schema],
        )
        .await?;
    let mut out = Vec::with_capacity(tables.len());
    for t in &tables {
        let name: String = col(t, "tablename")?;
        // identifiers quoted by PostgreSQL itself
        let sql: String = col(
            &client
                .query_one(
                    "SELECT format('SELECT count(*) AS n FROM %I.%I', $1::text, $2::text) AS q",
                    &[&schema, &name],
                )
                .await?,
            "q",
        )?;
        let n: i64 = col(&client.query_one(sql.as_str(), &[]).await?, "n")?;
        out.push((name, n));
    }
    Ok(out)
}

impl Store {
    /// This broker's own database as a [`PgEndpoint`] (the host that
    /// answered last).
    pub fn source_endpoint(&self) -> PgEndpoint {
        let none = tokio_postgres::Config::new();
        let c = self.hosts.current().unwrap_or(&none);
        let host = match c.get_hosts().first() {
            Some(Host::Tcp(h)) => h.clone(),
            #[cfg(unix)]
            Some(Host::Unix(p)) => p.display().to_string(),
            None => "localhost".to_owned(),
        };
        PgEndpoint {
            host,
            port: c.get_ports().first().copied().unwrap_or(5432),
            database: c.get_dbname().unwrap_or("postgres").to_owned(),
            user: c.get_user().unwrap_or("postgres").to_owned(),
            password: c
                .get_password()
                .map(|p| String::from_utf8_lossy(p).into_owned()),
            ssl: c.get_ssl_mode() == SslMode::Require,
        }
    }

    /// A direct connection to this broker's own database.
    pub async fn source_client(&self) -> Result<Client, StoreError> {
        self.connect_direct().await
    }
}
