//! A broker whose PostgreSQL refuses its credentials (issue 37): a role that
//! does not exist (SQLSTATE 28000) or a wrong password (28P01). `/health`
//! says so with the server's reason, at start and when the password changes
//! under a running broker, and stops saying it once the credentials work.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use queen_testkit::{PrivatePg, TestBroker, TestDb};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::*;

/// The environment of a broker on `127.0.0.1:port/db` as `user` with `password`.
fn env(port: u16, db: &str, user: &str, password: &str) -> HashMap<String, String> {
    [
        ("PG_HOST", "127.0.0.1"),
        ("PG_PORT", &port.to_string()),
        ("PG_USER", user),
        ("PG_PASSWORD", password),
        ("PG_DB", db),
        ("DB_POOL_SIZE", "4"),
        ("DB_CONNECTION_TIMEOUT", "1000"),
        ("DB_PROBE_INTERVAL_MS", "200"),
        ("DB_PROBE_TIMEOUT_MS", "1000"),
        ("HOST", "127.0.0.1"),
        ("LOG_LEVEL", "warn"),
        ("SHUTDOWN_DRAIN_MS", "0"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// Polls `/health` until its `database_error` holds `needle`; answers the
/// status and body of that answer.
async fn health_saying(b: &TestBroker, needle: &str) -> (StatusCode, Value) {
    let started = Instant::now();
    loop {
        let (status, body) = b.get("/health").await;
        if body["database_error"]
            .as_str()
            .is_some_and(|e| e.contains(needle))
        {
            return (status, body);
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "/health never reported {needle:?}: {status} {body}"
        );
        sleep_ms(200).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_that_does_not_exist_is_reported_as_refused_credentials() {
    // the shared server trusts every connection, so only the role can be wrong
    let db = TestDb::new().await.unwrap();
    let role = unique("no_such_role");
    let b = TestBroker::start_env(env(db.port, &db.name, &role, ""))
        .await
        .unwrap();
    let (status, body) = health_saying(&b, "28000").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["status"], "starting", "{body}");
    assert_eq!(body["database"], "disconnected", "{body}");
    let error = body["database_error"].as_str().unwrap();
    assert!(
        error.starts_with("authentication failed: ")
            && error.contains(&format!("role \"{role}\" does not exist")),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_is_reported_until_it_is_right_at_start_and_while_serving() {
    let pg = PrivatePg::primary_with_password("right-pw")
        .await
        .expect("a private PostgreSQL with password authentication");
    pg.create_db("queen").await.unwrap();
    let admin = pg.admin().await.unwrap();

    // at start: the schema cannot be checked, and /health says why
    let b = TestBroker::start_env(env(pg.port, "queen", "postgres", "the-broker-pw"))
        .await
        .unwrap();
    let (status, body) = health_saying(&b, "28P01").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["status"], "starting", "{body}");
    let error = body["database_error"].as_str().unwrap();
    assert!(
        error.contains("password authentication failed for user \"postgres\"")
            && error.contains(&format!("127.0.0.1:{}", pg.port)),
        "{error}"
    );
    assert!(!error.contains("the-broker-pw"), "{error}");

    // the operator gives the role the broker's password: it comes up by itself
    admin
        .batch_execute("ALTER ROLE postgres PASSWORD 'the-broker-pw'")
        .await
        .unwrap();
    b.wait_healthy(Duration::from_secs(20)).await.unwrap();
    let (_, body) = b.get("/health").await;
    assert_eq!(body["status"], "healthy", "{body}");
    assert!(body.get("database_error").is_none(), "{body}");

    // the password changes under the running broker and its sessions end:
    // pushes wait in the spool, /health says why
    admin
        .batch_execute(
            "ALTER ROLE postgres PASSWORD 'rotated-pw';
             SELECT pg_terminate_backend(pid) FROM pg_stat_activity
              WHERE datname = 'queen' AND pid <> pg_backend_pid()",
        )
        .await
        .unwrap();
    let (status, body) = health_saying(&b, "28P01").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["status"], "unhealthy", "{body}");
    let q = unique("creds");
    let (status, body) = b
        .post(
            "/api/v1/push",
            &json!({"items": [{"queue": q, "partition": "p", "payload": {"n": 1},
                               "transactionId": "creds-1"}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body[0]["status"], "buffered", "{body}");

    // fixed again: healthy, and the spooled push is delivered
    admin
        .batch_execute("ALTER ROLE postgres PASSWORD 'the-broker-pw'")
        .await
        .unwrap();
    b.wait_healthy(Duration::from_secs(20)).await.unwrap();
    let started = Instant::now();
    loop {
        let (status, body) = b.get(&pop_path(&q, None, "batch=10")).await;
        if let Some([m]) = body["messages"].as_array().map(Vec::as_slice) {
            assert_eq!(m["transactionId"], "creds-1", "{body}");
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the spooled push never arrived: {status} {body}"
        );
        sleep_ms(200).await;
    }
}
