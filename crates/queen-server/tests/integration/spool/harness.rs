//! Helpers of the spool tests: a broker behind a fault proxy, the real binary
//! as a child process (for SIGKILL), and reads of what PostgreSQL holds.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use queen_testkit::{base_env, FaultProxy, TestBroker, TestDb};
use reqwest::StatusCode;
use serde_json::{json, Value};

/// A database, a fault proxy in front of it, and a spool directory.
pub struct Rig {
    pub db: TestDb,
    pub proxy: FaultProxy,
    pub dir: tempfile::TempDir,
}

impl Rig {
    pub async fn new() -> Self {
        let db = TestDb::new().await.expect("db");
        let upstream = SocketAddr::new(
            db.host.parse::<IpAddr>().expect("PG host is an IP"),
            db.port,
        );
        let proxy = FaultProxy::start(upstream).await.expect("proxy");
        let dir = tempfile::Builder::new()
            .prefix("queen-spool-test-")
            .tempdir()
            .expect("tempdir");
        Self { db, proxy, dir }
    }

    pub fn spool_dir(&self) -> &Path {
        self.dir.path()
    }

    /// Environment of a broker that reaches PostgreSQL through the proxy.
    pub fn env(&self, extra: &[(&str, &str)]) -> HashMap<String, String> {
        let mut env = base_env(&self.db);
        env.insert("PG_HOST".into(), "127.0.0.1".into());
        env.insert("PG_PORT".into(), self.proxy.addr().port().to_string());
        env.insert(
            "FILE_BUFFER_DIR".into(),
            self.spool_dir().display().to_string(),
        );
        env.insert("FILE_BUFFER_FLUSH_MS".into(), "20".into());
        for (k, v) in extra {
            env.insert((*k).to_owned(), (*v).to_owned());
        }
        env
    }

    /// An in-process broker through the proxy, waited healthy.
    pub async fn broker(&self, extra: &[(&str, &str)]) -> TestBroker {
        let b = TestBroker::start_env(self.env(extra))
            .await
            .expect("broker");
        b.wait_healthy(Duration::from_secs(20))
            .await
            .expect("healthy");
        b
    }
}

/// The transaction ids stored in `queue`/`partition`, in offset order.
pub async fn stored(db: &TestDb, queue: &str, partition: &str) -> Vec<String> {
    let client = db.client().await.expect("client");
    client
        .query(
            "SELECT u.t FROM queen.segments s
               JOIN queen.partitions pt ON pt.id = s.partition_id
               JOIN queen.queues q ON q.id = pt.queue_id,
               unnest(s.transaction_ids) WITH ORDINALITY AS u(t, i)
             WHERE q.name = $1 AND pt.name = $2
             ORDER BY s.first_offset, u.i",
            &[&queue, &partition],
        )
        .await
        .expect("stored ids")
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// Messages stored in `queue`, all partitions.
pub async fn stored_count(db: &TestDb, queue: &str) -> i64 {
    let client = db.client().await.expect("client");
    client
        .query_one(
            "SELECT coalesce(sum(cardinality(s.transaction_ids)), 0)::bigint FROM queen.segments s
               JOIN queen.partitions pt ON pt.id = s.partition_id
               JOIN queen.queues q ON q.id = pt.queue_id WHERE q.name = $1",
            &[&queue],
        )
        .await
        .expect("count")
        .get(0)
}

/// Waits until `queue` holds `want` messages.
pub async fn wait_stored(db: &TestDb, queue: &str, want: i64, limit: Duration) {
    let started = Instant::now();
    loop {
        let n = stored_count(db, queue).await;
        if n == want {
            return;
        }
        assert!(
            n < want,
            "{queue}: {n} messages stored, more than the {want} pushed"
        );
        assert!(
            started.elapsed() < limit,
            "{queue}: {n} of {want} stored after {limit:?}"
        );
        sleep_ms(50).await;
    }
}

/// Push items for `queue`: `per_partition` messages in each of `partitions`,
/// ids `<partition>-<i>`, interleaved across partitions.
pub fn numbered(queue: &str, partitions: &[&str], per_partition: usize) -> Vec<Value> {
    (0..per_partition)
        .flat_map(|i| {
            partitions.iter().map(move |p| {
                json!({"queue": queue, "partition": p, "payload": {"p": p, "i": i},
                       "transactionId": format!("{p}-{i}")})
            })
        })
        .collect()
}

/// Asserts every result is `buffered` with queue, partition and transactionId.
#[track_caller]
pub fn assert_buffered(results: &[Value], items: &[Value]) {
    for (r, item) in results.iter().zip(items) {
        assert_eq!(r["status"], "buffered", "{r}");
        assert_eq!(r["queue"], item["queue"], "{r}");
        assert_eq!(r["partition"], item["partition"], "{r}");
        let id = r["transactionId"].as_str().expect("transactionId");
        if let Some(given) = item["transactionId"].as_str() {
            assert_eq!(id, given);
        } else {
            assert!(uuid::Uuid::parse_str(id).is_ok(), "generated id {id}");
        }
    }
}

/// Pushes `items` in requests of `chunk` through `post`; returns all results.
pub async fn push_chunks(
    url: &str,
    http: &reqwest::Client,
    items: &[Value],
    chunk: usize,
) -> Vec<Value> {
    let mut out = Vec::new();
    for c in items.chunks(chunk) {
        let resp = http
            .post(format!("{url}/api/v1/push"))
            .json(&json!({ "items": c }))
            .send()
            .await
            .expect("push");
        let status = resp.status();
        let body: Value = resp.json().await.expect("push body");
        assert_eq!(status, StatusCode::CREATED, "{body}");
        out.extend(body.as_array().expect("array").iter().cloned());
    }
    out
}

/// The real `queen-server` binary as a child process, so a test can SIGKILL it.
pub struct Child9 {
    child: Child,
    pub url: String,
    pub log: PathBuf,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

impl Child9 {
    /// Starts the binary and waits until its schema is ready (`/health` no
    /// longer says `starting`: before, every route but `/health` answers 503).
    pub async fn start(env: &HashMap<String, String>, log: PathBuf) -> Self {
        let port = free_port();
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_queen-server"))
            .arg("serve")
            .env_clear()
            .envs(env)
            .env("PORT", port.to_string())
            .env("LOG_LEVEL", "info")
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log"))
            .stderr(out)
            .spawn()
            .expect("spawn queen-server");
        let c = Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
            log,
        };
        let http = reqwest::Client::new();
        let started = Instant::now();
        loop {
            if let Ok(r) = http.get(format!("{}/health", c.url)).send().await {
                let body: Value = r.json().await.unwrap_or_default();
                if body["status"] != "starting" {
                    break;
                }
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "queen-server did not get ready: {}",
                c.log_text()
            );
            sleep_ms(50).await;
        }
        c
    }

    /// SIGKILL: no shutdown code runs.
    pub fn kill9(mut self) {
        self.child.kill().expect("kill -9");
        let _ = self.child.wait();
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Child9 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---- HTTP helpers: the suite's shared ones, plus two shaped for these tests ----

pub use crate::common::{
    assert_error, messages, pop_ok, pop_path, push_items, setup_with, sleep_ms, txn_ids, unique,
};

/// Pushes one message and asserts it was queued.
pub async fn push_one(b: &TestBroker, queue: &str, partition: &str, payload: Value, id: &str) {
    crate::common::push_one(b, queue, partition, payload, id).await;
}

/// Acks one popped message; returns its result element.
pub async fn ack(b: &TestBroker, msg: &Value, status: &str) -> Value {
    crate::common::ack(b, msg, status, None).await
}
