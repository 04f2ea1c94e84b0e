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

/// Pushes `items` (answered 201); how many were stored.
async fn push_queued(b: &TestBroker, items: Vec<Value>) -> usize {
    let (s, res) = b.post("/api/v1/push", &json!({"items": items})).await;
    assert_eq!(s, StatusCode::CREATED, "{res}");
    statuses(res.as_array().unwrap())
        .iter()
        .filter(|s| *s == "queued")
        .count()
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
    // a small bound: every push decides, one at a time
    race_on_two_brokers(50, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pushes_far_from_a_big_bound_run_side_by_side_and_never_overshoot_it() {
    // 8 000 items for 6 500 places: the first pushes go the optimistic way
    // (more than 6 000 of room), the rest decide
    race_on_two_brokers(6_500, 50).await;
}

/// Eight tasks on two brokers push 10 times `2 * half` items each (half to
/// one of four shared partitions, half to a partition of their own) into a
/// queue with `maxSize` `max`, more than fits: exactly `max` are stored, no
/// partition is left empty, and no push deadlocked.
async fn race_on_two_brokers(max: i64, half: usize) {
    let db = TestDb::new().await.unwrap();
    let (a, c) = (
        Arc::new(TestBroker::start(&db).await.unwrap()),
        Arc::new(TestBroker::start(&db).await.unwrap()),
    );
    let q = unique("max-race");
    configure(&a, &q, json!({"maxSize": max})).await;
    let push = |b: &Arc<TestBroker>, task: usize| {
        let (b, q) = (Arc::clone(b), q.clone());
        tokio::spawn(async move {
            let mut queued = 0;
            for i in 0..10 {
                let items: Vec<Value> = (0..half)
                    .flat_map(|j| {
                        [
                            item(&q, &format!("p{}", i % 4), &format!("{task}-{i}-{j}")),
                            item(&q, &format!("p{task}"), &format!("{task}-{i}-{j}-b")),
                        ]
                    })
                    .collect();
                queued += push_queued(&b, items).await;
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
    let offered = 8 * 10 * 2 * half;
    assert_eq!(queued as i64, max, "{offered} items raced for {max} places");
    assert_eq!(stored(&db, &q).await, max);
    // pushes that were refused left no empty partition behind (configure
    // made `Default`)
    let client = db.client().await.unwrap();
    let empty: i64 = client
        .query_one(
            "SELECT count(*) FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
             WHERE q.name = $1 AND p.next_offset = 1 AND p.name <> 'Default'",
            &[&q],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(empty, 0, "partitions made for refused items only");
    // and none of them deadlocked (a deadlock is retried, so only PostgreSQL
    // counts it): the brokers stop, their backends exit and report
    for b in [a, c] {
        Arc::into_inner(b).expect("the tasks ended").stop().await;
    }
    let others = "SELECT count(*) FROM pg_stat_activity
                  WHERE datname = current_database() AND pid <> pg_backend_pid()";
    for _ in 0..100 {
        let n: i64 = client.query_one(others, &[]).await.unwrap().get(0);
        if n == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let deadlocks: i64 = client
        .query_one(
            "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(deadlocks, 0, "pushes deadlocked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_optimistic_push_leaves_room_for_what_others_hold_uncommitted() {
    // A call of 2 000 items holds a slot in a transaction left open, so its
    // items are not visible yet. The broker's pushes of 1 000 items go the
    // optimistic way only while what is committed plus their own plus 6 000
    // (what three other slot holders may add) fits; the third would not, so
    // it decides, which waits for the open transaction. Counting only what is
    // visible would store all seven pushes and end 900 over the bound.
    let (db, b) = setup().await;
    let q = unique("max-unseen");
    let max = 8_100;
    configure(&b, &q, json!({"maxSize": max})).await;
    let mut holder = db.client().await.unwrap();
    let queue_id: Uuid = holder
        .query_one("SELECT id FROM queen.queues WHERE name = $1", &[&q])
        .await
        .unwrap()
        .get(0);
    let open = holder.transaction().await.unwrap();
    let held: i64 = open
        .query_one(
            "SELECT count(*) FILTER (WHERE status = 'queued')
             FROM queen.push_bounded(
                 array_fill($1::uuid, ARRAY[2000]),
                 array_fill('held'::text, ARRAY[2000]),
                 ARRAY(SELECT gen_random_uuid() FROM generate_series(1, 2000)),
                 ARRAY(SELECT 'held-' || i FROM generate_series(1, 2000) i),
                 array_fill(NULL::uuid, ARRAY[2000]),
                 array_fill('{}'::text, ARRAY[2000]),
                 array_fill(NULL::text, ARRAY[2000]),
                 false, array_fill(true, ARRAY[2000]), false)",
            &[&queue_id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(held, 2000, "the open call went the optimistic way");
    let b = Arc::new(b);
    let pushes = {
        let (b, q) = (Arc::clone(&b), q.clone());
        tokio::spawn(async move {
            let mut queued = Vec::new();
            for i in 0..7 {
                let items: Vec<Value> = (0..1000)
                    .map(|j| item(&q, "p", &format!("{i}-{j}")))
                    .collect();
                queued.push(push_queued(&b, items).await);
            }
            queued
        })
    };
    // the first two go ahead, then the third waits however long it takes
    let start = Instant::now();
    while stored(&db, &q).await < 2000 && start.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(stored(&db, &q).await, 2000, "two pushes went ahead");
    assert!(
        !pushes.is_finished(),
        "the third push waits for the open call"
    );
    open.commit().await.unwrap();
    let queued = tokio::time::timeout(Duration::from_secs(30), pushes)
        .await
        .expect("the pushes go on once the open call committed")
        .unwrap();
    assert_eq!(queued, vec![1000, 1000, 1000, 1000, 1000, 1000, 100]);
    assert_eq!(stored(&db, &q).await, max);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_that_hold_no_slot_count_toward_the_bound() {
    // 12 000 messages appended without a slot (as a spool replay is, through
    // queen.push_batch), after a push left an exact count behind: the
    // pushes after them must see them. Were they not counted, all eight
    // pushes of 1 000 would look far from the bound and end 1 000 over it.
    let (db, b) = setup().await;
    let q = unique("max-unslotted");
    let max = 20_000;
    configure(&b, &q, json!({"maxSize": max})).await;
    let push = |i: usize| {
        let items: Vec<Value> = (0..1000)
            .map(|j| item(&q, "p", &format!("{i}-{j}")))
            .collect();
        push_queued(&b, items)
    };
    assert_eq!(push(0).await, 1000);
    let client = db.client().await.unwrap();
    let appended: i64 = client
        .query_one(
            "SELECT count(*) FILTER (WHERE a.status = 'queued')
             FROM queen.queues q,
                  queen.push_batch(
                      array_fill(q.id, ARRAY[12000]),
                      array_fill('replayed'::text, ARRAY[12000]),
                      ARRAY(SELECT gen_random_uuid() FROM generate_series(1, 12000)),
                      ARRAY(SELECT 'r-' || i FROM generate_series(1, 12000) i),
                      array_fill(NULL::uuid, ARRAY[12000]),
                      array_fill('{}'::text, ARRAY[12000]),
                      array_fill(NULL::text, ARRAY[12000]),
                      false, NULL) a
             WHERE q.name = $1",
            &[&q],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(appended, 12_000);
    let mut queued = Vec::new();
    for i in 1..9 {
        queued.push(push(i).await);
    }
    assert_eq!(queued, vec![1000, 1000, 1000, 1000, 1000, 1000, 1000, 0]);
    assert_eq!(stored(&db, &q).await, max);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_far_from_the_bound_needs_one_free_slot_of_four() {
    let (db, b) = setup().await;
    let q = unique("max-slots");
    configure(&b, &q, json!({"maxSize": 100_000})).await;
    // the slots of the queue (queen.push_bounded): advisory locks of classes
    // 21024-21027 keyed by the queue id's hashtext, here held by the test
    let holder = db.client().await.unwrap();
    let key: i32 = holder
        .query_one(
            "SELECT hashtext(id::text) FROM queen.queues WHERE name = $1",
            &[&q],
        )
        .await
        .unwrap()
        .get(0);
    for class in 21024..21027 {
        holder
            .execute("SELECT pg_advisory_lock($1, $2)", &[&class, &key])
            .await
            .unwrap();
    }
    // three taken: the push takes the fourth and does not wait
    let (s, res) = tokio::time::timeout(
        Duration::from_secs(10),
        b.post("/api/v1/push", &json!({"items": [item(&q, "p", "a")]})),
    )
    .await
    .expect("a push with a free slot does not wait");
    assert_eq!(
        (s, statuses(res.as_array().unwrap())),
        (StatusCode::CREATED, vec!["queued".to_owned()])
    );
    // all four taken: the push gives the optimistic way up and decides,
    // which waits for every slot
    holder
        .execute("SELECT pg_advisory_lock(21027, $1)", &[&key])
        .await
        .unwrap();
    let b = Arc::new(b);
    let waiting = {
        let (b, q) = (Arc::clone(&b), q.clone());
        tokio::spawn(async move {
            b.post("/api/v1/push", &json!({"items": [item(&q, "p", "b")]}))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        !waiting.is_finished(),
        "the deciding push waits for the slots"
    );
    assert_eq!(stored(&db, &q).await, 1);
    holder
        .execute("SELECT pg_advisory_unlock_all()", &[])
        .await
        .unwrap();
    let (s, res) = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the push goes on once the slots are free")
        .unwrap();
    assert_eq!(
        (s, statuses(res.as_array().unwrap())),
        (StatusCode::CREATED, vec!["queued".to_owned()])
    );
    assert_eq!(stored(&db, &q).await, 2);
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
