//! Starting anywhere and a clear word on every setting (issue 16):
//! `serve --embedded-pg`, the one-line message when nothing is reachable,
//! warnings for ignored and misspelt variables, a foreign `queen` schema.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use queen_testkit::{free_port, pg_bin_dir, TestDb};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::*;

/// Stops `child` with SIGTERM (what Ctrl-C or a service manager sends) and waits.
fn terminate(child: &mut Child) {
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(30) {
        if child.try_wait().ok().flatten().is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
}

async fn wait_health(port: u16, limit: Duration) -> bool {
    let http = reqwest::Client::new();
    let started = Instant::now();
    while started.elapsed() < limit {
        if let Ok(r) = http
            .get(format!("http://127.0.0.1:{port}/health"))
            .send()
            .await
        {
            if r.status() == StatusCode::OK {
                return true;
            }
        }
        sleep_ms(200).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_pg_starts_from_nothing_keeps_its_data_and_stops_with_the_broker() {
    assert!(
        pg_bin_dir().is_some(),
        "no PostgreSQL binaries on this machine"
    );
    let dir = tempfile::Builder::new().prefix("qpg").tempdir().unwrap();
    let pgdir = dir.path().join("pg");
    let port = free_port().unwrap();
    let spawn = || {
        queen_server()
            .args(["serve", "--embedded-pg", pgdir.to_str().unwrap()])
            .env("PORT", port.to_string())
            .env("HOST", "127.0.0.1")
            .env("FILE_BUFFER_DIR", dir.path().join("spool"))
            // pointing elsewhere on purpose: --embedded-pg wins
            .env("PG_HOST", "192.0.2.1")
            .env("LOG_LEVEL", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let http = reqwest::Client::new();
    let url = |p: &str| format!("http://127.0.0.1:{port}{p}");
    let queue = unique("embedded");

    let mut first = spawn();
    assert!(
        wait_health(port, Duration::from_secs(120)).await,
        "the first start (initdb) never got healthy"
    );
    let r = http
        .post(url("/api/v1/push"))
        .json(
            &json!({ "items": [ { "queue": queue, "payload": "kept", "transactionId": "kept" } ] }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body[0]["status"], "queued", "{body}");
    terminate(&mut first);
    assert!(
        !pgdir.join("data/postmaster.pid").exists(),
        "PostgreSQL stopped with the broker"
    );

    // the second start reuses the cluster: the message is still there
    let mut second = spawn();
    assert!(wait_health(port, Duration::from_secs(60)).await);
    let r = http
        .get(url(&pop_path(&queue, None, "autoAck=true")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let body: Value = r.json().await.unwrap();
    assert_eq!(txn_ids(&body), ["kept"]);
    terminate(&mut second);
    assert!(!pgdir.join("data/postmaster.pid").exists());
}

/// Runs `serve` with `env` until a line containing `want` shows up on stderr
/// (or `limit` passes); returns what was read.
fn serve_until(env: &[(&str, &str)], want: &str, limit: Duration) -> String {
    let port = free_port().unwrap();
    let spool = tempfile::tempdir().unwrap();
    let mut cmd = queen_server();
    cmd.arg("serve")
        .env("PORT", port.to_string())
        .env("HOST", "127.0.0.1")
        .env("FILE_BUFFER_DIR", spool.path())
        .env("LOG_FORMAT", "text")
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let err = child.stderr.take().unwrap();
    let (etx, erx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            if etx.send(line).is_err() {
                return;
            }
        }
    });
    let started = Instant::now();
    let mut seen = String::new();
    while started.elapsed() < limit && !seen.contains(want) {
        for line in rx.try_iter().chain(erx.try_iter()) {
            seen.push_str(&line);
            seen.push('\n');
        }
        if child.try_wait().ok().flatten().is_some() {
            std::thread::sleep(Duration::from_millis(200));
            for line in rx.try_iter().chain(erx.try_iter()) {
                seen.push_str(&line);
                seen.push('\n');
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    terminate(&mut child);
    seen
}

#[test]
fn nothing_reachable_is_said_in_one_line_with_the_two_ways_out() {
    let closed = free_port().unwrap();
    let log = serve_until(
        &[("PG_HOST", "127.0.0.1"), ("PG_PORT", &closed.to_string())],
        "--embedded-pg",
        Duration::from_secs(30),
    );
    let line = log
        .lines()
        .find(|l| l.contains("cannot reach PostgreSQL"))
        .unwrap_or_else(|| panic!("no unreachable line in {log}"));
    assert!(
        line.contains(&format!("postgres@127.0.0.1:{closed}/postgres")),
        "{line}"
    );
    assert!(
        line.contains("PG_HOST") && line.contains("DATABASE_URL"),
        "{line}"
    );
    assert!(line.contains("--embedded-pg"), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignored_and_misspelt_variables_are_named_at_start() {
    let db = TestDb::new().await.unwrap();
    let port = db.port.to_string();
    let log = serve_until(
        &[
            ("PG_HOST", &db.host),
            ("PG_PORT", &port),
            ("PG_USER", &db.user),
            ("PG_PASSWORD", ""),
            ("PG_DB", &db.name),
            ("NUM_WORKERS", "10"),
            ("SIDECAR_POOL_SIZE", "50"),
            ("DB_POOL_SZE", "10"),
        ],
        "queen listening",
        Duration::from_secs(30),
    );
    assert!(log.contains("NUM_WORKERS is ignored: "), "{log}");
    assert!(log.contains("SIDECAR_POOL_SIZE is ignored: "), "{log}");
    assert!(
        log.contains("DB_POOL_SZE is not a variable this broker reads; did you mean DB_POOL_SIZE?"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queen_schema_made_by_something_else_is_refused_and_left_alone() {
    let db = TestDb::empty().await.unwrap();
    let client = db.client().await.unwrap();
    client
        .batch_execute(
            "CREATE SCHEMA queen; CREATE TABLE queen.messages (id bigint); \
             CREATE TABLE queen.partitions (id bigint)",
        )
        .await
        .unwrap();
    let out = queen_server()
        .arg("migrate")
        .env("PG_HOST", &db.host)
        .env("PG_PORT", db.port.to_string())
        .env("PG_USER", &db.user)
        .env("PG_DB", &db.name)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("was not created by this broker"), "{err}");
    assert!(err.contains("messages, partitions"), "{err}");
    assert!(err.contains("PG_DB"), "{err}");
    // serve refuses too, and exits
    let port = db.port.to_string();
    let log = serve_until(
        &[
            ("PG_HOST", &db.host),
            ("PG_PORT", &port),
            ("PG_USER", &db.user),
            ("PG_PASSWORD", ""),
            ("PG_DB", &db.name),
        ],
        "was not created by this broker",
        Duration::from_secs(30),
    );
    assert!(log.contains("was not created by this broker"), "{log}");
    let tables = count(
        &client,
        "SELECT count(*) FROM pg_tables WHERE schemaname = 'queen'",
    )
    .await;
    assert_eq!(tables, 2, "nothing was written into the foreign schema");
}
