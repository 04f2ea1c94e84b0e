//! Queue option `maxSize` (issue 38, item 2): a push stores the items that
//! fit, in request order, and answers the rest `failed` naming the bound; the
//! count is the messages not yet consumed (per partition, past its slowest
//! cursor) over all partitions of the queue; a transaction that would
//! overflow fails whole; a timer into a full queue follows the refusal path;
//! spool replays are stored regardless; concurrent pushers never overshoot.

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use queen_proto::push_binary::{encode_push, Batch, Form, Message, CONTENT_TYPE};
use queen_testkit::{TestBroker, TestDb};
use reqwest::StatusCode;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::*;

/// Messages stored in `queue`, all partitions.
async fn stored(db: &TestDb, queue: &str) -> i64 {
    let client = db.client().await.unwrap();
    client
        .query_one(
            "SELECT count(*) FROM queen.message_keys k
             JOIN queen.partitions p ON p.id = k.partition_id
             JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1",
            &[&queue],
        )
        .await
        .unwrap()
        .get(0)
}

/// The partitions of `queue`, by name.
async fn partitions(db: &TestDb, queue: &str) -> Vec<String> {
    let client = db.client().await.unwrap();
    client
        .query(
            "SELECT p.name FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
             WHERE q.name = $1 ORDER BY p.name",
            &[&queue],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

fn item(queue: &str, partition: &str, txn: &str) -> Value {
    json!({"queue": queue, "partition": partition, "payload": {"t": txn}, "transactionId": txn})
}

fn statuses(results: &[Value]) -> Vec<String> {
    results
        .iter()
        .map(|r| r["status"].as_str().unwrap().to_owned())
        .collect()
}

/// Asserts a refused item's answer: the contract's keys and the bound named.
fn assert_refused(r: &Value, queue: &str, partition: &str, txn: &str, max: i64) {
    assert_keys(
        r,
        &[
            "index",
            "status",
            "queue",
            "partition",
            "transactionId",
            "error",
        ],
    );
    assert_eq!(r["status"], "failed", "{r}");
    assert_eq!(
        (&r["queue"], &r["partition"], &r["transactionId"]),
        (&json!(queue), &json!(partition), &json!(txn)),
        "{r}"
    );
    assert_eq!(
        r["error"],
        json!(format!("queue {queue} is full (maxSize {max}): not stored")),
        "{r}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_refuses_exactly_the_overflowing_items_in_request_order() {
    let (db, b) = setup().await;
    let q = unique("max-order");
    configure(&b, &q, json!({"maxSize": 5})).await;
    push_numbered(&b, &q, "p", "t", 3).await;
    // room for 2: a stored transactionId and a repeat inside the request take none
    let results = push_items(
        &b,
        json!([
            item(&q, "p", "t-1"),
            item(&q, "p", "n-0"),
            item(&q, "p", "n-1"),
            item(&q, "new", "n-2"),
            item(&q, "p", "n-0"),
            item(&q, "p", "n-3"),
        ]),
    )
    .await;
    assert_eq!(
        statuses(&results),
        [
            "duplicate",
            "queued",
            "queued",
            "failed",
            "duplicate",
            "failed"
        ],
        "{results:?}"
    );
    assert_eq!(results[4]["message_id"], results[1]["message_id"]);
    assert_refused(&results[3], &q, "new", "n-2", 5);
    assert_refused(&results[5], &q, "p", "n-3", 5);
    assert_eq!(stored(&db, &q).await, 5);
    // a refused item creates no partition
    assert_eq!(partitions(&db, &q).await, ["Default", "p"]);
    let body = pop_ok(&b, &pop_path(&q, None, "batch=10")).await;
    assert_eq!(txn_ids(&body), ["t-0", "t-1", "t-2", "n-0", "n-1"]);

    // the binary body (QPB1) is held to the bound alike, and its counts
    // answer counts the refused items as errors
    let q2 = unique("max-bin");
    configure(&b, &q2, json!({"maxSize": 2})).await;
    let res = post_binary(&b, &q2, &["b-0", "b-1", "b-2"], false).await;
    assert_eq!(
        statuses(res.as_array().unwrap()),
        ["queued", "queued", "failed"],
        "{res}"
    );
    assert_refused(&res[2], &q2, "p", "b-2", 2);
    let counts = post_binary(&b, &q2, &["b-1", "b-3"], true).await;
    assert_eq!(
        counts,
        json!({"count": 2, "queued": 0, "duplicate": 1, "error": 1})
    );
    assert_eq!(stored(&db, &q2).await, 2);
}

/// Pushes `txns` to `queue`/p as one binary body (QPB1, `counts`: flag 2).
async fn post_binary(b: &TestBroker, queue: &str, txns: &[&str], counts: bool) -> Value {
    let messages = txns
        .iter()
        .map(|t| Message {
            transaction_id: t,
            message_id: Uuid::nil(),
            payload: b"1",
        })
        .collect();
    let batch = Batch {
        queue,
        partition: "p",
        messages,
    };
    let body = encode_push(&[batch], Form::Plain { zstd: false }, counts).unwrap();
    let resp = b
        .http
        .post(b.url("/api/v1/push"))
        .header(reqwest::header::CONTENT_TYPE, CONTENT_TYPE)
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    resp.json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_partitions_of_a_queue_share_its_bound() {
    let (db, b) = setup().await;
    let q = unique("max-parts");
    configure(&b, &q, json!({"maxSize": 4})).await;
    push_numbered(&b, &q, "a", "a", 2).await;
    push_numbered(&b, &q, "b", "b", 1).await;
    let results = push_items(
        &b,
        json!([
            item(&q, "c", "c-0"),
            item(&q, "a", "a-9"),
            item(&q, "d", "d-0")
        ]),
    )
    .await;
    assert_eq!(statuses(&results), ["queued", "failed", "failed"]);
    assert_eq!(stored(&db, &q).await, 4);
    assert_eq!(partitions(&db, &q).await, ["Default", "a", "b", "c"]);
    // consuming one partition makes room in the queue for another
    let body = pop_ok(&b, &pop_path(&q, Some("a"), "batch=10")).await;
    ack_all_completed(&b, &body, None).await;
    let results = push_items(
        &b,
        json!([
            item(&q, "d", "d-0"),
            item(&q, "d", "d-1"),
            item(&q, "d", "d-2")
        ]),
    )
    .await;
    assert_eq!(statuses(&results), ["queued", "queued", "failed"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_consumer_groups_the_slowest_group_holds_the_room() {
    let (_db, b) = setup().await;
    let q = unique("max-groups");
    configure(&b, &q, json!({"maxSize": 3})).await;
    push_numbered(&b, &q, "p", "t", 3).await;
    // "slow" consumes one message, "fast" all three
    let body = pop_ok(&b, &pop_path(&q, None, "consumerGroup=slow&batch=1")).await;
    ack_all_completed(&b, &body, Some("slow")).await;
    assert_eq!(drain_group(&b, &q, "fast").await.len(), 3);
    // two not yet consumed by "slow": room for one
    let results = push_items(&b, json!([item(&q, "p", "u-0"), item(&q, "p", "u-1")])).await;
    assert_eq!(statuses(&results), ["queued", "failed"]);
    // "fast" catching up again makes no room; "slow" catching up does
    assert_eq!(drain_group(&b, &q, "fast").await, ["u-0"]);
    let results = push_items(&b, json!([item(&q, "p", "u-1")])).await;
    assert_eq!(statuses(&results), ["failed"]);
    assert_eq!(drain_group(&b, &q, "slow").await, ["t-1", "t-2", "u-0"]);
    let results = push_items(&b, json!([item(&q, "p", "u-1")])).await;
    assert_eq!(statuses(&results), ["queued"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leased_message_holds_its_room_until_it_is_acked() {
    let (_db, b) = setup().await;
    let q = unique("max-ack");
    configure(&b, &q, json!({"maxSize": 2})).await;
    push_numbered(&b, &q, "p", "t", 2).await;
    let body = pop_ok(&b, &pop_path(&q, None, "batch=1")).await;
    let results = push_items(&b, json!([item(&q, "p", "n-0")])).await;
    assert_eq!(statuses(&results), ["failed"], "a lease is not consumed");
    ack_all_completed(&b, &body, None).await;
    let results = push_items(&b, json!([item(&q, "p", "n-0"), item(&q, "p", "n-1")])).await;
    assert_eq!(statuses(&results), ["queued", "failed"]);
    // a failed ack gives no room: the message comes back
    let body = pop_ok(&b, &pop_path(&q, None, "batch=1")).await;
    assert_eq!(
        ack(&b, &messages(&body)[0], "failed", Some("x")).await["success"],
        true
    );
    let results = push_items(&b, json!([item(&q, "p", "n-1")])).await;
    assert_eq!(statuses(&results), ["failed"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_that_would_overflow_fails_whole_and_writes_nothing() {
    let (db, b) = setup().await;
    let q = unique("max-tx");
    let other = unique("max-tx-other");
    configure(&b, &q, json!({"maxSize": 2})).await;
    push_numbered(&b, &q, "p", "t", 1).await;
    push_numbered(&b, &other, "p", "o", 1).await;
    let body = pop_ok(&b, &pop_path(&other, None, "batch=1")).await;
    let msg = messages(&body)[0].clone();
    let ops = json!({"operations": [
        {"type": "ack", "transactionId": msg["transactionId"], "partitionId": msg["partitionId"],
         "leaseId": msg["leaseId"]},
        {"type": "push", "items": [item(&other, "p", "x-0"), item(&q, "p", "n-0"), item(&q, "p", "n-1")]}
    ]});
    let (status, res) = b.post("/api/v1/transaction", &ops).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(res["success"], false, "{res}");
    let want = format!(
        "PUSH operation failed: queue {q} is full (maxSize 2): transactionId n-1 does not fit"
    );
    assert_eq!(res["error"], json!(want), "{res}");
    let last = res["results"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (&last["index"], &last["success"]),
        (&json!(3), &json!(false)),
        "{res}"
    );
    // nothing applied: no push, and the ack did not move the cursor
    assert_eq!(stored(&db, &q).await, 1);
    assert_eq!(stored(&db, &other).await, 1);
    let client = db.client().await.unwrap();
    let pid = partition_id(&client, &other, "p").await;
    assert_eq!(
        cursor(&client, pid, "__QUEUE_MODE__").await,
        Some((0, true))
    );
    // what fits commits
    let ops = json!({"operations": [{"type": "push", "items": [item(&q, "p", "n-0")]}]});
    let (status, res) = b.post("/api/v1/transaction", &ops).await;
    assert_eq!(
        (status, &res["success"]),
        (StatusCode::OK, &json!(true)),
        "{res}"
    );
    assert_eq!(stored(&db, &q).await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timer_into_a_full_queue_is_refused_until_dead_lettered() {
    let (db, b) = setup().await;
    let q = unique("max-timer");
    configure(&b, &q, json!({"maxSize": 1})).await;
    push_numbered(&b, &q, "p", "t", 1).await;
    let payload = base64::engine::general_purpose::STANDARD.encode(br#"{"tick":1}"#);
    let (s, r) = b
        .post(
            "/api/v1/timers",
            &json!([{"op": "schedule", "queue": q, "partition": "p", "timerKey": "k",
                     "payload": payload, "delayMs": 0, "txn": "tm"}]),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let admin = db.client().await.unwrap();
    let until = Instant::now() + Duration::from_secs(30);
    let mut errors = Vec::new();
    loop {
        let (_, p) = b.get(&format!("/api/v1/timers/{q}/k")).await;
        if p["found"] == false {
            break;
        }
        assert!(Instant::now() < until, "never dead-lettered: {p}");
        if let Some(e) = p["lastError"].as_str() {
            errors.push(e.to_owned());
            // skip the back-off: due again now
            admin
                .execute(
                    "UPDATE queen.timers SET deliver_at = clock_timestamp()
                      WHERE queue = $1 AND deliver_at > clock_timestamp()",
                    &[&q],
                )
                .await
                .unwrap();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let want = format!("queue {q} is full (maxSize 1): not stored");
    assert!(
        !errors.is_empty() && errors.iter().all(|e| *e == want),
        "{errors:?}"
    );
    assert_eq!(stored(&db, &q).await, 1, "the fire stored nothing");
    let (s, d) = b
        .get(&format!("/api/v1/dlq?queue={q}&consumerGroup=__timer__"))
        .await;
    assert_eq!(s, StatusCode::OK, "{d}");
    assert_eq!(d["total"], 1, "{d}");
    assert_eq!(d["messages"][0]["transactionId"], "tm", "{d}");
    assert_eq!(d["messages"][0]["errorMessage"], json!(want), "{d}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_pushers_on_two_brokers_never_overshoot() {
    let db = TestDb::new().await.unwrap();
    let (a, c) = (
        Arc::new(TestBroker::start(&db).await.unwrap()),
        Arc::new(TestBroker::start(&db).await.unwrap()),
    );
    let q = unique("max-race");
    configure(&a, &q, json!({"maxSize": 50})).await;
    let push = |b: &Arc<TestBroker>, task: usize| {
        let (b, q) = (Arc::clone(b), q.clone());
        tokio::spawn(async move {
            let mut queued = 0;
            for i in 0..10 {
                let items = json!([
                    item(&q, &format!("p{}", i % 4), &format!("{task}-{i}")),
                    item(&q, &format!("p{task}"), &format!("{task}-{i}-b"))
                ]);
                let (s, res) = b.post("/api/v1/push", &json!({"items": items})).await;
                assert_eq!(s, StatusCode::CREATED, "{res}");
                queued += res
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|r| r["status"] == "queued")
                    .count();
            }
            queued
        })
    };
    let tasks: Vec<_> = (0..8)
        .map(|t| push(if t % 2 == 0 { &a } else { &c }, t))
        .collect();
    let mut queued = 0;
    for t in tasks {
        queued += t.await.unwrap();
    }
    assert_eq!(queued, 50, "160 items raced for 50 places");
    assert_eq!(stored(&db, &q).await, 50);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spooled_pushes_are_stored_past_the_bound_when_replayed() {
    let (db, b) = setup().await;
    let q = unique("max-spool");
    configure(&b, &q, json!({"maxSize": 2})).await;
    let (s, _) = b
        .post("/api/v1/system/maintenance", &json!({"enabled": true}))
        .await;
    assert_eq!(s, StatusCode::OK);
    let items: Vec<Value> = (0..4).map(|i| item(&q, "p", &format!("s-{i}"))).collect();
    let results = push_items(&b, Value::Array(items)).await;
    assert_eq!(statuses(&results), ["buffered"; 4]);
    let (s, _) = b
        .post("/api/v1/system/maintenance", &json!({"enabled": false}))
        .await;
    assert_eq!(s, StatusCode::OK);
    let until = Instant::now() + Duration::from_secs(20);
    while stored(&db, &q).await < 4 {
        assert!(Instant::now() < until, "spool never replayed");
        sleep_ms(50).await;
    }
    // acknowledged pushes are all there; the queue is over its bound
    let results = push_items(&b, json!([item(&q, "p", "d-0")])).await;
    assert_eq!(statuses(&results), ["failed"]);
    assert_eq!(stored(&db, &q).await, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_size_zero_bounds_nothing_and_a_new_bound_applies_at_once() {
    let (db, b) = setup().await;
    let q = unique("max-zero");
    configure(&b, &q, json!({"maxSize": 0})).await;
    for round in 0..3 {
        push_numbered(&b, &q, "p", &format!("r{round}"), 200).await;
    }
    assert_eq!(stored(&db, &q).await, 600);
    // set on a queue past it: nothing fits; lifted again: everything does
    configure(&b, &q, json!({"maxSize": 10})).await;
    let results = push_items(&b, json!([item(&q, "p", "x-0")])).await;
    assert_eq!(statuses(&results), ["failed"]);
    configure(&b, &q, json!({})).await;
    let results = push_items(&b, json!([item(&q, "p", "x-0")])).await;
    assert_eq!(statuses(&results), ["queued"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_max_size_values_are_refused_naming_the_option() {
    let (db, b) = setup().await;
    let q = unique("max-bad");
    configure(&b, &q, json!({"maxSize": 7})).await;
    for bad in [
        json!(-1),
        json!("ten"),
        json!(true),
        json!(1.5),
        json!(1e12),
        json!([1]),
        json!({"n": 1}),
    ] {
        let (s, res) = b
            .post(
                "/api/v1/configure",
                &json!({"queue": q, "options": {"maxSize": bad}}),
            )
            .await;
        let e = assert_error(s, &res, StatusCode::BAD_REQUEST);
        assert!(e.starts_with("options.maxSize "), "{bad}: {e}");
    }
    let client = db.client().await.unwrap();
    let kept: i32 = client
        .query_one("SELECT max_size FROM queen.queues WHERE name = $1", &[&q])
        .await
        .unwrap()
        .get(0);
    assert_eq!(kept, 7, "a refused configure changes nothing");
    // a numeric string is a number, as for every integer option
    let res = configure(&b, &q, json!({"maxSize": "12"})).await;
    assert_eq!(res["options"]["maxSize"], 12, "{res}");
}
