//! The broker's lifecycle (issue 34): the graceful stop on SIGTERM (the
//! drain, parked pops answered, requests in flight finished, the timeout, a
//! second signal), and what `/health` says about it, the mesh and the build.
//! The start's readiness gate is in `startup.rs`.

use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use queen_testkit::{free_port, TestCluster, TestDb};
use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;

use crate::common::*;

/// A `queen-server serve` child process on a free port of `db`.
struct Served {
    child: Child,
    port: u16,
    _spool: tempfile::TempDir,
}

impl Served {
    fn start(db: &TestDb, extra: &[(&str, &str)]) -> Self {
        let port = free_port().unwrap();
        let spool = tempfile::Builder::new().prefix("qlife").tempdir().unwrap();
        let mut cmd = queen_server();
        cmd.arg("serve")
            .env("PORT", port.to_string())
            .env("HOST", "127.0.0.1")
            .env("PG_HOST", &db.host)
            .env("PG_PORT", db.port.to_string())
            .env("PG_USER", &db.user)
            .env("PG_DB", &db.name)
            .env("DB_POOL_SIZE", "4")
            .env("FILE_BUFFER_DIR", spool.path())
            .env("LOG_LEVEL", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        for (k, v) in extra {
            cmd.env(k, v);
        }
        Self {
            child: cmd.spawn().unwrap(),
            port,
            _spool: spool,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    async fn wait_healthy(&self) {
        let http = reqwest::Client::new();
        for _ in 0..200 {
            if let Ok(r) = http.get(self.url("/health")).send().await {
                if r.status() == StatusCode::OK {
                    return;
                }
            }
            sleep_ms(100).await;
        }
        panic!("broker on port {} never healthy", self.port);
    }

    fn signal(&self, name: &str) {
        let ok = std::process::Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{name}");
    }

    /// Waits for the exit, at most `limit`; `None` when it did not come.
    async fn exit_within(&mut self, limit: Duration) -> Option<ExitStatus> {
        let started = Instant::now();
        while started.elapsed() < limit {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            sleep_ms(50).await;
        }
        None
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn health(http: &reqwest::Client, served: &Served) -> (StatusCode, Value) {
    let r = http.get(served.url("/health")).send().await.unwrap();
    let status = r.status();
    (status, r.json().await.unwrap())
}

fn closes(r: &reqwest::Response) -> bool {
    r.headers()
        .get("connection")
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_then_answers_parked_pops_and_exits() {
    let db = TestDb::new().await.unwrap();
    let drain = Duration::from_millis(3000);
    let mut served = Served::start(
        &db,
        &[
            ("SHUTDOWN_DRAIN_MS", "3000"),
            ("SHUTDOWN_TIMEOUT_MS", "10000"),
        ],
    );
    served.wait_healthy().await;
    let http = reqwest::Client::new();
    let (status, body) = health(&http, &served).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["status"], "healthy");
    assert_eq!(body["version"], env!("CARGO_PKG_VERSION"));
    assert!(
        body["commit"].as_str().is_some_and(|c| !c.is_empty()),
        "{body}"
    );
    assert_eq!(body["shared_state"]["enabled"], false, "{body}");
    let q = unique("drain");
    let push =
        |tag: &str| json!({"items": [{"queue": q, "partition": "p", "payload": {"tag": tag}}]});
    let r = http
        .post(served.url("/api/v1/push"))
        .json(&push("before"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    assert!(!closes(&r), "keep-alive before the stop");
    // a long poll of another group's empty queue, parked before the signal
    let parked = {
        let http = http.clone();
        let url = served.url(&pop_path(&unique("empty"), None, "wait=true&timeout=30000"));
        tokio::spawn(async move {
            let r = http.get(url).send().await.unwrap();
            (r.status(), closes(&r), Instant::now())
        })
    };
    sleep_ms(300).await;

    served.signal("TERM");
    let signalled = Instant::now();
    // as soon as the signal is handled (the process may not run at once on
    // a loaded machine): /health says draining, every route still serves,
    // and closes its connection
    let (mut status, mut body) = health(&http, &served).await;
    while status != StatusCode::SERVICE_UNAVAILABLE && signalled.elapsed() < Duration::from_secs(2)
    {
        sleep_ms(20).await;
        (status, body) = health(&http, &served).await;
    }
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["status"], "draining", "{body}");
    let r = http
        .post(served.url("/api/v1/push"))
        .json(&push("during"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    assert!(
        closes(&r),
        "a keep-alive answer of the drain carries Connection: close"
    );
    let r = http
        .get(served.url(&pop_path(&q, None, "batch=10")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(closes(&r));
    let body: Value = r.json().await.unwrap();
    let acks: Vec<Value> = messages(&body)
        .iter()
        .map(|m| ack_item(m, "completed", None))
        .collect();
    assert_eq!(
        acks.len(),
        2,
        "both pushes, the one of the drain too: {body}"
    );
    let r = http
        .post(served.url("/api/v1/ack/batch"))
        .json(&json!({ "acknowledgments": acks }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let results: Value = r.json().await.unwrap();
    assert!(
        results
            .as_array()
            .is_some_and(|a| a.len() == 2 && a.iter().all(|r| r["success"] == true)),
        "the acks of the drain are applied: {results}"
    );

    // the parked pop is answered (empty) when the drain ends, not at its timeout
    let (status, closed, answered) = tokio::time::timeout(Duration::from_secs(20), parked)
        .await
        .expect("the parked pop is answered at the end of the drain")
        .unwrap();
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert!(closed, "its answer closes the connection too");
    assert!(answered.duration_since(signalled) >= drain - Duration::from_millis(100));
    let exit = served
        .exit_within(Duration::from_secs(20))
        .await
        .expect("exits after the drain");
    assert!(exit.success(), "{exit:?}");
    assert!(http.get(served.url("/health")).send().await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_still_in_flight_at_the_timeout_does_not_hold_the_exit() {
    let db = TestDb::new().await.unwrap();
    let mut served = Served::start(
        &db,
        &[
            ("SHUTDOWN_DRAIN_MS", "200"),
            ("SHUTDOWN_TIMEOUT_MS", "1500"),
            // the stalled body below would otherwise hold its request for a minute
            ("HTTP_BODY_TIMEOUT_MS", "60000"),
        ],
    );
    served.wait_healthy().await;
    // a push whose body never comes: in flight until the body deadline
    let mut stalled = tokio::net::TcpStream::connect(("127.0.0.1", served.port))
        .await
        .unwrap();
    stalled
        .write_all(b"POST /api/v1/push HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{")
        .await
        .unwrap();
    sleep_ms(200).await;
    served.signal("TERM");
    let exit = served
        .exit_within(Duration::from_secs(30))
        .await
        .expect("exits at SHUTDOWN_TIMEOUT_MS, not at the body deadline");
    assert!(exit.success(), "{exit:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_stops_at_once() {
    let db = TestDb::new().await.unwrap();
    let mut served = Served::start(
        &db,
        &[
            ("SHUTDOWN_DRAIN_MS", "120000"),
            ("SHUTDOWN_TIMEOUT_MS", "180000"),
        ],
    );
    served.wait_healthy().await;
    let http = reqwest::Client::new();
    served.signal("TERM");
    let mut draining = false;
    for _ in 0..100 {
        if health(&http, &served).await.1["status"] == "draining" {
            draining = true;
            break;
        }
        sleep_ms(50).await;
    }
    assert!(draining, "/health says draining after the first signal");
    assert!(served.child.try_wait().unwrap().is_none(), "still serving");
    served.signal("INT");
    let exit = served
        .exit_within(Duration::from_secs(30))
        .await
        .expect("the second signal stops the broker long before its 120 s drain ends");
    assert_eq!(exit.code(), Some(130), "{exit:?}");
}

#[test]
fn version_names_the_release_and_the_commit() {
    let out = queen_server().arg("--version").output().unwrap();
    assert!(out.status.success());
    let line = String::from_utf8_lossy(&out.stdout);
    let expected = format!("queen-server {} (", env!("CARGO_PKG_VERSION"));
    assert!(line.starts_with(&expected), "{line}");
    let commit = line
        .trim()
        .trim_start_matches(&expected)
        .trim_end_matches(')');
    assert!(!commit.is_empty(), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_reports_the_mesh_as_it_is() {
    let db = TestDb::new().await.unwrap();
    let cluster = TestCluster::start(3, &db, &[]).await.unwrap();
    cluster.wait_mesh_up(Duration::from_secs(20)).await.unwrap();
    for i in 0..3 {
        let (status, body) = cluster.node(i).get("/health").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let mesh = &body["shared_state"];
        assert_eq!(mesh["enabled"], true, "{body}");
        assert_eq!(mesh["peers"], 2, "{body}");
        assert_eq!(mesh["peers_connected"], 2, "{body}");
    }
}
