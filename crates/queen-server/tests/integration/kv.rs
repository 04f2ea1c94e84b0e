//! Key/value, locks and timers (issue 21): validation, semantics that need
//! concurrency, the transaction riders, and the cross-replica cases.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use base64::Engine;
use queen_testkit::{TestCluster, TestDb};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::*;

fn b64(v: &Value) -> String {
    base64::engine::general_purpose::STANDARD.encode(v.to_string())
}

async fn kv1(b: &queen_testkit::TestBroker, op: Value) -> Value {
    let (s, body) = b.post("/api/v1/kv", &json!({ "operations": [op] })).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    body["results"][0].clone()
}

#[tokio::test]
async fn bad_kv_calls_are_refused_whole_and_write_nothing() {
    let (_db, b) = setup().await;
    let ns = "t-bad";
    let good = json!({"op": "put", "ns": ns, "key": "k", "value": 1, "forever": true});
    for (bad, status, reason) in [
        (
            json!({"op": "nope", "ns": ns, "key": "x"}),
            400,
            "kv_unknown_op",
        ),
        (
            json!({"op": "put", "ns": ns, "key": "x", "value": 1}),
            400,
            "kv_expiry_not_specified",
        ),
        (
            json!({"op": "put", "ns": ns, "key": "x", "value": 1, "forever": true, "expect": "3"}),
            400,
            "kv_bad_expect",
        ),
        (
            json!({"op": "put", "ns": ns, "key": "x".repeat(600), "value": 1, "forever": true}),
            413,
            "kv_key_too_large",
        ),
        (
            json!({"op": "put", "ns": ns, "key": "x", "value": "v".repeat(70_000), "forever": true}),
            413,
            "kv_value_too_large",
        ),
        (
            json!({"op": "put", "ns": "Bad NS", "key": "x", "value": 1, "forever": true}),
            400,
            "kv_bad_namespace",
        ),
        (
            json!({"op": "put", "ns": ns, "key": "k", "value": 2, "forever": true}),
            400,
            "kv_duplicate_key_in_call",
        ),
    ] {
        let (s, body) = b
            .post(
                "/api/v1/kv",
                &json!({ "operations": [good.clone(), bad.clone()] }),
            )
            .await;
        assert_eq!(s.as_u16(), status, "{bad} -> {body}");
        assert_eq!(body["reason"], reason, "{body}");
        assert!(body["error"].is_string(), "{body}");
    }
    let (s, body) = b.post("/api/v1/kv", &json!({"operations": "x"})).await;
    assert_eq!(
        (s, body["reason"].as_str()),
        (StatusCode::BAD_REQUEST, Some("kv_bad_body"))
    );
    let many: Vec<Value> = (0..257)
        .map(|i| json!({"op": "get", "ns": ns, "key": format!("{i}")}))
        .collect();
    let (s, body) = b.post("/api/v1/kv", &json!(many)).await;
    assert_eq!(
        (s, body["reason"].as_str()),
        (StatusCode::BAD_REQUEST, Some("kv_too_many_ops"))
    );
    let got = kv1(&b, json!({"op": "get", "ns": ns, "key": "k"})).await;
    assert_eq!(got["found"], false, "a refused call wrote nothing: {got}");
}

