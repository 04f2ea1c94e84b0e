//! Issue 33: the broker-wide bound on ephemeral bytes (`EPHEMERAL_MAX_BYTES`,
//! `503 ephemeral_unavailable`), the collector of idle implicit queues
//! (`EPHEMERAL_IDLE_SECONDS`), and the listing of many queues in a few
//! statements. The numbers are made small so the tests are fast.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::*;

/// A payload whose JSON text is exactly `bytes` bytes (a string).
fn payload(bytes: usize) -> Value {
    json!("x".repeat(bytes - 2))
}

async fn push(b: &queen_testkit::TestBroker, queue: &str, bytes: usize) -> (StatusCode, Value) {
    b.post(
        "/api/v1/ephemeral/push",
        &json!({"queue": queue, "messages": [{"payload": payload(bytes)}]}),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_broker_wide_bound_refuses_with_503_and_frees_what_pops_free() {
    let (db, b) = setup_with(&[
        ("EPHEMERAL_MAX_BYTES", "3000"),
        ("EPHEMERAL_SWEEP_INTERVAL_MS", "100"),
    ])
    .await;
    let client = db.client().await.unwrap();
    // three queues, each far below its own 16 MiB bound, fill the 3 000 bytes
    for q in ["b1", "b2", "b3"] {
        let (s, body) = push(&b, q, 1000).await;
        assert_eq!(s, StatusCode::CREATED, "{body}");
    }
    // one byte more, on any queue (a new one or one of the three): refused whole
    for q in ["b4", "b1"] {
        let resp = b
            .http
            .post(b.url("/api/v1/ephemeral/push"))
            .json(&json!({"queue": q, "messages": [{"payload": 1}, {"payload": 2}]}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(resp.headers()["retry-after"], "1");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["code"], "ephemeral_unavailable", "{body}");
        assert!(body["error"].as_str().unwrap().contains("3000"), "{body}");
    }
    let held = count(
        &client,
        "SELECT coalesce(sum(bytes), 0) FROM queen.ephemeral_messages",
    )
    .await;
    assert_eq!(held, 3000, "nothing of the refused pushes was stored");
    // a pop with autoAck frees b1's message; after a sweep the bytes count again
    let (s, body) = b.get("/api/v1/ephemeral/pop?queue=b1&autoAck=true").await;
    assert_eq!(
        (s, body["messages"].as_array().map(Vec::len)),
        (StatusCode::OK, Some(1))
    );
    let mut pushed = false;
    for _ in 0..50 {
        sleep_ms(100).await;
        if push(&b, "b4", 1000).await.0 == StatusCode::CREATED {
            pushed = true;
            break;
        }
    }
    assert!(pushed, "the freed bytes count again after a sweep");
    let (s, _) = push(&b, "b5", 10).await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "full again");
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_implicit_queues_are_collected_and_the_others_kept() {
    let (db, b) = setup_with(&[
        ("EPHEMERAL_IDLE_SECONDS", "2"),
        ("EPHEMERAL_SWEEP_INTERVAL_MS", "200"),
    ])
    .await;
    let client = db.client().await.unwrap();
    // pops of unknown names create 30 implicit queues
    for i in 0..30 {
        let (s, _) = b
            .get(&format!("/api/v1/ephemeral/pop?queue=idle-{i}&group=g"))
            .await;
        assert_eq!(s, StatusCode::OK);
    }
    // kept: a declared queue that was popped, one with a message, one popped every 300 ms
    let (s, _) = b
        .post("/api/v1/ephemeral/configure", &json!({"queue": "declared"}))
        .await;
    assert_eq!(s, StatusCode::CREATED);
    b.get("/api/v1/ephemeral/pop?queue=declared").await;
    let (s, _) = push(&b, "holding", 10).await;
    assert_eq!(s, StatusCode::CREATED);
    let queues = "SELECT count(*) FROM queen.ephemeral_queues";
    assert_eq!(count(&client, queues).await, 32);
    let busy = async {
        for _ in 0..14 {
            b.get("/api/v1/ephemeral/pop?queue=busy").await;
            sleep_ms(300).await;
        }
    };
    busy.await; // 4.2 s: past the idle time of the first 30 plus sweeps
    let left: std::collections::BTreeSet<String> =
        texts(&client, "SELECT queue FROM queen.ephemeral_queues").await;
    let want: std::collections::BTreeSet<String> =
        ["busy", "declared", "holding"].map(String::from).into();
    assert_eq!(left, want);
    for t in [
        "ephemeral_groups",
        "ephemeral_partitions",
        "ephemeral_cursors",
    ] {
        let n = count(
            &client,
            &format!("SELECT count(*) FROM queen.{t} WHERE queue LIKE 'idle-%'"),
        )
        .await;
        assert_eq!(n, 0, "{t}");
    }
    // a collected queue is gone (depth 404), and a pop creates it again
    let (s, body) = b.get("/api/v1/ephemeral/queues/idle-3/depth").await;
    assert_eq!(
        (s, body["code"].clone()),
        (StatusCode::NOT_FOUND, json!("ephemeral_queue_not_found"))
    );
    let (s, _) = b.get("/api/v1/ephemeral/pop?queue=idle-3").await;
    assert_eq!(s, StatusCode::OK);
    let (s, _) = b.get("/api/v1/ephemeral/queues/idle-3/depth").await;
    assert_eq!(s, StatusCode::OK);
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_two_thousand_queues_takes_one_database_call() {
    let (db, b) = setup().await;
    let client = db.client().await.unwrap();
    client
        .batch_execute(
            "INSERT INTO queen.ephemeral_queues (queue, epoch)
               SELECT 'many-' || lpad(i::text, 4, '0'), i FROM generate_series(1, 2000) i;
             INSERT INTO queen.ephemeral_partitions (queue, partition)
               SELECT 'many-' || lpad(i::text, 4, '0'), 'Default' FROM generate_series(1, 2000) i;
             INSERT INTO queen.ephemeral_messages (queue, partition, seq, payload, bytes, enqueued_at)
               SELECT 'many-0007', 'Default', s, '\"abc\"', 5, now() FROM generate_series(1, 3) s;
             INSERT INTO queen.ephemeral_groups (queue, grp) VALUES ('many-0007', 'g1'), ('many-0007', 'g2');
             INSERT INTO queen.ephemeral_declarations (queue, options)
               VALUES ('declared-only', '{\"maxLength\": 5}');",
        )
        .await
        .unwrap();
    let calls = || async {
        let text = prometheus_text(&b).await;
        text.lines()
            .find(|l| l.starts_with("queen_db_op_duration_seconds_count{op=\"ephemeral_admin\"}"))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let before = calls().await;
    let started = std::time::Instant::now();
    let (s, body) = b.get("/api/v1/ephemeral/queues").await;
    let took = started.elapsed();
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        calls().await - before,
        1.0,
        "one database call (three statements)"
    );
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert_eq!(body["count"], 2001);
    let all = body["queues"].as_array().unwrap();
    assert_eq!(all[0]["queue"], "declared-only");
    assert_eq!(all[0]["tier"], "declared");
    assert_eq!(all[0]["options"]["maxLength"], 5);
    let q7 = all.iter().find(|q| q["queue"] == "many-0007").unwrap();
    assert_eq!(
        (
            q7["depth"].clone(),
            q7["bytes"].clone(),
            q7["groups"].clone(),
            q7["partitions"].clone()
        ),
        (json!(3), json!(15), json!(2), json!(1)),
        "{q7}"
    );
    assert_eq!(body["cellBytes"], 15);
    b.stop().await;
}
