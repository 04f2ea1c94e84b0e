//! The disk spool: pushes while PostgreSQL is away are answered `buffered`,
//! survive SIGKILL, and end up in PostgreSQL exactly once and in order.

mod harness;
mod kill;

use std::time::{Duration, Instant};

use queen_proto::spool::{encode, Record};
use reqwest::StatusCode;
use serde_json::{json, Value};

use harness::*;

const LIMIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pushes_during_an_outage_are_buffered_then_stored_once_in_order() {
    let rig = Rig::new().await;
    let b = rig.broker(&[]).await;
    let q = unique("outage");
    push_one(&b, &q, "p0", json!("first"), "first").await;

    rig.proxy.cut();
    let parts = ["p0", "p1", "p2"];
    let mut items = numbered(&q, &parts, 20);
    // two items without a transactionId: the broker fixes one before spooling
    items.push(json!({"queue": q, "partition": "p1", "payload": "anon-1"}));
    items.push(json!({"queue": q, "partition": "p1", "payload": "anon-2"}));
    let base = format!("http://{}", b.addr);
    let results = push_chunks(&base, &b.http, &items, 7).await;
    assert_buffered(&results, &items);
    let anon: Vec<String> = results[60..]
        .iter()
        .map(|r| r["transactionId"].as_str().unwrap().to_owned())
        .collect();

    let (_, state) = b.get("/api/v1/system/maintenance").await;
    assert_eq!(state["bufferedMessages"], 62, "{state}");
    assert_eq!(state["bufferHealthy"], true, "{state}");
    assert_eq!(state["bufferStats"]["databaseReachable"], false, "{state}");
    // pops need the database: they answer as the contract says meanwhile
    let (status, body) = b.get(&pop_path(&q, None, "")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["success"], false, "{body}");

    rig.proxy.restore();
    // a push right after the restore must not overtake the spooled ones
    let after = push_items(
        &b,
        json!([{"queue": q, "partition": "p0", "payload": "after", "transactionId": "after"}]),
    )
    .await;
    assert!(
        after[0]["status"] == "buffered" || after[0]["status"] == "queued",
        "{after:?}"
    );
    wait_stored(&rig.db, &q, 64, LIMIT).await;

    let mut want_p0: Vec<String> = vec!["first".into()];
    want_p0.extend((0..20).map(|i| format!("p0-{i}")));
    want_p0.push("after".into());
    assert_eq!(stored(&rig.db, &q, "p0").await, want_p0);
    let mut want_p1: Vec<String> = (0..20).map(|i| format!("p1-{i}")).collect();
    want_p1.extend(anon);
    assert_eq!(stored(&rig.db, &q, "p1").await, want_p1);
    let want_p2: Vec<String> = (0..20).map(|i| format!("p2-{i}")).collect();
    assert_eq!(stored(&rig.db, &q, "p2").await, want_p2);

    let (_, state) = b.get("/api/v1/system/maintenance").await;
    assert_eq!(state["bufferedMessages"], 0, "{state}");
    let (_, buffers) = b.get("/api/v1/status/buffers").await;
    assert_eq!(buffers["pending"], 0, "{buffers}");
    let metrics = b
        .http
        .get(b.url("/metrics/prometheus"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(metrics.contains("queen_spool_drained_total 6"), "{metrics}");
    assert!(metrics.contains("queen_spool_records 0"), "{metrics}");
    // a popped replayed message carries the payload as pushed
    let body = pop_ok(&b, &pop_path(&q, Some("p2"), "batch=1")).await;
    assert_eq!(messages(&body)[0]["data"], json!({"p": "p2", "i": 0}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintenance_mode_spools_and_turning_it_off_drains() {
    let (db, b) = setup_with(&[]).await;
    let q = unique("mnt-spool");
    let (status, _) = b
        .post("/api/v1/system/maintenance", &json!({"enabled": true}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let items = numbered(&q, &["a", "b"], 5);
    let results = push_items(&b, Value::Array(items.clone())).await;
    assert_buffered(&results, &items);
    let (_, state) = b.get("/api/v1/system/maintenance").await;
    assert_eq!(state["maintenanceMode"], true);
    assert_eq!(state["bufferedMessages"], 10, "{state}");
    assert_eq!(state["bufferStats"]["pending"], 10, "{state}");
    assert_eq!(
        stored_count(&db, &q).await,
        0,
        "nothing reaches PostgreSQL yet"
    );
    sleep_ms(300).await;
    assert_eq!(
        stored_count(&db, &q).await,
        0,
        "no replay while maintenance is on"
    );

    let (status, _) = b
        .post("/api/v1/system/maintenance", &json!({"enabled": false}))
        .await;
    assert_eq!(status, StatusCode::OK);
    wait_stored(&db, &q, 10, LIMIT).await;
    let body = pop_ok(&b, &pop_path(&q, Some("a"), "batch=10")).await;
    let want: Vec<String> = (0..5).map(|i| format!("a-{i}")).collect();
    assert_eq!(txn_ids(&body), want);
    // a repeat of a replayed id is a duplicate, as for any push
    let again = push_items(
        &b,
        json!([{"queue": q, "partition": "b", "payload": 1, "transactionId": "b-0"}]),
    )
    .await;
    assert_eq!(again[0]["status"], "duplicate", "{again:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_spool_answers_503_and_loses_nothing_it_accepted() {
    let (db, b) = setup_with(&[("FILE_BUFFER_MAX_BYTES", "2000")]).await;
    let q = unique("full");
    push_one(&b, &q, "live", json!("direct"), "direct").await;
    b.post("/api/v1/system/maintenance", &json!({"enabled": true}))
        .await;
    let mut accepted = 0;
    let mut refused = None;
    for i in 0..200 {
        let (status, body) = b
            .post(
                "/api/v1/push",
                &json!({"items": [{"queue": q, "partition": "s", "payload": {"i": i},
                                   "transactionId": format!("s-{i}")}]}),
            )
            .await;
        if status == StatusCode::CREATED {
            assert_eq!(body[0]["status"], "buffered", "{body}");
            accepted += 1;
        } else {
            refused = Some((status, body));
            break;
        }
    }
    let (status, body) = refused.expect("the spool filled up");
    let error = assert_error(status, &body, StatusCode::SERVICE_UNAVAILABLE);
    assert!(error.contains("full"), "{error}");
    assert!(accepted > 3, "{accepted} accepted before the limit");
    let (_, state) = b.get("/api/v1/system/maintenance").await;
    assert_eq!(state["bufferHealthy"], false, "{state}");
    assert_eq!(state["bufferedMessages"], accepted, "{state}");

    // pops and acks keep working while the spool is full
    let body = pop_ok(&b, &pop_path(&q, Some("live"), "")).await;
    let msg = messages(&body)[0].clone();
    assert_eq!(ack(&b, &msg, "completed").await["success"], true);

    b.post("/api/v1/system/maintenance", &json!({"enabled": false}))
        .await;
    wait_stored(&db, &q, 1 + accepted, LIMIT).await;
    let want: Vec<String> = (0..accepted).map(|i| format!("s-{i}")).collect();
    assert_eq!(stored(&db, &q, "s").await, want);
    let (_, state) = b.get("/api/v1/system/maintenance").await;
    assert_eq!(state["bufferHealthy"], true, "space is free again: {state}");
}

fn record(queue: &str, partition: &str, id: &str, payload: &str) -> Record {
    Record {
        queue: queue.into(),
        partition: partition.into(),
        transaction_id: id.into(),
        trace_id: None,
        message_id: None,
        payload: payload.into(),
        producer_sub: None,
        spooled_at_ms: 0,
    }
}

fn frames(records: &[Record]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in records {
        encode(r, &mut out).unwrap();
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_cuts_a_torn_tail_and_quarantines_a_corrupted_record() {
    let rig = Rig::new().await;
    let q = unique("recover");
    let dir = rig.spool_dir();
    // segment 1, sealed: three records and half of a fourth (a crash mid-write)
    let mut seg1 = frames(&[
        record(&q, "p", "s1-0", "0"),
        record(&q, "p", "s1-1", "1"),
        record(&q, "p", "s1-2", "2"),
    ]);
    let torn = frames(&[record(&q, "p", "s1-torn", "3")]);
    seg1.extend_from_slice(&torn[..torn.len() / 2]);
    std::fs::write(dir.join(format!("{:020}.seg", 1)), &seg1).unwrap();
    // segment 2, left open: two good records, a corrupted one, one more good one;
    // plus records PostgreSQL refuses: an empty queue name, a NUL in the payload
    let good = frames(&[
        record(&q, "p", "s2-0", "4"),
        record("", "p", "bad-name", "5"),
        record(&q, "p", "s2-1", "6"),
        record(&q, "nul", "bad-nul", "\"a\u{0}b\""),
        record(&q, "p", "s2-2", "7"),
    ]);
    let mut bad = frames(&[record(&q, "p", "s2-corrupt", "8")]);
    let last = bad.len() - 1;
    bad[last] ^= 0x20;
    let after = frames(&[record(&q, "p", "s2-lost", "9")]);
    let mut seg2 = good.clone();
    seg2.extend_from_slice(&bad);
    seg2.extend_from_slice(&after);
    std::fs::write(dir.join(format!("{:020}.open", 2)), &seg2).unwrap();

    let b = rig.broker(&[]).await;
    wait_stored(&rig.db, &q, 6, LIMIT).await;
    assert_eq!(
        stored(&rig.db, &q, "p").await,
        ["s1-0", "s1-1", "s1-2", "s2-0", "s2-1", "s2-2"]
    );
    let started = Instant::now();
    let failed = dir.join("failed");
    loop {
        let (_, state) = b.get("/api/v1/system/maintenance").await;
        if state["bufferedMessages"] == 0 && state["bufferStats"]["failed"] == 3 {
            break;
        }
        assert!(started.elapsed() < LIMIT, "{state}");
        sleep_ms(100).await;
    }
    let mut names: Vec<String> = std::fs::read_dir(&failed)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 6, "{names:?}");
    let corrupt_reason =
        std::fs::read_to_string(failed.join(format!("{:020}.open.reason", 2))).unwrap();
    assert!(corrupt_reason.contains("checksum"), "{corrupt_reason}");
    let reasons: Vec<String> = names
        .iter()
        .filter(|n| n.ends_with(".rec.reason"))
        .map(|n| std::fs::read_to_string(failed.join(n)).unwrap())
        .collect();
    assert!(
        reasons.iter().any(|r| r.contains("invalid record")),
        "{reasons:?}"
    );
    assert!(
        reasons.iter().any(|r| r.contains("refused by PostgreSQL")),
        "{reasons:?}"
    );
    // the broker keeps going
    push_one(&b, &q, "p", json!("later"), "later").await;
    assert_eq!(stored(&rig.db, &q, "p").await.len(), 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflating_group_gets_the_newest_after_the_spool_replays() {
    let rig = Rig::new().await;
    let b = rig.broker(&[]).await;
    let q = unique("lv-spool");
    push_one(&b, &q, "p", json!("stored"), "stored").await;
    let conflate = pop_path(&q, None, "conflation=true&consumerGroup=c&batch=10");
    let body = pop_ok(&b, &conflate).await;
    assert_eq!(txn_ids(&body), vec!["stored"]);
    crate::common::ack_all_completed(&b, &body, Some("c")).await;

    rig.proxy.cut();
    let items: Vec<Value> = (0..3)
        .map(|i| json!({"queue": q, "partition": "p", "payload": i, "transactionId": format!("spooled-{i}")}))
        .collect();
    let base = format!("http://{}", b.addr);
    let results = push_chunks(&base, &b.http, &items, 1).await;
    assert_buffered(&results, &items);
    rig.proxy.restore();
    wait_stored(&rig.db, &q, 4, LIMIT).await;

    // the replayed messages took their offsets in push order: the last one is the newest
    let body = pop_ok(&b, &conflate).await;
    assert_eq!(body["conflation"], true, "{body}");
    assert_eq!(txn_ids(&body), vec!["spooled-2"]);
}
