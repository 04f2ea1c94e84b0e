//! `TestBroker`: the real broker, in-process, on a free loopback port.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::TestDb;

/// A running broker; stopped when dropped.
#[derive(Debug)]
pub struct TestBroker {
    pub addr: SocketAddr,
    pub http: reqwest::Client,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    /// The broker's own spool directory when the test named none (removed on drop).
    _spool_dir: Option<tempfile::TempDir>,
}

/// Environment every test broker starts from: a small pool and quick re-checks.
pub fn base_env(db: &TestDb) -> HashMap<String, String> {
    [
        ("PG_HOST", db.host.clone()),
        ("PG_PORT", db.port.to_string()),
        ("PG_USER", db.user.clone()),
        ("PG_PASSWORD", String::new()),
        ("PG_DB", db.name.clone()),
        ("DB_POOL_SIZE", "8".to_owned()),
        ("DB_CONNECTION_TIMEOUT", "1000".to_owned()),
        ("HOST", "127.0.0.1".to_owned()),
        ("LOG_LEVEL", "warn".to_owned()),
        // no load balancer to drain from: a test broker stops at once
        ("SHUTDOWN_DRAIN_MS", "0".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// A fresh database and a healthy broker on it with `extra` environment;
/// bind both (`let (_db, b) = …`), the database is dropped with its value.
pub async fn fresh_broker(extra: &[(&str, &str)]) -> anyhow::Result<(TestDb, TestBroker)> {
    let db = TestDb::new().await?;
    let broker = TestBroker::start_with(&db, extra).await?;
    Ok((db, broker))
}

impl TestBroker {
    /// Starts a broker on `db` and waits until it reports healthy.
    pub async fn start(db: &TestDb) -> anyhow::Result<Self> {
        Self::start_with(db, &[]).await
    }

    /// Starts a broker on `db` with extra environment variables.
    pub async fn start_with(db: &TestDb, extra: &[(&str, &str)]) -> anyhow::Result<Self> {
        let mut env = base_env(db);
        for (k, v) in extra {
            env.insert((*k).to_owned(), (*v).to_owned());
        }
        let broker = Self::start_env(env).await?;
        broker.wait_healthy(Duration::from_secs(20)).await?;
        Ok(broker)
    }

    /// Starts a broker from a full environment without waiting for health.
    pub async fn start_env(mut env: HashMap<String, String>) -> anyhow::Result<Self> {
        // every broker needs its own spool directory (a lock file guards it)
        let spool_dir = if env.contains_key("FILE_BUFFER_DIR") {
            None
        } else {
            let dir = tempfile::Builder::new().prefix("queen-spool-").tempdir()?;
            env.insert(
                "FILE_BUFFER_DIR".to_owned(),
                dir.path().display().to_string(),
            );
            Some(dir)
        };
        let config = queen_server::config::Config::from_env(&env)?;
        queen_server::telemetry::init(&config.log_level, false);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shutdown = CancellationToken::new();
        let task = {
            let shutdown = shutdown.clone();
            tokio::spawn(async move {
                if let Err(e) = queen_server::run(config, listener, shutdown).await {
                    eprintln!("test broker stopped: {e:#}");
                }
            })
        };
        Ok(Self {
            addr,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()?,
            shutdown,
            task,
            _spool_dir: spool_dir,
        })
    }

    /// Polls `/health` until it answers 200.
    pub async fn wait_healthy(&self, limit: Duration) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if let Ok(r) = self.http.get(self.url("/health")).send().await {
                if r.status() == StatusCode::OK {
                    return Ok(());
                }
            }
            if tokio::time::Instant::now() >= deadline {
                anyhow::bail!("broker not healthy after {limit:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The full URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Sends a request and returns status and JSON body (`Value::Null` when empty).
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> (StatusCode, Value) {
        let mut req = self.http.request(method, self.url(path));
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().await.expect("request failed");
        let status = resp.status();
        let bytes = resp.bytes().await.expect("read body");
        let value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        };
        (status, value)
    }

    /// `GET path`.
    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.call(reqwest::Method::GET, path, None).await
    }

    /// `POST path` with a JSON body.
    pub async fn post(&self, path: &str, body: &Value) -> (StatusCode, Value) {
        self.call(reqwest::Method::POST, path, Some(body)).await
    }

    /// `DELETE path`.
    pub async fn delete(&self, path: &str) -> (StatusCode, Value) {
        self.call(reqwest::Method::DELETE, path, None).await
    }

    /// Stops the broker and waits for it to finish.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        let task = std::mem::replace(&mut self.task, tokio::spawn(async {}));
        let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    }
}

impl Drop for TestBroker {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}
