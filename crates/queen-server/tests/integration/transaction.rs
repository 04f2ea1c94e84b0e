//! `POST /api/v1/transaction` (§3.7): all operations commit or none.

use reqwest::StatusCode;
use serde_json::json;

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ack_and_push_commit_together() {
    let (db, b) = setup().await;
    let input = unique("tx-in");
    let output = unique("tx-out");
    push_numbered(&b, &input, "cust-1", "in", 1).await;
    let body = pop_ok(&b, &pop_path(&input, None, "consumerGroup=etl")).await;
    let msg = messages(&body)[0].clone();

    let (status, res) = b
        .post(
            "/api/v1/transaction",
            &json!({
                "operations": [
                    { "type": "ack", "transactionId": msg["transactionId"],
                      "partitionId": msg["partitionId"], "status": "completed",
                      "consumerGroup": "etl", "leaseId": msg["leaseId"] },
                    { "type": "push", "items": [
                        { "queue": output, "partition": "cust-1", "payload": { "total": 99 },
                          "transactionId": "out-1" },
                        { "queue": output, "partition": "cust-1", "transactionId": "out-2" } ] }
                ],
                "requiredLeases": [msg["leaseId"]]
            }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(res["success"], true, "{res}");
    assert!(uuid::Uuid::parse_str(res["transactionId"].as_str().expect("txid")).is_ok());
    let results = res["results"].as_array().expect("results").clone();
    assert_eq!(results.len(), 3, "{res}");
    assert_eq!(
        results[0],
        json!({ "index": 0, "type": "ack", "success": true, "transactionId": "in-0",
                "error": null, "dlq": false })
    );
    for (i, r) in results.iter().enumerate().skip(1) {
        assert_keys(
            r,
            &[
                "index",
                "type",
                "success",
                "transactionId",
                "messageId",
                "partitionId",
                "queueName",
            ],
        );
        assert_eq!(r["index"], i);
        assert_eq!(r["type"], "push");
        assert_eq!(r["success"], true);
        assert_eq!(r["transactionId"], format!("out-{i}"));
        assert_eq!(r["queueName"], output.as_str());
    }

    // the input is consumed for etl, the output is poppable with its payload
    pop_empty(&b, &pop_path(&input, None, "consumerGroup=etl")).await;
    let out = pop_ok(&b, &pop_path(&output, None, "batch=10")).await;
    let msgs = messages(&out);
    assert_eq!(txn_ids(&out), vec!["out-1", "out-2"]);
    assert_eq!(msgs[0]["data"], json!({ "total": 99 }));
    assert_eq!(
        msgs[1]["data"],
        json!({}),
        "absent payload is {{}} in a transaction"
    );
    assert_eq!(msgs[0]["id"], results[1]["messageId"]);
    assert_eq!(msgs[0]["partitionId"], results[1]["partitionId"]);

    let client = db.client().await.expect("db client");
    let pid = partition_id(&client, &input, "cust-1").await;
    assert_eq!(cursor(&client, pid, "etl").await, Some((1, false)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_operation_leaves_nothing_behind() {
    let (db, b) = setup().await;
    let input = unique("txf-in");
    let fresh = unique("txf-new");
    push_numbered(&b, &input, "Default", "in", 1).await;
    let body = pop_ok(&b, &pop_path(&input, None, "")).await;
    let msg = messages(&body)[0].clone();

    let (status, res) = b
        .post(
            "/api/v1/transaction",
            &json!({ "operations": [
                { "type": "ack", "transactionId": msg["transactionId"],
                  "partitionId": msg["partitionId"], "leaseId": msg["leaseId"] },
                { "type": "push", "items": [ { "queue": fresh, "payload": 1, "transactionId": "never" } ] },
                { "type": "ack", "transactionId": "no-such-message", "partitionId": msg["partitionId"] }
            ] }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(res["success"], false, "{res}");
    assert_eq!(res["error"], "ACK operation failed: Message not found");
    assert!(res["transactionId"].is_string());
    let results = res["results"].as_array().expect("results");
    assert_eq!(
        results.len(),
        3,
        "entries so far plus the failing one: {res}"
    );
    assert_eq!(results[2]["success"], false);
    assert_eq!(results[2]["index"], 2);

    // nothing was applied
    let client = db.client().await.expect("db client");
    let n: i64 = client
        .query_one(
            "SELECT count(*) FROM queen.queues WHERE name = $1",
            &[&fresh],
        )
        .await
        .expect("count")
        .get(0);
    assert_eq!(n, 0, "no queue row for the rolled-back push");
    assert_eq!(
        count(
            &client,
            "SELECT count(*) FROM queen.message_keys WHERE transaction_id = 'never'"
        )
        .await,
        0
    );
    pop_empty(&b, &pop_path(&fresh, None, "")).await;
    let pid = partition_id(&client, &input, "Default").await;
    assert_eq!(
        cursor(&client, pid, "__QUEUE_MODE__").await,
        Some((0, true)),
        "the ack did not move the cursor; the lease still holds"
    );
    // the lease is intact: the consumer can still ack
    let r = ack(&b, &msg, "completed", None).await;
    assert_eq!(r["success"], true, "{r}");

    // a push of an existing transactionId aborts the transaction too (no dedup)
    let (status, res) = b
        .post(
            "/api/v1/transaction",
            &json!({ "operations": [
                { "type": "push", "items": [ { "queue": fresh, "payload": 1, "transactionId": "t-new" } ] },
                { "type": "push", "items": [ { "queue": input, "payload": 2, "transactionId": "in-0" } ] }
            ] }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(res["success"], false, "{res}");
    assert!(
        res["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{res}"
    );
    let n: i64 = client
        .query_one(
            "SELECT count(*) FROM queen.queues WHERE name = $1",
            &[&fresh],
        )
        .await
        .expect("count")
        .get(0);
    assert_eq!(n, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_kv_and_timers_riders_refuse_the_whole_transaction() {
    let (db, b) = setup().await;
    let queue = unique("tx-kv");
    let op = json!([{ "type": "push", "items": [ { "queue": queue, "payload": 1 } ] }]);
    for rider in ["kv", "timers"] {
        let (status, res) = b
            .post(
                "/api/v1/transaction",
                &json!({ "operations": op, rider: [ { "op": "set", "key": "k" } ] }),
            )
            .await;
        let e = assert_error(status, &res, StatusCode::BAD_REQUEST);
        let code = if rider == "kv" {
            "kv_bad_request"
        } else {
            "timers_bad_request"
        };
        assert_eq!(e, code, "{res}");
        let prefix = if rider == "kv" { "kv_" } else { "timers_" };
        assert!(res["reason"].as_str().unwrap().starts_with(prefix), "{res}");
    }
    let client = db.client().await.expect("db client");
    assert_eq!(count(&client, "SELECT count(*) FROM queen.queues").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_inside_a_transaction_dead_letters_at_once() {
    let (db, b) = setup().await;
    let queue = unique("tx-failed");
    configure(&b, &queue, json!({ "retryLimit": 5 })).await;
    push_numbered(&b, &queue, "Default", "tf", 2).await;
    let body = pop_ok(&b, &pop_path(&queue, None, "")).await;
    let msg = messages(&body)[0].clone();
    let (status, res) = b
        .post(
            "/api/v1/transaction",
            &json!({ "operations": [
                { "type": "ack", "transactionId": msg["transactionId"], "partitionId": msg["partitionId"],
                  "leaseId": msg["leaseId"], "status": "failed", "error": "bad input" }
            ] }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(res["success"], true, "{res}");
    assert_eq!(res["results"][0]["dlq"], true, "{res}");

    let client = db.client().await.expect("db client");
    let row = client
        .query_one(
            "SELECT transaction_id, error_message, retry_count FROM queen.dead_letters",
            &[],
        )
        .await
        .expect("one DLQ row");
    assert_eq!(row.get::<_, String>(0), "tf-0");
    assert_eq!(
        row.get::<_, Option<String>>(1).as_deref(),
        Some("bad input")
    );
    assert_eq!(row.get::<_, i32>(2), 0);
    let pid = partition_id(&client, &queue, "Default").await;
    assert_eq!(
        cursor(&client, pid, "__QUEUE_MODE__").await,
        Some((1, false))
    );
    let next = pop_ok(&b, &pop_path(&queue, None, "")).await;
    assert_eq!(txn_ids(&next), vec!["tf-1"]);

    // an unknown status aborts the transaction
    let (status, res) = b
        .post(
            "/api/v1/transaction",
            &json!({ "operations": [
                { "type": "ack", "transactionId": "tf-1", "partitionId": msg["partitionId"], "status": "retry" }
            ] }),
        )
        .await;
    assert!(
        (status == StatusCode::OK && res["success"] == false) || status == StatusCode::BAD_REQUEST,
        "{status} {res}"
    );
    assert!(res["error"].is_string(), "{res}");
    assert_eq!(
        cursor(&client, pid, "__QUEUE_MODE__").await,
        Some((1, true))
    );
}

/// Two transactions push into a queue that does not exist yet; the first is held
/// (by a test lock on the segments table) after creating the queue row, so the
/// second one waits on that row. Both must commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_transactions_auto_create_one_queue() {
    let (db, b) = setup().await;
    let b = std::sync::Arc::new(b);
    let queue = unique("tx-race");
    let blocker = db.client().await.expect("db client");
    blocker
        .batch_execute("BEGIN; LOCK TABLE queen.segments IN EXCLUSIVE MODE")
        .await
        .expect("lock");
    let mut tasks = Vec::new();
    for i in 0..2 {
        let b = b.clone();
        let queue = queue.clone();
        tasks.push(tokio::spawn(async move {
            b.post(
                "/api/v1/transaction",
                &json!({ "operations": [
                    { "type": "push", "items": [
                        { "queue": queue, "partition": format!("p{i}"), "payload": i,
                          "transactionId": format!("t{i}") } ] }
                ] }),
            )
            .await
        }));
        sleep_ms(300).await;
    }
    blocker.batch_execute("COMMIT").await.expect("unlock");
    for t in tasks {
        let (status, res) = t.await.expect("task");
        assert_eq!(status, StatusCode::OK, "{res}");
        assert_eq!(res["success"], true, "{res}");
    }
    let client = db.client().await.expect("db client");
    assert_eq!(count(&client, "SELECT count(*) FROM queen.queues").await, 1);
    assert_eq!(
        count(&client, "SELECT count(*) FROM queen.message_keys").await,
        2
    );
}
