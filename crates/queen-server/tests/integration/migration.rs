//! `/api/v1/migration/*`: this broker's database copied with `pg_dump` and
//! `pg_restore` to a private PostgreSQL (its own `initdb` in a temporary
//! directory, on a free port, password authentication), then validated by
//! row counts. Also: bad input, the password never echoed, one copy at a time.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::*;

const BIN: &str = "/usr/lib/postgresql/15/bin";
/// The advisory lock key of a running copy (`queen_server::dbcopy::LOCK_KEY`).
const LOCK_KEY: i64 = queen_server::dbcopy::LOCK_KEY;

/// A PostgreSQL server of our own, stopped and removed on drop.
struct PrivatePg {
    dir: tempfile::TempDir,
    port: u16,
    password: String,
}

/// Runs a PostgreSQL tool as the `postgres` user (initdb refuses root).
fn as_postgres(tool: &str, args: &[&str]) -> std::process::Output {
    let path = Path::new(BIN).join(tool);
    let mut cmd = if nix_is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(path);
        c
    } else {
        Command::new(path)
    };
    cmd.args(args).output().expect("run a PostgreSQL tool")
}

fn nix_is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

impl PrivatePg {
    fn start() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("queen-private-pg-")
            .tempdir()
            .unwrap();
        let data: PathBuf = dir.path().join("data");
        let pwfile = dir.path().join("pw");
        let password = format!("pw-{}", uuid::Uuid::new_v4().simple());
        std::fs::write(&pwfile, &password).unwrap();
        if nix_is_root() {
            let ok = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(ok.success());
        }
        let out = as_postgres(
            "initdb",
            &[
                "-D",
                data.to_str().unwrap(),
                "-U",
                "postgres",
                "--auth=scram-sha-256",
                "--pwfile",
                pwfile.to_str().unwrap(),
                "--no-sync",
            ],
        );
        assert!(out.status.success(), "initdb: {out:?}");
        let port = queen_testkit::free_port().unwrap();
        let opts = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            dir.path().display()
        );
        let log = dir.path().join("log");
        let out = as_postgres(
            "pg_ctl",
            &[
                "-D",
                data.to_str().unwrap(),
                "-o",
                &opts,
                "-l",
                log.to_str().unwrap(),
                "-w",
                "-t",
                "60",
                "start",
            ],
        );
        assert!(out.status.success(), "pg_ctl start: {out:?}");
        Self {
            dir,
            port,
            password,
        }
    }

    fn target(&self, database: &str) -> Value {
        json!({"host": "127.0.0.1", "port": self.port, "database": database,
               "user": "postgres", "password": self.password, "ssl": false})
    }

    async fn client(&self, database: &str) -> tokio_postgres::Client {
        let (client, conn) = tokio_postgres::Config::new()
            .host("127.0.0.1")
            .port(self.port)
            .user("postgres")
            .password(&self.password)
            .dbname(database)
            .connect(tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        client
    }
}

impl Drop for PrivatePg {
    fn drop(&mut self) {
        let data = self.dir.path().join("data");
        let _ = as_postgres(
            "pg_ctl",
            &["-D", data.to_str().unwrap(), "-m", "immediate", "stop"],
        );
    }
}

