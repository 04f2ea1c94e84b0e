//! A wrong URL, JWT on, PostgreSQL down, bad usage.

use std::net::{IpAddr, SocketAddr};

use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use queen_testkit::{FaultProxy, TestBroker, TestDb};
use serde_json::json;

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_url_is_one_line_and_status_2() {
    let dead = format!("http://127.0.0.1:{}", queen_testkit::free_port().unwrap());
    let run = queen_at(&dead, &["push", "q", "1"], None, &[]).await;
    let err = run.fails(UNREACHABLE);
    assert!(
        err.starts_with("queen: error: cannot connect to http://127.0.0.1:"),
        "{err}"
    );
    assert!(err.to_lowercase().contains("refused"), "{err}");
    let run = queen_at(&dead, &["pop", "q"], None, &[]).await;
    run.fails(UNREACHABLE);
    let run = queen_at("not a url", &["queues"], None, &[]).await;
    assert!(run.fails(USER).contains("not a url"), "{run:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_urls_and_the_environment_variables() {
    let (_db, b) = fresh_broker(&[]).await.unwrap();
    let dead = format!("http://127.0.0.1:{}", queen_testkit::free_port().unwrap());
    let q = unique("env");
    // QUEEN_URL with a dead replica first: the live one takes the requests
    let urls = format!("{dead},{}", b.url(""));
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_queen"));
    let out = cmd
        .args(["push", &q, "1"])
        .env("QUEEN_URL", &urls)
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    for _ in 0..5 {
        queen_at(&urls, &["push", &q, "2"], None, &[]).await.ok();
    }
    assert_eq!(stored(&b, &q).await, 6);
}

pub const SECRET: &str = "cli-test-secret";

pub fn token(role: &str) -> String {
    let exp = chrono::Utc::now().timestamp() + 600;
    encode(
        &Header::new(Algorithm::HS256),
        &json!({"sub": "cli", "role": role, "exp": exp}),
        &EncodingKey::from_secret(SECRET.as_bytes()).unwrap(),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_jwt_on_a_token_is_needed_and_sent() {
    let (_db, b) = fresh_broker(&[("JWT_ENABLED", "true"), ("JWT_SECRET", SECRET)])
        .await
        .unwrap();
    let q = unique("jwt");
    let run = queen(&b, &["push", &q, "1"]).await;
    let err = run.fails(AUTH);
    assert!(err.contains("401") && err.contains("--token"), "{err}");
    let writer = token("read-write");
    queen(&b, &["--token", &writer, "push", &q, "1"]).await.ok();
    // QUEEN_TOKEN works as well
    let popped = queen_at(
        &b.url(""),
        &["pop", &q, "--json"],
        None,
        &[("QUEEN_TOKEN", &writer)],
    )
    .await
    .json();
    assert_eq!(popped[0]["producerSub"], "cli");
    let run = queen(&b, &["--token", &writer, "queues", "delete", &q, "--yes"]).await;
    assert!(run.fails(AUTH).contains("403"), "{run:?}");
    let run = queen(&b, &["--token", "garbage", "queues"]).await;
    run.fails(AUTH);
    queen(
        &b,
        &["--token", &token("admin"), "queues", "delete", &q, "--yes"],
    )
    .await
    .ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_postgresql_down_pushes_are_buffered_and_say_so() {
    let db = TestDb::new().await.unwrap();
    let upstream = SocketAddr::new(db.host.parse::<IpAddr>().unwrap(), db.port);
    let proxy = FaultProxy::start(upstream).await.unwrap();
    let port = proxy.addr().port().to_string();
    let b = TestBroker::start_with(&db, &[("PG_HOST", "127.0.0.1"), ("PG_PORT", &port)])
        .await
        .unwrap();
    let q = unique("down");
    queen(&b, &["push", &q, "\"before\""]).await.ok();

    proxy.cut();
    let run = queen(
        &b,
        &["push", &q, "--transaction-id", "during-1", "\"during\""],
    )
    .await;
    assert!(
        run.ok()
            .starts_with("buffered: the broker cannot reach its database"),
        "{run:?}"
    );
    let input = "\"l1\"\n\"l2\"\n\"l3\"\n";
    let summary = queen_at(
        &b.url(""),
        &["push", &q, "--json"],
        Some(input.as_bytes()),
        &[],
    )
    .await
    .json();
    assert_eq!(summary["buffered"], 3, "{summary}");
    let text = queen_at(&b.url(""), &["push", &q], Some(b"\"l4\"\n"), &[]).await;
    assert!(text.ok().contains("1 messages are buffered"), "{text:?}");
    // a pop reports the outage in one line instead of "empty"
    let run = queen(&b, &["pop", &q]).await;
    assert!(
        run.fails(UNREACHABLE).contains("storage unavailable"),
        "{run:?}"
    );
    let run = queen(&b, &["status"]).await;
    assert_eq!(run.code, UNREACHABLE, "{run:?}");
    assert!(run.stdout.contains("unhealthy"), "{run:?}");

    proxy.restore();
    // the spool drains once the database is back: every message once
    let mut total = 0;
    for _ in 0..100 {
        total = stored(&b, &q).await;
        if total == 6 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_eq!(total, 6);
    let popped = queen(&b, &["pop", &q, "--batch", "10", "--json"])
        .await
        .json();
    let data: Vec<_> = popped
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["data"].clone())
        .collect();
    assert_eq!(
        data,
        [
            json!("before"),
            json!("during"),
            json!("l1"),
            json!("l2"),
            json!("l3"),
            json!("l4")
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_usage_is_status_1() {
    let (_db, b) = fresh_broker(&[]).await.unwrap();
    for args in [
        &["push"][..],
        &["pop"],
        &["frobnicate"],
        &["pop", "q", "--batch", "many"],
        &["push", "q", "--progress", "--no-progress", "1"],
        &["push", "q", "1", "--file", "x"],
        &["push", "q", "1", "--batch", "0"],
        &["ack", "p"],
        &["completion", "tcsh"],
    ] {
        let run = queen(&b, args).await;
        assert_eq!(run.code, USER, "{args:?}: {run:?}");
        assert!(!run.stderr.is_empty());
    }
    assert_eq!(queen(&b, &["--help"]).await.code, 0);
    assert_eq!(queen(&b, &["--version"]).await.code, 0);
}
