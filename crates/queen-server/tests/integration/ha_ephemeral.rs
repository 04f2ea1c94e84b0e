//! Ephemeral queues across replicas (issue 21): every replica serves every
//! verb of one queue, because the rings live in PostgreSQL (unlogged tables),
//! not in a broker.

use std::time::Duration;

use queen_testkit::{TestBroker, TestCluster, TestDb};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::*;

async fn three() -> (TestDb, TestCluster) {
    let db = TestDb::new().await.expect("create test database");
    let c = TestCluster::start(3, &db, &[])
        .await
        .expect("start cluster");
    c.wait_mesh_up(Duration::from_secs(10))
        .await
        .expect("mesh up");
    (db, c)
}

async fn push(b: &TestBroker, q: &str, partition: &str, ns: std::ops::Range<i64>) {
    let messages: Vec<Value> = ns.map(|n| json!({ "payload": { "n": n } })).collect();
    let count = messages.len();
    let (status, body) = b
        .post(
            "/api/v1/ephemeral/push",
            &json!({ "queue": q, "partition": partition, "messages": messages }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["pushed"], count, "{body}");
}

/// Pops; returns the messages (`id`, `partition`, `attempts`, `payload`).
async fn pop(b: &TestBroker, q: &str, query: &str) -> Vec<Value> {
    let (status, body) = b
        .get(&format!("/api/v1/ephemeral/pop?queue={q}&{query}"))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["messages"].as_array().cloned().unwrap_or_default()
}

fn ns(msgs: &[Value]) -> Vec<i64> {
    msgs.iter()
        .map(|m| m["payload"]["n"].as_i64().unwrap())
        .collect()
}

async fn ack(b: &TestBroker, q: &str, group: Option<&str>, msgs: &[Value]) -> Vec<String> {
    let acks: Vec<Value> = msgs.iter().map(|m| json!({ "id": m["id"] })).collect();
    let mut body = json!({ "queue": q, "acks": acks });
    if let Some(g) = group {
        body["group"] = json!(g);
    }
    let (status, res) = b.post("/api/v1/ephemeral/ack", &body).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    res["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["outcome"].as_str().unwrap().to_owned())
        .collect()
}

async fn depth(b: &TestBroker, q: &str) -> Value {
    let (status, body) = b.get(&format!("/api/v1/ephemeral/queues/{q}/depth")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ephemeral_configure_on_a_push_on_b_pop_on_c_ack_on_a() {
    let (_db, c) = three().await;
    let (a, b, cc) = (c.node(0), c.node(1), c.node(2));
    let q = unique("eph");
    let (status, body) = a
        .post(
            "/api/v1/ephemeral/configure",
            &json!({ "queue": q, "options": { "leaseSeconds": 30, "retryLimit": 3, "maxLength": 50 } }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // the declaration is seen by the other replicas
    for node in [b, cc] {
        let (_, all) = node.get("/api/v1/ephemeral/queues").await;
        let me = all["queues"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["queue"] == q.as_str())
            .cloned()
            .unwrap_or_else(|| panic!("{q} not listed: {all}"));
        assert_eq!(me["tier"], "declared", "{me}");
        assert_eq!(me["options"]["maxLength"], 50, "{me}");
    }
    push(b, &q, "p1", 0..5).await;
    let got = pop(cc, &q, "partition=p1&batch=3").await;
    assert_eq!(ns(&got), vec![0, 1, 2], "FIFO through another replica");
    assert!(got.iter().all(|m| m["attempts"] == 1), "{got:?}");
    // the lease taken on C holds on every replica: A and B get the rest only
    let rest = pop(a, &q, "partition=p1&batch=10").await;
    assert_eq!(ns(&rest), vec![3, 4]);
    assert_eq!(ack(a, &q, None, &got).await, ["acked", "acked", "acked"]);
    assert_eq!(ack(b, &q, None, &rest).await, ["acked", "acked"]);
    // acked once, through any replica
    assert_eq!(ack(cc, &q, None, &got[..1]).await, ["unknown"]);
    assert!(pop(b, &q, "partition=p1&batch=10").await.is_empty());
    // the bound declared on A refuses on C
    let (status, body) = cc
        .post(
            "/api/v1/ephemeral/push",
            &json!({ "queue": q, "partition": "p2",
                     "messages": (0..51).map(|n| json!({"payload": {"n": n}})).collect::<Vec<_>>() }),
        )
        .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(body["code"], "queue_full", "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ephemeral_lease_taken_on_a_expires_and_is_redelivered_through_b() {
    let (_db, c) = three().await;
    let (a, b, cc) = (c.node(0), c.node(1), c.node(2));
    let q = unique("eph");
    let (status, body) = c
        .node(2)
        .post(
            "/api/v1/ephemeral/configure",
            &json!({ "queue": q, "options": { "leaseSeconds": 1, "retryLimit": 5 } }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    push(cc, &q, "p1", 0..2).await;
    let first = pop(a, &q, "group=g&batch=2").await;
    assert_eq!(ns(&first), vec![0, 1]);
    // leased: no replica hands them out again while the lease runs
    assert!(pop(b, &q, "group=g&batch=2").await.is_empty());
    assert!(pop(cc, &q, "group=g&batch=2").await.is_empty());
    sleep_ms(1500).await;
    let again = pop(b, &q, "group=g&batch=2").await;
    assert_eq!(ns(&again), vec![0, 1], "redelivered in order after expiry");
    assert!(again.iter().all(|m| m["attempts"] == 2), "{again:?}");
    assert_eq!(
        again.iter().map(|m| m["id"].clone()).collect::<Vec<_>>(),
        first.iter().map(|m| m["id"].clone()).collect::<Vec<_>>(),
        "the same messages"
    );
    // acked through a third replica; the first consumer's late ack finds nothing
    assert_eq!(ack(cc, &q, Some("g"), &again).await, ["acked", "acked"]);
    assert_eq!(ack(a, &q, Some("g"), &first).await, ["unknown", "unknown"]);
    assert!(pop(a, &q, "group=g&batch=2").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ephemeral_reset_through_one_replica_empties_what_the_others_serve() {
    let (_db, c) = three().await;
    let (a, b, cc) = (c.node(0), c.node(1), c.node(2));
    let q = unique("eph");
    push(a, &q, "p1", 0..5).await;
    push(a, &q, "p2", 0..3).await;
    // a lease taken on C before the reset
    let leased = pop(cc, &q, "partition=p1&group=g&batch=2").await;
    assert_eq!(ns(&leased), vec![0, 1]);
    let (status, body) = b
        .post("/api/v1/ephemeral/reset", &json!({ "queue": q }))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["dropped"], 8, "{body}");
    for node in [a, b, cc] {
        assert!(pop(node, &q, "batch=10").await.is_empty());
        assert!(pop(node, &q, "group=g&batch=10").await.is_empty());
        assert_eq!(depth(node, &q).await["pending"], 0);
    }
    // the voided lease acks nothing
    assert_eq!(ack(a, &q, Some("g"), &leased).await, ["unknown", "unknown"]);
    // the queue goes on: a push after the reset is served everywhere
    push(cc, &q, "p1", 10..12).await;
    assert_eq!(
        ns(&pop(a, &q, "partition=p1&group=g&batch=10").await),
        vec![10, 11]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ephemeral_depth_agrees_across_replicas() {
    let (_db, c) = three().await;
    let (a, b, cc) = (c.node(0), c.node(1), c.node(2));
    let q = unique("eph");
    push(a, &q, "p1", 0..6).await;
    push(b, &q, "p2", 0..4).await;
    // group g takes 4 of p1 through C and acks 2 of them through B
    let got = pop(cc, &q, "partition=p1&group=g&batch=4").await;
    assert_eq!(got.len(), 4);
    assert_eq!(ack(b, &q, Some("g"), &got[..2]).await, ["acked", "acked"]);
    let mut answers = Vec::new();
    for node in [a, b, cc] {
        let d = depth(node, &q).await;
        let mut parts: Vec<(String, i64)> = d["partitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["partition"].as_str().unwrap().to_owned(),
                    p["pending"].as_i64().unwrap(),
                )
            })
            .collect();
        parts.sort();
        answers.push((d["pending"].clone(), parts));
    }
    assert_eq!(answers[0], answers[1], "A and B agree");
    assert_eq!(answers[1], answers[2], "B and C agree");
    // g can still be handed 2 of p1 and 4 of p2 (leased ones are not pending)
    let d = depth(a, &q).await;
    let g = d["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["group"] == "g")
        .cloned()
        .unwrap_or_else(|| panic!("group g missing: {d}"));
    assert_eq!(g["pending"], 6, "{d}");
}