#[tokio::test]
async fn required_loss_applies_nothing_of_the_call() {
    let (_db, b) = setup().await;
    let ns = "t-req";
    let (s, body) = b
        .post(
            "/api/v1/kv",
            &json!([
                {"op": "put", "ns": ns, "key": "a", "value": 1, "forever": true},
                {"op": "check", "ns": ns, "key": "gate", "expect": 9, "required": true},
            ]),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(body["ok"], false, "{body}");
    assert_eq!(body["reason"], "kv_precondition");
    assert_eq!(body["failedIndex"], 1);
    assert_eq!(body["kvReason"], "absent");
    let got = kv1(&b, json!({"op": "get", "ns": ns, "key": "a"})).await;
    assert_eq!(got["found"], false, "{got}");
}

#[tokio::test]
async fn versions_rise_across_delete_and_expiry() {
    let (_db, b) = setup().await;
    let ns = "t-ver";
    let mut last = 0;
    for op in [
        json!({"op": "put", "ns": ns, "key": "k", "value": 1, "ttlSeconds": 1}),
        json!({"op": "delete", "ns": ns, "key": "k"}),
        json!({"op": "putIfAbsent", "ns": ns, "key": "k", "value": 2, "ttlSeconds": 1}),
    ] {
        let r = kv1(&b, op).await;
        assert_eq!(r["applied"], true, "{r}");
        let v = r["version"].as_i64().unwrap();
        assert!(v >= last, "{v} after {last}");
        last = v;
    }
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let r = kv1(
        &b,
        json!({"op": "incr", "ns": ns, "key": "k", "delta": 3, "forever": true}),
    )
    .await;
    assert_eq!(
        (r["applied"].as_bool(), r["value"].as_i64()),
        (Some(true), Some(3)),
        "an expired row counts as 0: {r}"
    );
    assert!(r["version"].as_i64().unwrap() > last);
}

#[tokio::test]
async fn lock_tokens_only_rise_and_guards_follow_them() {
    let (_db, b) = setup().await;
    let acquire =
        |owner: &str| json!({"op": "acquire", "name": "job", "ttlSeconds": 30, "owner": owner});
    let (_, r) = b.post("/api/v1/locks", &json!([acquire("a")])).await;
    let a = r["results"][0].clone();
    assert_eq!(a["acquired"], true, "{r}");
    let (_, r) = b.post("/api/v1/locks", &json!([acquire("b")])).await;
    assert_eq!(r["results"][0]["acquired"], false);
    assert_eq!(r["results"][0]["reason"], "held");
    assert_eq!(r["results"][0]["holders"][0]["owner"], "a");
    let (_, r) = b
        .post(
            "/api/v1/locks",
            &json!([{"op": "release", "name": "job", "token": a["token"]}]),
        )
        .await;
    assert_eq!(r["results"][0]["released"], true, "{r}");
    let (_, r) = b.post("/api/v1/locks", &json!([acquire("b")])).await;
    let bb = r["results"][0].clone();
    assert!(bb["token"].as_i64() > a["token"].as_i64(), "{a} then {bb}");
    // a's old guard no longer commits anything
    let q = unique("guarded");
    let push = json!({"type": "push", "items": [{"queue": q, "payload": {"n": 1}}]});
    let (s, r) = b
        .post(
            "/api/v1/transaction",
            &json!({"operations": [push.clone()], "kv": [a["guard"]]}),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        (r["success"].as_bool(), r["reason"].as_str()),
        (Some(false), Some("kv_precondition")),
        "{r}"
    );
    let (s, _) = b.get(&pop_path(&q, None, "wait=false")).await;
    assert_eq!(
        s,
        StatusCode::NO_CONTENT,
        "the stale holder's push committed"
    );
    let (_, r) = b
        .post(
            "/api/v1/transaction",
            &json!({"operations": [push], "kv": [bb["guard"]]}),
        )
        .await;
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["results"][1]["type"], "kv");
    assert_eq!(r["results"][1]["index"], 1);
}

#[tokio::test]
async fn bad_timer_calls_are_refused_and_schedule_nothing() {
    let (_db, b) = setup().await;
    let q = unique("tbad");
    let ok = json!({"op": "schedule", "queue": q, "timerKey": "k", "payload": b64(&json!(1)), "delayMs": 10, "txn": "t1"});
    for (bad, status) in [
        (
            json!({"op": "schedule", "queue": q, "timerKey": "x", "payload": "@@", "delayMs": 1}),
            400,
        ),
        (
            json!({"op": "schedule", "queue": q, "timerKey": "x", "payload": b64(&json!(1)), "delayMs": 99_999_999_999i64}),
            403,
        ),
        (
            json!({"op": "schedule", "queue": q, "timerKey": "x", "payload": b64(&json!(1)), "delayMs": 1, "messageId": "m"}),
            400,
        ),
        (json!({"op": "frob", "queue": q, "timerKey": "x"}), 400),
    ] {
        let (s, body) = b
            .post("/api/v1/timers", &json!([ok.clone(), bad.clone()]))
            .await;
        assert_eq!(s.as_u16(), status, "{bad} -> {body}");
        assert!(
            body["error"].is_string() && body["reason"].is_string(),
            "{body}"
        );
    }
    let (s, body) = b.get(&format!("/api/v1/timers/{q}/k")).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(body["found"], false, "{body}");
}

