//! Start-up: the binary's subcommands, bad configuration, and migrations when
//! several brokers start at once against an empty database.

use std::time::Duration;

use queen_testkit::{TestBroker, TestDb};
use reqwest::StatusCode;
use serde_json::json;

use crate::common::*;

#[test]
fn a_bad_value_names_its_variable_and_exits_non_zero() {
    for (var, value) in [
        ("PORT", "sixty"),
        ("DB_POOL_SIZE", "0"),
        ("PG_USE_SSL", "maybe"),
        ("QUEEN_MESH_PEERS", "nohost"),
        ("TOKIO_WORKER_THREADS", "0"),
        ("TOKIO_WORKER_THREADS", "two"),
    ] {
        let out = queen_server()
            .arg("check-config")
            .env(var, value)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{var}={value}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(var), "{var}: {stderr}");
    }
}

#[test]
fn check_config_prints_the_effective_configuration_without_secrets() {
    let out = queen_server()
        .arg("check-config")
        .env("PG_PASSWORD", "hunter2")
        .env("QUEEN_SYNC_SECRET", "s3cret")
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("listen=0.0.0.0:6632"), "{stdout}");
    assert!(stdout.contains("auth: hmac"), "{stdout}");
    assert!(
        !stdout.contains("hunter2") && !stdout.contains("s3cret"),
        "{stdout}"
    );
    let out = queen_server().arg("no-such-command").output().unwrap();
    assert!(!out.status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_applies_the_schema_once() {
    let db = TestDb::empty().await.unwrap();
    let run = || {
        queen_server()
            .arg("migrate")
            .env("PG_HOST", &db.host)
            .env("PG_PORT", db.port.to_string())
            .env("PG_USER", &db.user)
            .env("PG_DB", &db.name)
            .output()
            .unwrap()
    };
    let first = run();
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert!(String::from_utf8_lossy(&first.stdout).contains("migrations applied: "));
    let second = run();
    assert!(second.status.success());
    assert!(String::from_utf8_lossy(&second.stdout).contains("migrations applied: 0"));
    let client = db.client().await.unwrap();
    assert_eq!(
        count(
            &client,
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'log_consumers'"
        )
        .await,
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_brokers_starting_together_on_an_empty_database_all_come_up() {
    let db = TestDb::empty().await.unwrap();
    let (a, b, c) = tokio::join!(
        TestBroker::start_with(&db, &[("QUEEN_SERVER_ID", "a")]),
        TestBroker::start_with(&db, &[("QUEEN_SERVER_ID", "b")]),
        TestBroker::start_with(&db, &[("QUEEN_SERVER_ID", "c")]),
    );
    let brokers = [a.unwrap(), b.unwrap(), c.unwrap()];
    let q = unique("start");
    for (i, b) in brokers.iter().enumerate() {
        push_numbered(b, &q, "p", &format!("from-{i}"), 1).await;
    }
    let body = pop_ok(&brokers[0], &pop_path(&q, None, "batch=10")).await;
    assert_eq!(messages(&body).len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_database_at_start_is_waited_for() {
    let db = TestDb::new().await.unwrap();
    let upstream = format!("{}:{}", db.host, db.port).parse().unwrap();
    let proxy = queen_testkit::FaultProxy::start(upstream).await.unwrap();
    proxy.cut();
    let port = proxy.addr().port().to_string();
    let mut env = queen_testkit::base_env(&db);
    env.insert("PG_HOST".into(), "127.0.0.1".into());
    env.insert("PG_PORT".into(), port);
    let b = TestBroker::start_env(env).await.unwrap();
    // the HTTP side answers at once: /health and the metrics, every other
    // route 503 `starting` (issue 34: a push is not spooled, an ack not
    // refused, only because the schema check has not finished)
    sleep_ms(500).await;
    let (status, body) = b.get("/health").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body["status"], "starting");
    let (status, _) = b.get("/metrics").await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = b.get(&pop_path("q", None, "")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["status"], "starting", "{body}");
    let q = unique("late");
    let early = json!({"items": [{"queue": q, "partition": "p", "payload": {"early": true}}]});
    let (status, body) = b.post("/api/v1/push", &early).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    proxy.restore();
    b.wait_healthy(Duration::from_secs(15)).await.unwrap();
    push_numbered(&b, &q, "p", "m", 1).await;
    let body = pop_ok(&b, &pop_path(&q, None, "batch=10")).await;
    let popped = messages(&body);
    assert_eq!(popped.len(), 1, "the refused push was not spooled: {body}");
    assert_ne!(popped[0]["data"]["early"], true, "{body}");
}
