//! `POST /api/v1/ack` and `/ack/batch`, retries and DLQ (§3.5, §3.6, §5.5, §5.6).

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::*;

const ACK_KEYS: [&str; 8] = [
    "index",
    "transactionId",
    "success",
    "error",
    "queueName",
    "partitionName",
    "leaseReleased",
    "dlq",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_ack_answers_a_one_element_array() {
    let (db, b) = setup().await;
    let queue = unique("ack1");
    push_numbered(&b, &queue, "part-x", "a1", 2).await;
    let body = pop_ok(&b, &pop_path(&queue, None, "")).await;
    let msg = messages(&body)[0].clone();

    let r = ack(&b, &msg, "completed", None).await;
    assert_keys(&r, &ACK_KEYS);
    assert_eq!(
        r,
        json!({ "index": 0, "transactionId": "a1-0", "success": true, "error": null,
                "queueName": queue, "partitionName": "part-x", "leaseReleased": true, "dlq": false })
    );
    let client = db.client().await.expect("db client");
    let pid = partition_id(&client, &queue, "part-x").await;
    assert_eq!(
        cursor(&client, pid, "__QUEUE_MODE__").await,
        Some((1, false))
    );

    // acking again is idempotent; "success" is "completed"
    let again = ack(&b, &msg, "success", None).await;
    assert_eq!(again["success"], true, "{again}");
    assert_eq!(again["leaseReleased"], false, "{again}");

    let next = pop_ok(&b, &pop_path(&queue, None, "")).await;
    assert_eq!(txn_ids(&next), vec!["a1-1"]);
    let r = ack(&b, &messages(&next)[0], "success", None).await;
    assert_eq!(r["success"], true, "{r}");
    pop_empty(&b, &pop_path(&queue, None, "")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_ack_results_follow_request_order() {
    let (db, b) = setup().await;
    let queue = unique("ackb");
    push_numbered(&b, &queue, "Default", "ab", 3).await;
    let body = pop_ok(&b, &pop_path(&queue, None, "batch=3&consumerGroup=grp")).await;
    let msgs = messages(&body);
    assert_eq!(msgs.len(), 3);

    // request order: ab-2, ab-0, ab-1 (applied in message order)
    let acks: Vec<Value> = [2, 0, 1]
        .iter()
        .map(|&i| {
            let mut a = ack_item(&msgs[i], "completed", None);
            // a per-item group is overridden by the top-level one
            a["consumerGroup"] = json!("ignored-group");
            a
        })
        .collect();
    let (status, res) = b
        .post(
            "/api/v1/ack/batch",
            &json!({ "consumerGroup": "grp", "acknowledgments": acks }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let res = res.as_array().expect("array").clone();
    assert_eq!(res.len(), 3);
    for (i, (r, t)) in res.iter().zip(["ab-2", "ab-0", "ab-1"]).enumerate() {
        assert_keys(r, &ACK_KEYS);
        assert_eq!(r["index"], i);
        assert_eq!(r["transactionId"], t);
        assert_eq!(r["success"], true, "{r}");
        assert_eq!(r["error"], Value::Null);
        assert_eq!(r["queueName"], queue.as_str());
        assert_eq!(r["partitionName"], "Default");
        assert_eq!(r["dlq"], false);
    }
    // only the last message of the batch releases the lease
    let released: Vec<bool> = res.iter().map(|r| r["leaseReleased"] == true).collect();
    assert_eq!(released, vec![true, false, false]);

    let client = db.client().await.expect("db client");
    let pid = partition_id(&client, &queue, "Default").await;
    assert_eq!(cursor(&client, pid, "grp").await, Some((3, false)));
    assert_eq!(cursor(&client, pid, "ignored-group").await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acking_an_unknown_message_fails_in_the_body() {
    let (db, b) = setup().await;
    let queue = unique("ack-unknown");
    let pushed = push_one(&b, &queue, "Default", json!(1), "known").await;
    let pid = pushed["partition_id"].as_str().expect("pid").to_owned();

    let (status, res) = b
        .post(
            "/api/v1/ack",
            &json!({ "transactionId": "nope", "partitionId": pid }),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        res,
        json!([{ "index": 0, "transactionId": "nope", "success": false,
                 "error": "Message not found", "queueName": queue, "partitionName": "Default",
                 "leaseReleased": false, "dlq": false }])
    );

    // unknown partition: names are null
    let other = uuid::Uuid::new_v4().to_string();
    let (status, res) = b
        .post(
            "/api/v1/ack/batch",
            &json!({ "acknowledgments": [
                { "transactionId": "known", "partitionId": other },
                { "transactionId": "nope", "partitionId": pid }
            ] }),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let res = res.as_array().expect("array").clone();
    assert_eq!(res.len(), 2);
    assert_keys(&res[0], &ACK_KEYS);
    assert_eq!(res[0]["index"], 0);
    assert_eq!(res[0]["success"], false);
    assert_eq!(res[0]["error"], "Message not found");
    assert_eq!(res[0]["queueName"], Value::Null);
    assert_eq!(res[0]["partitionName"], Value::Null);
    assert_eq!(res[1]["index"], 1);
    assert_eq!(res[1]["error"], "Message not found");

    let client = db.client().await.expect("db client");
    assert_eq!(
        count(&client, "SELECT count(*) FROM queen.log_consumers").await,
        0,
        "failed acks create no cursor"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_acks_retry_n_times_then_dead_letter() {
    let (db, b) = setup().await;
    let queue = unique("retry");
    configure(&b, &queue, json!({ "retryLimit": 2, "leaseTime": 30 })).await;
    push_numbered(&b, &queue, "Default", "r", 2).await;

    let mut deliveries = 0;
    let mut first_id = Value::Null;
    for attempt in 0..2 {
        let body = pop_ok(&b, &pop_path(&queue, None, "")).await;
        assert_eq!(txn_ids(&body), vec!["r-0"], "attempt {attempt}");
        first_id = messages(&body)[0]["id"].clone();
        deliveries += 1;
        let r = ack(
            &b,
            &messages(&body)[0],
            "failed",
            Some(&format!("boom-{attempt}")),
        )
        .await;
        assert_eq!(r["success"], true, "{r}");
        assert_eq!(r["error"], Value::Null);
        assert_eq!(r["dlq"], false, "attempt {attempt}: {r}");
        assert_eq!(r["leaseReleased"], true, "{r}");
    }
    let client = db.client().await.expect("db client");
    assert_eq!(
        count(&client, "SELECT count(*) FROM queen.dead_letters").await,
        0
    );

    // the (N+1)-th failure dead-letters
    let body = pop_ok(&b, &pop_path(&queue, None, "")).await;
    assert_eq!(txn_ids(&body), vec!["r-0"]);
    deliveries += 1;
    let r = ack(&b, &messages(&body)[0], "failed", Some("final straw")).await;
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["dlq"], true, "{r}");
    assert_eq!(r["leaseReleased"], true, "{r}");
    assert_eq!(deliveries, 3, "retryLimit 2 = 2 redeliveries");

    let row = client
        .query_one(
            "SELECT transaction_id, error_message, consumer_group, retry_count, message_id::text, payload
             FROM queen.dead_letters",
            &[],
        )
        .await
        .expect("one DLQ row");
    assert_eq!(row.get::<_, String>(0), "r-0");
    assert_eq!(
        row.get::<_, Option<String>>(1).as_deref(),
        Some("final straw")
    );
    assert_eq!(row.get::<_, String>(2), "__QUEUE_MODE__");
    assert_eq!(row.get::<_, i32>(3), 2);
    assert_eq!(Value::String(row.get::<_, String>(4)), first_id);
    let payload: Value = serde_json::from_str(&row.get::<_, String>(5)).expect("payload JSON");
    assert_eq!(payload, json!({ "n": 0 }));

    // the next message flows; its first failure is a retry again (counter reset)
    let body = pop_ok(&b, &pop_path(&queue, None, "")).await;
    assert_eq!(txn_ids(&body), vec!["r-1"]);
    let r = ack(&b, &messages(&body)[0], "failed", None).await;
    assert_eq!(r["dlq"], false, "{r}");
    let body = pop_ok(&b, &pop_path(&queue, None, "")).await;
    assert_eq!(txn_ids(&body), vec!["r-1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_dlq_dead_letters_at_once() {
    let (db, b) = setup().await;
    let queue = unique("dlq-now");
    configure(&b, &queue, json!({ "retryLimit": 5 })).await;
    push_numbered(&b, &queue, "Default", "d", 2).await;
    let body = pop_ok(&b, &pop_path(&queue, None, "consumerGroup=dlq-group")).await;
    let r = ack(&b, &messages(&body)[0], "dlq", Some("poison")).await;
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["dlq"], true, "{r}");
    assert_eq!(r["leaseReleased"], true, "{r}");

    let client = db.client().await.expect("db client");
    let row = client
        .query_one(
            "SELECT transaction_id, error_message, consumer_group, retry_count FROM queen.dead_letters",
            &[],
        )
        .await
        .expect("one DLQ row");
    assert_eq!(row.get::<_, String>(0), "d-0");
    assert_eq!(row.get::<_, Option<String>>(1).as_deref(), Some("poison"));
    assert_eq!(row.get::<_, String>(2), "dlq-group");
    assert_eq!(row.get::<_, i32>(3), 0);

    let body = pop_ok(&b, &pop_path(&queue, None, "consumerGroup=dlq-group")).await;
    assert_eq!(txn_ids(&body), vec!["d-1"]);
    // the DLQ is per group: queue mode still gets d-0
    let body = pop_ok(&b, &pop_path(&queue, None, "")).await;
    assert_eq!(txn_ids(&body), vec!["d-0"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_ack_batch_answers_empty_array() {
    let (_db, b) = setup().await;
    let (status, body) = b
        .post("/api/v1/ack/batch", &json!({ "acknowledgments": [] }))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, json!([]));
}

/// A failed ack inside a batch releases the lease: later items of that batch
/// (with its lease id) are refused, and the batch is redelivered from the
/// failed message on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_ack_in_a_batch_redelivers_from_the_failed_message() {
    let (db, b) = setup().await;
    let queue = unique("ack-mixed");
    push_numbered(&b, &queue, "Default", "m", 3).await;
    let body = pop_ok(&b, &pop_path(&queue, None, "batch=3")).await;
    let msgs = messages(&body);
    let acks = vec![
        ack_item(&msgs[0], "completed", None),
        ack_item(&msgs[1], "failed", Some("nope")),
        ack_item(&msgs[2], "completed", None),
    ];
    let (status, res) = b
        .post("/api/v1/ack/batch", &json!({ "acknowledgments": acks }))
        .await;
    assert_eq!(status, StatusCode::OK);
    let res = res.as_array().expect("array").clone();
    assert_eq!(res[0]["success"], true, "{res:?}");
    assert_eq!(res[0]["leaseReleased"], false, "{res:?}");
    assert_eq!(res[1]["success"], true, "{res:?}");
    assert_eq!(res[1]["dlq"], false, "{res:?}");
    assert_eq!(res[1]["leaseReleased"], true, "{res:?}");
    assert_eq!(res[2]["success"], false, "{res:?}");
    assert_eq!(res[2]["error"], "Invalid or expired lease", "{res:?}");

    let client = db.client().await.expect("db client");
    let pid = partition_id(&client, &queue, "Default").await;
    assert_eq!(
        cursor(&client, pid, "__QUEUE_MODE__").await,
        Some((1, false))
    );
    let retries: i32 = client
        .query_one("SELECT retry_count FROM queen.log_consumers", &[])
        .await
        .expect("row")
        .get(0);
    assert_eq!(retries, 1);

    let again = pop_ok(&b, &pop_path(&queue, None, "batch=10")).await;
    assert_eq!(txn_ids(&again), vec!["m-1", "m-2"]);
}

/// Batches of `completed` acks on one partition take a fast path in
/// `queen.ack_batch` (one cursor update); its outcomes must equal one-by-one acks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_completed_acks_match_one_by_one_semantics() {
    let (db, b) = setup().await;
    let q = unique("fast");
    push_numbered(&b, &q, "p", "m", 5).await;
    let body = pop_ok(&b, &pop_path(&q, None, "batch=5")).await;
    let msgs = messages(&body);
    let batch = |idx: &[usize], lease: Option<&str>| {
        let items: Vec<Value> = idx
            .iter()
            .map(|&i| {
                let mut a = ack_item(&msgs[i], "completed", None);
                if let Some(l) = lease {
                    a["leaseId"] = json!(l);
                }
                a
            })
            .collect();
        json!({ "consumerGroup": null, "acknowledgments": items })
    };
    let lease = body["leaseId"].as_str().unwrap().to_owned();

    // out of order, inside the lease: all succeed, the lease stays (2 more to go)
    let (_, r) = b.post("/api/v1/ack/batch", &batch(&[2, 0, 1], None)).await;
    let r = r.as_array().unwrap();
    assert!(
        r.iter()
            .all(|x| x["success"] == true && x["leaseReleased"] == false),
        "{r:?}"
    );
    let client = db.client().await.unwrap();
    let pid = partition_id(&client, &q, "p").await;
    assert_eq!(
        cursor(&client, pid, "__QUEUE_MODE__").await,
        Some((3, true))
    );

    // the rest: the highest offset releases the lease, on its own item only
    let (_, r) = b.post("/api/v1/ack/batch", &batch(&[4, 3], None)).await;
    assert_eq!(r[0]["leaseReleased"], true, "{r}");
    assert_eq!(r[1]["leaseReleased"], false, "{r}");
    assert_eq!(
        cursor(&client, pid, "__QUEUE_MODE__").await,
        Some((5, false))
    );

    // repeated with the (released) lease: idempotent successes
    let (_, r) = b
        .post("/api/v1/ack/batch", &batch(&[3, 4], Some(&lease)))
        .await;
    assert!(
        r.as_array()
            .unwrap()
            .iter()
            .all(|x| x["success"] == true && x["leaseReleased"] == false),
        "{r}"
    );
    // already committed: a success even under a lease that is not ours (a
    // retried ack whose first answer was lost)
    let other = uuid::Uuid::now_v7().to_string();
    let (_, r) = b
        .post("/api/v1/ack/batch", &batch(&[3, 4], Some(&other)))
        .await;
    assert!(
        r.as_array().unwrap().iter().all(|x| x["success"] == true),
        "{r}"
    );
    assert_eq!(
        cursor(&client, pid, "__QUEUE_MODE__").await,
        Some((5, false))
    );
    // not committed yet, under a foreign lease: refused, nothing moves
    push_numbered(&b, &q, "p", "n", 2).await;
    let body = pop_ok(&b, &pop_path(&q, None, "batch=2")).await;
    let items: Vec<Value> = messages(&body)
        .iter()
        .map(|m| {
            let mut a = ack_item(m, "completed", None);
            a["leaseId"] = json!(other);
            a
        })
        .collect();
    let (_, r) = b
        .post(
            "/api/v1/ack/batch",
            &json!({ "consumerGroup": null, "acknowledgments": items }),
        )
        .await;
    assert!(
        r.as_array()
            .unwrap()
            .iter()
            .all(|x| x["error"] == "Invalid or expired lease"),
        "{r}"
    );
    assert_eq!(
        cursor(&client, pid, "__QUEUE_MODE__").await,
        Some((5, true))
    );
    // mixed, under a foreign lease: the committed item succeeds, the other is
    // refused, and the cursor stays where the real lease's ack put it
    let real = body["leaseId"].as_str().unwrap().to_owned();
    let popped = messages(&body);
    let mut first = ack_item(&popped[0], "completed", None);
    first["leaseId"] = json!(real);
    let (_, r) = b
        .post(
            "/api/v1/ack/batch",
            &json!({ "consumerGroup": null, "acknowledgments": [first] }),
        )
        .await;
    assert_eq!(r[0]["success"], true, "{r}");
    let (_, r) = b
        .post(
            "/api/v1/ack/batch",
            &json!({ "consumerGroup": null, "acknowledgments": items }),
        )
        .await;
    assert_eq!(r[0]["success"], true, "{r}");
    assert_eq!(r[1]["success"], false, "{r}");
    assert_eq!(r[1]["error"], "Invalid or expired lease", "{r}");
    assert_eq!(r[0]["leaseReleased"], false, "{r}");
    assert_eq!(
        cursor(&client, pid, "__QUEUE_MODE__").await,
        Some((6, true))
    );
}

/// An ack of 32 or more messages of one partition is resolved against the
/// group's leased span by position (V10): the k-th item of the partition's run
/// takes the span's k-th offset when the transactionIds agree. Any other
/// order falls back to the per-message key lookup.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_ack_is_matched_against_the_leased_span_by_position() {
    let (db, b) = setup().await;
    let q = unique("span");
    push_numbered(&b, &q, "p", "m", 40).await;
    push_numbered(&b, &q, "p2", "x", 1).await;
    let span = pop_ok(&b, &pop_path(&q, Some("p"), "batch=40")).await;
    let other = pop_ok(&b, &pop_path(&q, Some("p2"), "batch=1")).await;
    let client = db.client().await.unwrap();
    let pid = partition_id(&client, &q, "p").await;
    // without its key rows, a message of p can only be found through the span
    client
        .execute(
            "DELETE FROM queen.message_keys WHERE partition_id = $1",
            &[&pid],
        )
        .await
        .unwrap();
    let (span, other) = (messages(&span), messages(&other));
    let ack_all = |msgs: Vec<&Value>| {
        let items: Vec<Value> = msgs
            .into_iter()
            .map(|m| ack_item(m, "completed", None))
            .collect();
        json!({ "consumerGroup": null, "acknowledgments": items })
    };

    // p's run starts at the second item: positions count within the run
    let in_order: Vec<&Value> = other.iter().chain(span.iter()).collect();
    let (s, r) = b.post("/api/v1/ack/batch", &ack_all(in_order)).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let r = r.as_array().unwrap();
    assert_eq!(r.len(), 41);
    assert!(r.iter().all(|x| x["success"] == true), "{r:?}");
    assert_eq!(r[40]["leaseReleased"], true, "{r:?}");
    assert_eq!(
        cursor(&client, pid, "__QUEUE_MODE__").await,
        Some((40, false))
    );

    // another order misses the positions; the key rows still resolve it
    push_numbered(&b, &q, "p", "n", 40).await;
    let span = pop_ok(&b, &pop_path(&q, Some("p"), "batch=40")).await;
    let span = messages(&span);
    let reversed: Vec<&Value> = span.iter().rev().collect();
    let (_, r) = b.post("/api/v1/ack/batch", &ack_all(reversed)).await;
    let r = r.as_array().unwrap();
    assert!(r.iter().all(|x| x["success"] == true), "{r:?}");
    assert_eq!(r[0]["leaseReleased"], true, "{r:?}");
    assert_eq!(
        cursor(&client, pid, "__QUEUE_MODE__").await,
        Some((80, false))
    );
}