#[tokio::test]
async fn a_failing_bundle_schedules_no_timer_and_writes_no_key() {
    let (_db, b) = setup().await;
    let q = unique("tx-roll");
    let timer = json!({"op": "schedule", "queue": q, "timerKey": "k", "payload": b64(&json!({"a": 1})), "delayMs": 0});
    // an ack of a message that does not exist fails the whole bundle
    let ack = json!({"type": "ack", "transactionId": "nope", "partitionId": uuid::Uuid::new_v4().to_string(), "status": "completed"});
    let (s, r) = b
        .post(
            "/api/v1/transaction",
            &json!({
                "operations": [ack],
                "kv": [{"op": "put", "ns": "t-roll", "key": "k", "value": 1, "forever": true}],
                "timers": [timer],
            }),
        )
        .await;
    assert!(s == StatusCode::OK || s.is_client_error(), "{s} {r}");
    assert_ne!(r["success"], true, "{r}");
    let got = kv1(&b, json!({"op": "get", "ns": "t-roll", "key": "k"})).await;
    assert_eq!(got["found"], false, "{got}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (s, _) = b.get(&pop_path(&q, None, "wait=false")).await;
    assert_eq!(s, StatusCode::NO_CONTENT, "a rolled-back timer fired");
}

async fn three() -> (TestDb, TestCluster) {
    let db = TestDb::new().await.expect("create test database");
    let c = TestCluster::start(3, &db, &[])
        .await
        .expect("start cluster");
    (db, c)
}

#[tokio::test]
async fn a_lock_taken_through_one_replica_is_refused_through_another() {
    let (_db, c) = three().await;
    let acquire =
        |owner: &str| json!([{"op": "acquire", "name": "ha", "ttlSeconds": 30, "owner": owner}]);
    let (_, r) = c.node(0).post("/api/v1/locks", &acquire("a")).await;
    let first = r["results"][0].clone();
    assert_eq!(first["acquired"], true, "{r}");
    for i in 1..3 {
        let (_, r) = c.node(i).post("/api/v1/locks", &acquire("b")).await;
        assert_eq!(r["results"][0]["acquired"], false, "replica {i}: {r}");
    }
    // 20 concurrent acquires of a semaphore of 3 across replicas admit exactly 3
    let mut tasks = Vec::new();
    for i in 0..20 {
        let node = c.node(i % 3);
        let (url, http) = (node.url("/api/v1/locks"), node.http.clone());
        tasks.push(tokio::spawn(async move {
            let body = json!([{"op": "acquire", "name": "sem", "ttlSeconds": 30, "owner": format!("o{i}"), "limit": 3}]);
            let r: Value = http.post(url).json(&body).send().await.unwrap().json().await.unwrap();
            r["results"][0].clone()
        }));
    }
    let mut slots = HashSet::new();
    for t in tasks {
        let r = t.await.unwrap();
        if r["acquired"] == true {
            assert!(
                slots.insert(r["slot"].as_i64().unwrap()),
                "slot given twice: {r}"
            );
        }
    }
    assert_eq!(slots.len(), 3, "{slots:?}");
}

#[tokio::test]
async fn timers_fire_exactly_once_and_not_early_with_three_replicas() {
    let (_db, c) = three().await;
    let q = unique("ha-timers");
    let n = 30;
    let mut due = std::collections::HashMap::new();
    for i in 0..n {
        let delay = 200 + (i as i64 % 5) * 150;
        let op = json!({"op": "schedule", "queue": q, "timerKey": format!("t{i}"), "payload": b64(&json!({"i": i})), "delayMs": delay, "txn": format!("txn-{i}")});
        let (s, r) = c.node(i % 3).post("/api/v1/timers", &json!([op])).await;
        assert_eq!(s, StatusCode::OK, "{r}");
        let at =
            chrono::DateTime::parse_from_rfc3339(r["results"][0]["deliverAt"].as_str().unwrap())
                .unwrap();
        due.insert(format!("txn-{i}"), at);
    }
    let mut seen = HashSet::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while seen.len() < n && Instant::now() < deadline {
        let (s, body) = c
            .node(seen.len() % 3)
            .get(&pop_path(&q, None, "wait=true&timeout=2000&batch=50"))
            .await;
        if s != StatusCode::OK {
            continue;
        }
        for m in body["messages"].as_array().unwrap() {
            let txn = m["transactionId"].as_str().unwrap().to_owned();
            let created =
                chrono::DateTime::parse_from_rfc3339(m["createdAt"].as_str().unwrap()).unwrap();
            assert!(
                created >= due[&txn],
                "{txn} appended at {created}, due {}",
                due[&txn]
            );
            assert!(seen.insert(txn.clone()), "{txn} delivered twice");
            let ack = json!({"transactionId": txn, "partitionId": m["partitionId"], "status": "completed", "leaseId": m["leaseId"]});
            c.node(0).post("/api/v1/ack", &ack).await;
        }
    }
    assert_eq!(seen.len(), n, "every timer fired");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (s, body) = c
        .node(1)
        .get(&pop_path(&q, None, "wait=false&batch=50"))
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT, "a timer fired twice: {body}");
}
