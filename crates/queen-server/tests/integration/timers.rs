//! Timers (issue 21): zstd payloads and what a fire the database refuses
//! does to its timer (back-off, then the DLQ under `__timer__`).

use std::io::Write as _;
use std::time::{Duration, Instant};

use base64::Engine;
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::*;

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn schedule(q: &str, key: &str, payload: &[u8], zstd: bool) -> Value {
    json!({"op": "schedule", "queue": q, "timerKey": key, "payload": b64(payload),
           "payloadZstd": zstd, "delayMs": 0, "txn": format!("txn-{key}")})
}

/// Pops one message of `q` within `limit`.
async fn pop_one(b: &queen_testkit::TestBroker, q: &str, limit: Duration) -> Option<Value> {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        let (s, body) = b
            .get(&pop_path(q, None, "wait=true&timeout=500&batch=1"))
            .await;
        if s == StatusCode::OK {
            return Some(body["messages"][0].clone());
        }
    }
    None
}

#[tokio::test]
async fn zstd_payloads_are_delivered_decompressed_and_bounded() {
    let (_db, b) = setup().await;
    let q = unique("tzstd");
    let doc = json!({"text": "abc".repeat(20_000), "n": 7});
    let packed = zstd::bulk::compress(doc.to_string().as_bytes(), 3).unwrap();
    assert!(packed.len() < 2_000, "compressible");
    let (s, r) = b
        .post(
            "/api/v1/timers",
            &json!([schedule(&q, "ok", &packed, true)]),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["results"][0]["status"], "scheduled", "{r}");
    let m = pop_one(&b, &q, Duration::from_secs(10))
        .await
        .expect("the timer fired");
    assert_eq!(m["data"], doc, "delivered decompressed");
    assert_eq!(m["transactionId"], "txn-ok");
    assert_eq!(m["id"], r["results"][0]["messageId"]);

    // bombs: 2 MiB of JSON with the size in the frame header, and the same
    // streamed without it; both refused with 413, nothing scheduled
    let huge = format!("\"{}\"", "a".repeat(2 << 20));
    let with_size = zstd::bulk::compress(huge.as_bytes(), 3).unwrap();
    let mut enc = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
    enc.include_contentsize(false).unwrap();
    enc.write_all(huge.as_bytes()).unwrap();
    let without_size = enc.finish().unwrap();
    assert!(without_size.len() < 10_000);
    for (key, bytes) in [("b1", &with_size), ("b2", &without_size)] {
        let (s, r) = b
            .post("/api/v1/timers", &json!([schedule(&q, key, bytes, true)]))
            .await;
        assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{key}: {r}");
        assert_eq!(r["reason"], "timers_payload_too_large", "{r}");
    }
    // exactly the bound passes: 1 MiB of JSON text, streamed without a size
    let edge = format!("\"{}\"", "b".repeat((1 << 20) - 2));
    let mut enc = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
    enc.include_contentsize(false).unwrap();
    enc.write_all(edge.as_bytes()).unwrap();
    let edge_packed = enc.finish().unwrap();
    let (s, r) = b
        .post(
            "/api/v1/timers",
            &json!([schedule(&q, "edge", &edge_packed, true)]),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{r}");

    // not zstd, not JSON once decompressed, not a boolean flag
    let not_json = zstd::bulk::compress(b"plain words", 3).unwrap();
    for (op, reason) in [
        (
            schedule(&q, "x1", b"{\"a\":1}", true),
            "timers_payload_not_zstd",
        ),
        (
            schedule(&q, "x2", &not_json, true),
            "timers_payload_not_json",
        ),
        (
            {
                let mut o = schedule(&q, "x3", b"1", false);
                o["payloadZstd"] = json!("yes");
                o
            },
            "timers_bad_zstd",
        ),
    ] {
        let (s, r) = b.post("/api/v1/timers", &json!([op])).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{r}");
        assert_eq!(r["reason"], reason, "{r}");
    }
    for key in ["b1", "b2", "x1", "x2", "x3"] {
        let (_, peek) = b.get(&format!("/api/v1/timers/{q}/{key}")).await;
        assert_eq!(peek["found"], false, "{key}: {peek}");
    }
}

fn micros(t: &Value) -> i64 {
    chrono::DateTime::parse_from_rfc3339(t.as_str().unwrap())
        .unwrap()
        .timestamp_micros()
}

/// Peeks `key` until its `attempts` reach `n` (or it is gone: `None`).
async fn peek_until_attempts(
    b: &queen_testkit::TestBroker,
    q: &str,
    key: &str,
    n: i64,
) -> Option<Value> {
    let until = Instant::now() + Duration::from_secs(15);
    loop {
        let (s, p) = b.get(&format!("/api/v1/timers/{q}/{key}")).await;
        assert_eq!(s, StatusCode::OK, "{p}");
        if p["found"] == false {
            return None;
        }
        if p["attempts"].as_i64() == Some(n) {
            return Some(p);
        }
        assert!(Instant::now() < until, "attempts never reached {n}: {p}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_refused_fire_backs_off_then_lands_in_the_dlq_without_blocking_others() {
    let (db, b) = setup().await;
    let q = unique("tfail");
    let admin = db.client().await.unwrap();
    // the destination refuses this one payload: a constraint on the segments
    // rejects it with 23514 whenever the fire appends it
    admin
        .batch_execute(
            r#"ALTER TABLE queen.segments ADD CONSTRAINT refuse_poison
               CHECK (NOT ('{"refuse":true}' = ANY (payloads)))"#,
        )
        .await
        .unwrap();
    let poison = br#"{"refuse":true}"#;
    let ops = json!([
        schedule(&q, "bad", poison, false),
        schedule(&q, "good", br#"{"ok":1}"#, false),
    ]);
    let (s, r) = b.post("/api/v1/timers", &ops).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let bad_mid = r["results"][0]["messageId"].clone();

    // the good timer fires although the bad ones fail beside it
    let m = pop_one(&b, &q, Duration::from_secs(10))
        .await
        .expect("the good timer fired");
    assert_eq!(m["data"], json!({"ok": 1}));

    // four failures, each backing off 1, 2, 4, 8 s; then the fifth dead-letters
    for n in 1..=4i64 {
        let p = peek_until_attempts(&b, &q, "bad", n)
            .await
            .expect("still pending");
        assert!(
            p["lastError"]
                .as_str()
                .is_some_and(|e| e.contains("refuse_poison")),
            "{p}"
        );
        let wait = micros(&p["deliverAt"]) - micros(&p["updatedAt"]);
        let want = 1_000_000i64 << (n - 1);
        assert!(
            (wait - want).abs() < 50_000,
            "attempt {n}: back-off {wait} µs, want {want}"
        );
        // skip the wait: make it due now
        admin
            .execute(
                "UPDATE queen.timers SET deliver_at = clock_timestamp()
                  WHERE queue = $1 AND timer_key = 'bad'",
                &[&q],
            )
            .await
            .unwrap();
    }
    assert!(
        peek_until_attempts(&b, &q, "bad", 5).await.is_none(),
        "removed after the fifth failure"
    );
    let rows = admin
        .query(
            "SELECT d.consumer_group, d.msg_offset, d.transaction_id, d.retry_count,
                    d.message_id::text, d.payload
               FROM queen.dead_letters d JOIN queen.partitions pt ON pt.id = d.partition_id
               JOIN queen.queues qu ON qu.id = pt.queue_id WHERE qu.name = $1",
            &[&q],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), 1, "one dead letter");
    let r0 = &rows[0];
    assert_eq!(r0.get::<_, String>(0), "__timer__");
    assert_eq!(r0.get::<_, i64>(1), -1);
    assert_eq!(r0.get::<_, String>(2), "txn-bad");
    assert_eq!(r0.get::<_, i32>(3), 5);
    assert_eq!(json!(r0.get::<_, String>(4)), bad_mid);
    assert_eq!(r0.get::<_, String>(5), r#"{"refuse":true}"#);
    let (s, d) = b
        .get(&format!("/api/v1/dlq?queue={q}&consumerGroup=__timer__"))
        .await;
    assert_eq!(s, StatusCode::OK, "{d}");
    assert_eq!(d["total"], 1, "{d}");
    assert_eq!(d["messages"][0]["transactionId"], "txn-bad", "{d}");
    // a failing timer stays pending and cancellable
    let (s, r) = b
        .post(
            "/api/v1/timers",
            &json!([schedule(&q, "bad2", poison, false)]),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    peek_until_attempts(&b, &q, "bad2", 1)
        .await
        .expect("pending");
    let (s, c) = b.delete(&format!("/api/v1/timers/{q}/bad2")).await;
    assert_eq!(s, StatusCode::OK, "{c}");
    assert_eq!(c["status"], "cancelled", "{c}");
    // nothing of the bad timers was ever appended
    let (s, _) = b.get(&pop_path(&q, None, "wait=false")).await;
    assert_eq!(s, StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn a_fire_that_times_out_waits_a_second_without_spending_an_attempt() {
    // a short lock_timeout: the fire gives up on a locked partition at once
    let (db, b) = setup_with(&[("DB_LOCK_TIMEOUT", "300")]).await;
    let q = unique("ttransient");
    let (s, r) = b
        .post(
            "/api/v1/push",
            &json!({"items": [{"queue": q, "partition": "p", "payload": {"first": true}}]}),
        )
        .await;
    assert!(s.is_success(), "{r}");
    // another session holds the destination partition's row lock
    let holder = db.client().await.unwrap();
    holder
        .batch_execute(&format!(
            "BEGIN; SELECT 1 FROM queen.partitions pt JOIN queen.queues qu ON qu.id = pt.queue_id
              WHERE qu.name = '{q}' AND pt.name = 'p' FOR UPDATE"
        ))
        .await
        .unwrap();
    let mut op = schedule(&q, "t", br#"{"timer":1}"#, false);
    op["partition"] = json!("p");
    let (s, r) = b.post("/api/v1/timers", &json!([op])).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let until = Instant::now() + Duration::from_secs(10);
    let p = loop {
        let (_, p) = b.get(&format!("/api/v1/timers/{q}/t")).await;
        assert_eq!(p["found"], true, "fired through a held lock: {p}");
        if p["lastError"].is_string() {
            break p;
        }
        assert!(Instant::now() < until, "the fire never failed: {p}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        p["attempts"], 0,
        "a transient failure spends no attempt: {p}"
    );
    let wait = micros(&p["deliverAt"]) - micros(&p["updatedAt"]);
    assert!(
        (wait - 1_000_000).abs() < 50_000,
        "back-off {wait} µs, want 1 s"
    );
    holder.batch_execute("COMMIT").await.unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    let mut txns = Vec::new();
    while !txns.iter().any(|t| t == "txn-t") {
        assert!(Instant::now() < until, "the timer never fired: {txns:?}");
        let (s, body) = b
            .get(&pop_path(&q, Some("p"), "wait=true&timeout=500&batch=10"))
            .await;
        if s == StatusCode::OK {
            for m in body["messages"].as_array().unwrap() {
                txns.push(m["transactionId"].as_str().unwrap().to_owned());
                let (s, a) = b
                    .post(
                        "/api/v1/ack",
                        &json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                                "leaseId": m["leaseId"], "status": "completed"}),
                    )
                    .await;
                assert!(s.is_success(), "{a}");
            }
        }
    }
    let (_, gone) = b.get(&format!("/api/v1/timers/{q}/t")).await;
    assert_eq!(gone["found"], false, "{gone}");
}