async fn wait_done(b: &queen_testkit::TestBroker) -> Value {
    for _ in 0..600 {
        let (status, body) = b.get("/api/v1/migration/status").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        match body["status"].as_str().unwrap() {
            "complete" | "error" => return body,
            "dumping" | "restoring" => {}
            other => panic!("unexpected status {other}: {body}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("migration did not finish in 60 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_is_copied_to_a_private_server_and_validates() {
    let pg = PrivatePg::start();
    pg.client("postgres")
        .await
        .batch_execute("CREATE DATABASE target")
        .await
        .unwrap();
    let (db, b) = setup().await;
    // data in several tables: messages, cursors, a dead letter, a trace
    let q = unique("mig");
    push_numbered(&b, &q, "p1", "m", 25).await;
    push_numbered(&b, &q, "p2", "n", 5).await;
    let body = pop_ok(&b, &pop_path(&q, Some("p1"), "batch=3&consumerGroup=g")).await;
    let msgs = messages(&body);
    ack(&b, &msgs[0], "completed", None).await;
    ack(&b, &msgs[1], "dlq", Some("boom")).await;

    let (status, idle) = b.get("/api/v1/migration/status").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(idle["status"], "idle");
    assert_keys(&idle, &["status", "currentStep", "elapsedSeconds"]);

    // a wrong password: 400, and the password sent is not echoed
    let mut wrong = pg.target("target");
    wrong["password"] = json!("not-the-password-42");
    let (status, body) = b.post("/api/v1/migration/test-connection", &wrong).await;
    let e = assert_error(status, &body, StatusCode::BAD_REQUEST);
    assert!(!e.contains("not-the-password-42"), "{e}");
    let (status, body) = b
        .post("/api/v1/migration/test-connection", &pg.target("target"))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["success"], true);
    assert!(
        body["version"].as_str().unwrap().starts_with("PostgreSQL"),
        "{body}"
    );
    assert!(!body.to_string().contains(&pg.password));

    // one copy at a time: a lock held elsewhere (another replica) refuses a start
    let other = db.client().await.unwrap();
    other
        .execute("SELECT pg_advisory_lock($1)", &[&LOCK_KEY])
        .await
        .unwrap();
    let (status, body) = b
        .post("/api/v1/migration/start", &pg.target("target"))
        .await;
    assert_error(status, &body, StatusCode::CONFLICT);
    other
        .execute("SELECT pg_advisory_unlock($1)", &[&LOCK_KEY])
        .await
        .unwrap();

    let mut start = pg.target("target");
    start["excludeTableData"] = json!(["message_traces"]);
    let (status, body) = b.post("/api/v1/migration/start", &start).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "started");
    assert!(body["message"].is_string());
    let done = wait_done(&b).await;
    assert_eq!(done["status"], "complete", "{done}");
    assert!(done["elapsedSeconds"].as_f64().unwrap() >= 0.0);
    assert!(!done.to_string().contains(&pg.password), "{done}");

    let (status, v) = b.post("/api/v1/migration/validate", &json!({})).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["success"], true);
    assert_eq!(v["allMatch"], true, "{v}");
    let tables = v["tables"].as_array().unwrap();
    let by_name = |n: &str| tables.iter().find(|t| t["table"] == n).unwrap().clone();
    assert_eq!(by_name("dead_letters")["sourceCount"], 1, "{v}");
    assert_eq!(by_name("dead_letters")["targetCount"], 1, "{v}");
    assert!(
        by_name("segments")["sourceCount"].as_i64().unwrap() >= 2,
        "{v}"
    );
    assert_eq!(by_name("message_traces")["excluded"], true, "{v}");
    for t in tables {
        assert_keys(
            t,
            &["table", "sourceCount", "targetCount", "match", "excluded"],
        );
    }
    // the copy is real: the target answers with the rows
    let target = pg.client("target").await;
    let n: i64 = target
        .query_one(
            "SELECT sum(next_offset - 1)::bigint FROM queen.partitions",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 30);

    // a change after the copy shows as a mismatch
    push_numbered(&b, &unique("later"), "p", "x", 1).await;
    let (_, v) = b
        .post("/api/v1/migration/validate", &pg.target("target"))
        .await;
    assert_eq!(v["allMatch"], false, "{v}");

    let (status, body) = b.post("/api/v1/migration/reset", &json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "idle");
    let (_, s) = b.get("/api/v1/migration/status").await;
    assert_eq!(s["status"], "idle");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_migration_input_is_refused() {
    let (_db, b) = setup().await;
    let good =
        json!({"host": "127.0.0.1", "port": 1, "database": "d", "user": "u", "password": "p"});
    for (path, body) in [
        ("test-connection", json!({})),
        (
            "test-connection",
            json!({"host": "", "database": "d", "user": "u"}),
        ),
        (
            "test-connection",
            json!({"host": "h", "port": 70000, "database": "d", "user": "u"}),
        ),
        (
            "test-connection",
            json!({"host": "h", "port": "x", "database": "d", "user": "u"}),
        ),
        (
            "test-connection",
            json!({"host": "-oProxyCommand", "database": "d", "user": "u"}),
        ),
        (
            "test-connection",
            json!({"host": "h", "database": 5, "user": "u"}),
        ),
        (
            "test-connection",
            json!({"host": "h", "database": "d", "user": "u", "ssl": "yes"}),
        ),
        (
            "start",
            json!({"host": "h", "database": "d", "user": "u", "schema": "queen; DROP"}),
        ),
        (
            "start",
            json!({"host": "h", "database": "d", "user": "u", "excludeTableData": "segments"}),
        ),
        (
            "start",
            json!({"host": "h", "database": "d", "user": "u", "excludeTableData": ["a b"]}),
        ),
        // unreachable target: refused before anything starts
        ("start", good.clone()),
        ("test-connection", good.clone()),
        // nothing to validate against yet
        ("validate", json!({})),
    ] {
        let (status, resp) = b.post(&format!("/api/v1/migration/{path}"), &body).await;
        let e = assert_error(status, &resp, StatusCode::BAD_REQUEST);
        assert!(!e.contains("\"p\""), "{e}");
    }
    let resp = b
        .http
        .post(b.url("/api/v1/migration/start"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let (_, s) = b.get("/api/v1/migration/status").await;
    assert_eq!(s["status"], "idle", "nothing started: {s}");
}
