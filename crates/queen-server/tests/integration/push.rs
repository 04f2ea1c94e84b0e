//! `POST /api/v1/push` (http-api.md §3.2, §5.11).

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::*;

const QUEUED_KEYS: [&str; 7] = [
    "index",
    "transaction_id",
    "status",
    "message_id",
    "partition_id",
    "trace_id",
    "queueName",
];
const DUPLICATE_KEYS: [&str; 5] = [
    "index",
    "transaction_id",
    "status",
    "message_id",
    "queueName",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_answers_201_with_a_bare_array_of_exact_items() {
    let (db, b) = setup().await;
    let queue = format!("{}.invoice.x", unique("billing"));
    let trace = uuid::Uuid::now_v7().to_string();
    let results = push_items(
        &b,
        json!([
            { "queue": queue, "partition": "cust-42", "payload": { "orderId": 1, "amount": 12.5 },
              "transactionId": "push-exact-1", "traceId": trace },
            { "queue": queue, "payload": null, "transactionId": "push-exact-2" },
            { "queue": queue, "payload": "text" }
        ]),
    )
    .await;

    for (i, r) in results.iter().enumerate() {
        assert_keys(r, &QUEUED_KEYS);
        assert_eq!(r["index"], i);
        assert_eq!(r["status"], "queued");
        assert_eq!(r["queueName"], queue.as_str());
        assert!(uuid::Uuid::parse_str(r["message_id"].as_str().expect("message_id")).is_ok());
        assert!(uuid::Uuid::parse_str(r["partition_id"].as_str().expect("partition_id")).is_ok());
    }
    assert_eq!(results[0]["transaction_id"], "push-exact-1");
    assert_eq!(results[0]["trace_id"], trace.as_str());
    assert_eq!(results[1]["transaction_id"], "push-exact-2");
    assert_eq!(results[1]["trace_id"], Value::Null);
    // an absent transactionId gets a generated one
    let generated = results[2]["transaction_id"].as_str().expect("generated id");
    assert!(!generated.is_empty());
    // items 1 and 2 share the Default partition, item 0 has its own
    assert_eq!(results[1]["partition_id"], results[2]["partition_id"]);
    assert_ne!(results[0]["partition_id"], results[1]["partition_id"]);
    // message ids are distinct UUID v7, increasing in push order
    let ids: Vec<uuid::Uuid> = results
        .iter()
        .map(|r| uuid::Uuid::parse_str(r["message_id"].as_str().expect("id")).expect("uuid"))
        .collect();
    assert!(ids.iter().all(|u| u.get_version_num() == 7), "{ids:?}");
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");

    // the queue and both partitions were created on the fly
    let client = db.client().await.expect("db client");
    let row = client
        .query_one(
            "SELECT namespace, task FROM queen.queues WHERE name = $1",
            &[&queue],
        )
        .await
        .expect("auto-created queue");
    assert_eq!(
        row.get::<_, String>(0),
        queue.split('.').next().expect("ns")
    );
    assert_eq!(row.get::<_, String>(1), "invoice");
    let p42 = partition_id(&client, &queue, "cust-42").await;
    assert_eq!(results[0]["partition_id"], p42.to_string());
    let pdef = partition_id(&client, &queue, "Default").await;
    assert_eq!(results[1]["partition_id"], pdef.to_string());

    // payloads are delivered as pushed
    let body = pop_ok(&b, &pop_path(&queue, Some("cust-42"), "")).await;
    assert_eq!(
        messages(&body)[0]["data"],
        json!({ "orderId": 1, "amount": 12.5 })
    );
    let body = pop_ok(&b, &pop_path(&queue, Some("Default"), "batch=10")).await;
    let data: Vec<Value> = messages(&body).iter().map(|m| m["data"].clone()).collect();
    assert_eq!(data, vec![Value::Null, json!("text")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_of_no_items_answers_201_empty_array() {
    let (db, b) = setup().await;
    let (status, body) = b.post("/api/v1/push", &json!({ "items": [] })).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(body, json!([]));
    let client = db.client().await.expect("db client");
    assert_eq!(count(&client, "SELECT count(*) FROM queen.queues").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_transaction_id_is_a_duplicate_of_the_original() {
    let (db, b) = setup().await;
    let queue = unique("dedup");
    let first = push_one(&b, &queue, "p1", json!({ "v": 1 }), "dup-tx").await;

    let again = push_items(
        &b,
        json!([{ "queue": queue, "partition": "p1", "payload": { "v": 2 }, "transactionId": "dup-tx" }]),
    )
    .await;
    assert_keys(&again[0], &DUPLICATE_KEYS);
    assert_eq!(again[0]["status"], "duplicate");
    assert_eq!(again[0]["index"], 0);
    assert_eq!(again[0]["transaction_id"], "dup-tx");
    assert_eq!(again[0]["queueName"], queue.as_str());
    assert_eq!(again[0]["message_id"], first["message_id"]);

    // nothing new stored; the original payload is what consumers get
    let client = db.client().await.expect("db client");
    assert_eq!(
        count(&client, "SELECT count(*) FROM queen.message_keys").await,
        1
    );
    let body = pop_ok(&b, &pop_path(&queue, None, "batch=10")).await;
    let msgs = messages(&body);
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0]["data"], json!({ "v": 1 }));
    assert_eq!(msgs[0]["id"], first["message_id"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeats_inside_one_request_keep_the_first() {
    let (db, b) = setup().await;
    let queue = unique("dedup-req");
    let results = push_items(
        &b,
        json!([
            { "queue": queue, "payload": "first", "transactionId": "same" },
            { "queue": queue, "payload": "other", "transactionId": "other" },
            { "queue": queue, "payload": "second", "transactionId": "same" }
        ]),
    )
    .await;
    assert_eq!(results[0]["status"], "queued");
    assert_eq!(results[1]["status"], "queued");
    assert_keys(&results[2], &DUPLICATE_KEYS);
    assert_eq!(results[2]["status"], "duplicate");
    assert_eq!(results[2]["index"], 2);
    assert_eq!(results[2]["transaction_id"], "same");
    assert_eq!(results[2]["message_id"], results[0]["message_id"]);

    let body = pop_ok(&b, &pop_path(&queue, None, "batch=10")).await;
    let data: Vec<Value> = messages(&body).iter().map(|m| m["data"].clone()).collect();
    assert_eq!(data, vec![json!("first"), json!("other")]);
    let client = db.client().await.expect("db client");
    assert_eq!(
        count(&client, "SELECT count(*) FROM queen.message_keys").await,
        2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_transaction_id_in_two_partitions_is_two_messages() {
    let (db, b) = setup().await;
    let queue = unique("dedup-parts");
    let other_queue = unique("dedup-parts-q2");
    let results = push_items(
        &b,
        json!([
            { "queue": queue, "partition": "a", "payload": 1, "transactionId": "shared" },
            { "queue": queue, "partition": "b", "payload": 2, "transactionId": "shared" },
            { "queue": other_queue, "partition": "a", "payload": 3, "transactionId": "shared" }
        ]),
    )
    .await;
    assert!(
        results.iter().all(|r| r["status"] == "queued"),
        "{results:?}"
    );
    assert_ne!(results[0]["message_id"], results[1]["message_id"]);
    assert_ne!(results[0]["partition_id"], results[1]["partition_id"]);
    assert_ne!(results[0]["partition_id"], results[2]["partition_id"]);
    let client = db.client().await.expect("db client");
    assert_eq!(
        count(
            &client,
            "SELECT count(*) FROM queen.message_keys WHERE transaction_id = 'shared'"
        )
        .await,
        3
    );
}

/// Many producers push the same transactionId at once into an existing queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_pushes_of_one_transaction_id_queue_exactly_one() {
    let (db, b) = setup().await;
    let queue = unique("dedup-race");
    configure(&b, &queue, json!({})).await;
    let b = Arc::new(b);
    let mut tasks = Vec::new();
    for i in 0..16 {
        let b = b.clone();
        let queue = queue.clone();
        tasks.push(tokio::spawn(async move {
            let (status, body) = b
                .post(
                    "/api/v1/push",
                    &json!({ "items": [{ "queue": queue, "partition": "hot",
                                         "payload": { "producer": i }, "transactionId": "race-tx" }] }),
                )
                .await;
            assert_eq!(status, StatusCode::CREATED, "{body}");
            body[0].clone()
        }));
    }
    let mut results = Vec::new();
    for t in tasks {
        results.push(t.await.expect("push task"));
    }
    let queued: Vec<&Value> = results.iter().filter(|r| r["status"] == "queued").collect();
    assert_eq!(queued.len(), 1, "exactly one queued: {results:?}");
    let original = &queued[0]["message_id"];
    for r in &results {
        if r["status"] != "queued" {
            assert_eq!(r["status"], "duplicate", "{r}");
            assert_eq!(&r["message_id"], original, "duplicates name the original");
        }
    }
    let client = db.client().await.expect("db client");
    assert_eq!(
        count(&client, "SELECT count(*) FROM queen.message_keys").await,
        1
    );
    assert_eq!(
        count(
            &client,
            "SELECT coalesce(sum(cardinality(message_ids)), 0)::bigint FROM queen.segments"
        )
        .await,
        1
    );
    assert_eq!(
        count(
            &client,
            "SELECT count(*) FROM queen.partitions WHERE name = 'hot'"
        )
        .await,
        1
    );
}

/// Many producers push at once to a queue that does not exist yet: every push
/// succeeds and the queue is created once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_pushes_create_the_queue_once() {
    let (db, b) = setup().await;
    let b = Arc::new(b);
    for round in 0..5 {
        let queue = unique(&format!("autocreate-{round}"));
        let mut tasks = Vec::new();
        for i in 0..12 {
            let b = b.clone();
            let queue = queue.clone();
            tasks.push(tokio::spawn(async move {
                b.post(
                    "/api/v1/push",
                    &json!({ "items": [{ "queue": queue, "partition": format!("p{}", i % 3),
                                         "payload": i, "transactionId": format!("t{i}") }] }),
                )
                .await
            }));
        }
        for t in tasks {
            let (status, body) = t.await.expect("push task");
            assert_eq!(status, StatusCode::CREATED, "round {round}: {body}");
            assert_eq!(body[0]["status"], "queued", "{body}");
        }
        let client = db.client().await.expect("db client");
        let n: i64 = client
            .query_one(
                "SELECT count(*) FROM queen.queues WHERE name = $1",
                &[&queue],
            )
            .await
            .expect("count")
            .get(0);
        assert_eq!(n, 1);
        let n: i64 = client
            .query_one(
                "SELECT count(*) FROM queen.partitions pt JOIN queen.queues q ON q.id = pt.queue_id
                 WHERE q.name = $1",
                &[&queue],
            )
            .await
            .expect("count")
            .get(0);
        assert_eq!(n, 3);
    }
}

/// Group commit: while one flight is in the air, single-message pushes wait
/// for it and leave together, and a push of 256 messages or more takes the
/// second flight slot at once. The flight in the air is held on a partition
/// row lock taken by the test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_pushes_wait_for_the_flight_in_the_air_and_a_large_one_does_not() {
    let (db, b) = setup().await;
    let b = Arc::new(b);
    let queue = unique("flights");
    push_one(&b, &queue, "held", json!(0), "first").await;

    let mut holder = db.client().await.expect("db client");
    let lock = holder.transaction().await.expect("begin");
    lock.execute(
        "SELECT 1 FROM queen.partitions WHERE name = 'held' FOR UPDATE",
        &[],
    )
    .await
    .expect("lock the partition row");

    let spawn_push = |partition: String, n: usize| {
        let (b, queue) = (b.clone(), queue.clone());
        tokio::spawn(async move {
            let items: Vec<Value> = (0..n)
                .map(|i| {
                    json!({ "queue": queue, "partition": partition, "payload": i,
                                 "transactionId": format!("{partition}-{i}") })
                })
                .collect();
            push_items(&b, Value::Array(items)).await
        })
    };
    let held = spawn_push("held".into(), 1);
    let client = db.client().await.expect("db client");
    let waiting_on_lock = "SELECT count(*) FROM pg_stat_activity
                           WHERE datname = current_database() AND wait_event_type = 'Lock'";
    while count(&client, waiting_on_lock).await == 0 {
        sleep_ms(10).await;
    }

    // a large push does not wait for the held flight
    let large = spawn_push("large".into(), 256).await.expect("large push");
    assert!(large.iter().all(|r| r["status"] == "queued"));
    assert!(!held.is_finished());

    // small ones do: nothing of theirs is written while the flight is held
    let small: Vec<_> = (0..3)
        .map(|i| spawn_push(format!("small-{i}"), 1))
        .collect();
    sleep_ms(500).await;
    assert!(small.iter().all(|t| !t.is_finished()));
    assert_eq!(
        count(
            &client,
            "SELECT count(*) FROM queen.partitions WHERE name LIKE 'small-%'"
        )
        .await,
        0
    );

    lock.commit().await.expect("release the lock");
    assert_eq!(held.await.expect("held push")[0]["status"], "queued");
    for t in small {
        assert_eq!(t.await.expect("small push")[0]["status"], "queued");
    }
    // the three waited together: one flight, one transaction
    assert_eq!(
        count(
            &client,
            "SELECT count(DISTINCT s.xmin::text) FROM queen.segments s
             JOIN queen.partitions p ON p.id = s.partition_id WHERE p.name LIKE 'small-%'"
        )
        .await,
        1
    );
}
