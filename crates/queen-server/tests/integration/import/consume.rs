//! After an import, consumers carry on where the reference left them.

use queen_testkit::{TestBroker, TestDb};
use reqwest::StatusCode;
use serde_json::{json, Value};

use super::support::*;
use crate::common::*;

/// Consumes `queue` for `group` to the end (acking each batch) and returns
/// (partition, transactionId, data) in delivery order.
async fn consume(b: &TestBroker, queue: &str, group: &str) -> Vec<(String, String, Value)> {
    let path = pop_path(
        queue,
        None,
        &format!("consumerGroup={group}&batch=2&wait=false"),
    );
    let mut seen = Vec::new();
    loop {
        let (status, body) = b.get(&path).await;
        if status == StatusCode::NO_CONTENT {
            break;
        }
        assert_eq!(status, StatusCode::OK, "{body}");
        for m in messages(&body) {
            seen.push((
                m["partition"].as_str().unwrap().to_owned(),
                m["transactionId"].as_str().unwrap().to_owned(),
                m["data"].clone(),
            ));
        }
        ack_all_completed(b, &body, Some(group)).await;
    }
    seen
}

/// The transactionIds of `partition` in `seen`, in delivery order.
fn of(seen: &[(String, String, Value)], partition: &str) -> Vec<String> {
    seen.iter()
        .filter(|s| s.0 == partition)
        .map(|s| s.1.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumers_carry_on_from_the_reference_exactly_once_in_order() {
    let source = reference().await;
    let target = TestDb::new().await.unwrap();
    let report = import(&target, &url(&source), "queen", Some(KEY), false)
        .await
        .unwrap();
    let t = &report.totals;
    assert_eq!(
        (t.partitions, t.source_messages, t.imported, t.mismatches),
        (4, 14, 14, 0),
        "{}",
        report.render()
    );
    assert_eq!(t.leased_redelivered, 2, "cg1's live lease on p1");
    assert_eq!(
        t.dead_letters, 2,
        "three rows, two of them one (group, message)"
    );
    let skipped = report.render();
    assert!(
        skipped.contains("cg-ns") && skipped.contains("streams"),
        "{skipped}"
    );
    // ttl and retryDelay: stored by the reference, applied by nothing there
    assert!(
        skipped.contains(r#"option ttl=7200 of queue "jobs""#)
            && skipped.contains(r#"option retryDelay=2500 of queue "jobs""#)
            && skipped.contains(r#"option maxSize=10000 of queue "jobs""#)
            && skipped.contains(r#"option ttl=3600 of queue "orders""#),
        "{skipped}"
    );

    let b = TestBroker::start_with(&target, &[("QUEEN_ENCRYPTION_KEY", KEY)])
        .await
        .unwrap();
    // cg1: its cursor was on tx-2 with tx-3, tx-4 leased: those come again, then the rest
    let cg1 = consume(&b, "orders", "cg1").await;
    assert_eq!(of(&cg1, "p1"), ["tx-3", "tx-4", "tx-5", "tx-6"]);
    assert_eq!(of(&cg1, "p2"), Vec::<String>::new());
    assert_eq!(cg1.len(), 4);
    let data: Vec<&Value> = cg1.iter().map(|s| &s.2).collect();
    assert_eq!(data[0], &json!({"n": 3}));
    assert_eq!(data[1]["big"].to_string(), "12345678901234567890");
    assert_eq!(data[3], &json!("six"));
    // queue mode: p1 after tx-4 (its expired lease is none); p2 never read
    let qm = consume(&b, "orders", "__QUEUE_MODE__").await;
    assert_eq!(of(&qm, "p1"), ["tx-5", "tx-6"]);
    assert_eq!(of(&qm, "p2"), ["o2-1", "o2-2", "o2-3", "o2-4"]);
    // mode new from 10:00:03: p1 after its cursor, p2 from its start (o2-4 is stamped at it)
    let new = consume(&b, "orders", "cg-new").await;
    assert_eq!(of(&new, "p1"), ["tx-6"]);
    assert_eq!(of(&new, "p2"), ["o2-4"]);
    // encrypted the reference's way, opened here; j-3 was stored in clear
    let jobs = consume(&b, "jobs", "__QUEUE_MODE__").await;
    assert_eq!(
        jobs.iter()
            .map(|s| (s.1.as_str(), s.2.clone()))
            .collect::<Vec<_>>(),
        [
            ("j-2", json!({"job": 2, "secret": "s2"})),
            ("j-3", json!({"job": 3})),
            ("j-4", json!([4, "four"])),
        ]
    );
    let workers = consume(&b, "jobs", "workers").await;
    assert_eq!(of(&workers, "Default"), ["j-3", "j-4"]);
    // nothing comes twice
    for (q, g) in [
        ("orders", "cg1"),
        ("orders", "__QUEUE_MODE__"),
        ("orders", "cg-new"),
        ("jobs", "__QUEUE_MODE__"),
        ("jobs", "workers"),
    ] {
        assert!(
            consume(&b, q, g).await.is_empty(),
            "{q}/{g} delivered again"
        );
    }
    // a group new to this broker reads from the oldest message
    let fresh = consume(&b, "orders", "fresh").await;
    assert_eq!(
        of(&fresh, "p1"),
        ["tx-1", "tx-2", "tx-3", "tx-4", "tx-5", "tx-6"]
    );

    // dead letters with their errors, attempts and payloads (decrypted)
    let (_, dlq) = b.get("/api/v1/dlq?queue=jobs").await;
    let mut dead: Vec<(String, String, String, i64, Value)> = dlq["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["consumerGroup"].as_str().unwrap().to_owned(),
                d["transactionId"].as_str().unwrap().to_owned(),
                d["errorMessage"].as_str().unwrap().to_owned(),
                d["retryCount"].as_i64().unwrap(),
                d["data"].clone(),
            )
        })
        .collect();
    dead.sort_by(|a, b| a.1.cmp(&b.1));
    assert_eq!(
        dead,
        [
            (
                "__QUEUE_MODE__".into(),
                "j-1".into(),
                "boom".into(),
                1,
                json!({"job": 1})
            ),
            (
                "workers".into(),
                "j-2".into(),
                "Retries exhausted".into(),
                1,
                json!({"job": 2, "secret": "s2"})
            ),
        ]
    );
    // traces, with their names, under the message
    let (_, body) = b
        .get("/api/v1/pop/queue/orders?consumerGroup=fresh2&batch=1&wait=false")
        .await;
    let pid = messages(&body)[0]["partitionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, traces) = b.get(&format!("/api/v1/traces/{pid}/tx-1")).await;
    assert_eq!(status, StatusCode::OK, "{traces}");
    let list = traces["traces"].as_array().unwrap();
    assert_eq!(list.len(), 2, "{traces}");
    assert_eq!(
        list.iter()
            .map(|t| t["data"].clone())
            .collect::<Vec<_>>()
            .len(),
        2
    );
    let text = traces.to_string();
    assert!(
        text.contains("order-flow") && text.contains("tenant-a") && text.contains("processing"),
        "{text}"
    );
    // the queue's options came across (ttl, retryDelay and maxSize as the reference applies them: not at all)
    let c = target.client().await.unwrap();
    let row = c
        .query_one(
            "SELECT lease_time, retry_limit, retry_delay, ttl, priority, max_size, dead_letter_queue,
                    retention_seconds, encryption_enabled, namespace FROM queen.queues WHERE name = 'jobs'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(
        (
            row.get::<_, i32>(0),
            row.get::<_, i32>(1),
            row.get::<_, i32>(2),
            row.get::<_, i32>(3),
            row.get::<_, i32>(4),
            row.get::<_, i32>(5),
            row.get::<_, bool>(6),
            row.get::<_, i32>(7),
            row.get::<_, bool>(8),
            row.get::<_, String>(9),
        ),
        (60, 1, 0, 0, 5, 0, true, 86400, true, String::new())
    );
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_envelope_no_key_here_opens_is_refused_not_delivered() {
    let source = reference().await;
    let other = "ff0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
    for (env, why) in [
        (vec![("QUEEN_ENCRYPTION_KEY", other)], "does not open it"),
        (vec![], "QUEEN_ENCRYPTION_KEY is not set"),
    ] {
        let target = TestDb::new().await.unwrap();
        import(&target, &url(&source), "queen", Some(KEY), false)
            .await
            .unwrap();
        let b = TestBroker::start_with(&target, &env).await.unwrap();
        let (status, body) = b.get(&pop_path("jobs", None, "batch=5&wait=false")).await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{env:?}: {body}");
        let text = body.to_string();
        assert!(
            text.contains("cannot deliver message j-2 of queue jobs") && text.contains(why),
            "{text}"
        );
        // nor read by offset
        let (status, fetch) = b
            .post(
                "/api/v1/fetch",
                &json!({"entries": [{"queue": "jobs", "partition": "Default", "offset": 0}]}),
            )
            .await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{fetch}");
        assert!(
            fetch.to_string().contains("cannot deliver message j-1"),
            "{fetch}"
        );
        // the admin view shows the envelope as stored, marked so
        let (_, dlq) = b.get("/api/v1/dlq?queue=jobs&consumerGroup=workers").await;
        assert!(dlq.to_string().contains("authTag"), "{dlq}");
        b.stop().await;
    }
    // with the key the same messages are delivered
    let target = TestDb::new().await.unwrap();
    import(&target, &url(&source), "queen", Some(KEY), false)
        .await
        .unwrap();
    let b = TestBroker::start_with(&target, &[("QUEEN_ENCRYPTION_KEY", KEY)])
        .await
        .unwrap();
    let body = pop_ok(&b, &pop_path("jobs", None, "batch=5&wait=false")).await;
    assert_eq!(txn_ids(&body), ["j-2", "j-3", "j-4"]);
    b.stop().await;
}
