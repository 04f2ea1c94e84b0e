//! `retryDelay` with `retryBackoff` and `retryDelayMax` (issue 38, item 3):
//! after a failed delivery a partition rests before its next delivery to
//! that group, and every popped message says its delivery attempt.
//! Times are read from the database clock.

use std::time::Duration;

use chrono::{DateTime, Utc};
use queen_testkit::TestBroker;
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::*;

/// The database clock, now.
async fn db_now(client: &tokio_postgres::Client) -> DateTime<Utc> {
    client
        .query_one("SELECT clock_timestamp()", &[])
        .await
        .unwrap()
        .get(0)
}

/// Pops `path` (no wait) every 20 ms until it delivers, for at most
/// `limit`; returns the body and the database time right after it came.
async fn pop_until(
    b: &TestBroker,
    client: &tokio_postgres::Client,
    path: &str,
    limit: Duration,
) -> (Value, DateTime<Utc>) {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let (status, body) = b.get(path).await;
        if status == StatusCode::OK {
            assert_eq!(body["success"], true, "{body}");
            return (body, db_now(client).await);
        }
        assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
        assert!(
            tokio::time::Instant::now() < deadline,
            "{path} delivered nothing within {limit:?}"
        );
        sleep_ms(20).await;
    }
}

/// The `deliveryAttempt` of each message of a pop body.
fn attempts(body: &Value) -> Vec<i64> {
    messages(body)
        .iter()
        .map(|m| m["deliveryAttempt"].as_i64().expect("deliveryAttempt"))
        .collect()
}

fn millis(d: chrono::TimeDelta) -> i64 {
    d.num_milliseconds()
}

/// Clock readings are microseconds apart at worst; this is their slack.
const SLACK_MS: i64 = 2;

/// Upper bound for a redelivery after its delay ends: generous for a loaded
/// machine, far below what a missed hold would take (it would come at once,
/// or never).
const LATE_MS: i64 = 2_500;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_delay_grows_by_the_backoff_up_to_its_cap() {
    let (db, b) = setup().await;
    let client = db.client().await.unwrap();
    let queue = unique("retry-backoff");
    let res = configure(
        &b,
        &queue,
        json!({ "retryDelay": 300, "retryBackoff": 2, "retryDelayMax": 700, "retryLimit": 10 }),
    )
    .await;
    assert_eq!(res["options"]["retryDelay"], 300, "{res}");
    assert_eq!(res["options"]["retryBackoff"], 2.0, "{res}");
    assert_eq!(res["options"]["retryDelayMax"], 700, "{res}");
    push_one(&b, &queue, "p", json!({ "n": 0 }), "m-0").await;
    let path = pop_path(&queue, None, "consumerGroup=g&batch=5");

    // delivery n failed → the next waits 300 · 2^(n-1), at most 700
    let expected = [300, 600, 700, 700];
    let (mut body, _) = pop_until(&b, &client, &path, Duration::from_secs(5)).await;
    for (n, wait) in expected.into_iter().enumerate() {
        assert_eq!(txn_ids(&body), ["m-0"]);
        assert_eq!(attempts(&body), [n as i64 + 1], "{body}");
        let failed_at = db_now(&client).await;
        let r = ack(&b, &messages(&body)[0], "failed", Some("boom")).await;
        assert_eq!(r["success"], true, "{r}");
        // resting: nothing is delivered right away
        pop_empty(&b, &path).await;
        let (next, at) = pop_until(&b, &client, &path, Duration::from_secs(5)).await;
        let took = millis(at - failed_at);
        assert!(
            took + SLACK_MS >= wait,
            "attempt {} came {took} ms after the failure, before its {wait} ms",
            n + 2
        );
        assert!(
            took < wait + LATE_MS,
            "attempt {} came {took} ms late",
            n + 2
        );
        body = next;
    }
    assert_eq!(attempts(&body), [5]);
    ack_all_completed(&b, &body, Some("g")).await;
    pop_empty(&b, &path).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_resting_partition_keeps_its_order_while_another_is_served() {
    let (db, b) = setup().await;
    let client = db.client().await.unwrap();
    let queue = unique("retry-fifo");
    configure(&b, &queue, json!({ "retryDelay": 1500 })).await;
    push_numbered(&b, &queue, "a", "a", 3).await;
    let path = pop_path(&queue, None, "consumerGroup=g&batch=10");
    let body = pop_ok(&b, &path).await;
    assert_eq!(txn_ids(&body), ["a-0", "a-1", "a-2"]);
    assert_eq!(attempts(&body), [1, 1, 1]);
    let failed_at = db_now(&client).await;
    ack(&b, &messages(&body)[0], "failed", None).await;

    // during the hold: partition b is served, nothing of a overtakes a-0
    push_numbered(&b, &queue, "b", "b", 2).await;
    let body = pop_ok(&b, &path).await;
    assert_eq!(txn_ids(&body), ["b-0", "b-1"]);
    assert_eq!(attempts(&body), [1, 1]);
    ack_all_completed(&b, &body, Some("g")).await;
    let served_at = db_now(&client).await;
    assert!(
        millis(served_at - failed_at) < 1500,
        "b was served during a's hold"
    );
    pop_empty(&b, &path).await;
    let body = pop_ok(&b, &pop_path(&queue, Some("a"), "consumerGroup=h&batch=10")).await;
    assert_eq!(
        txn_ids(&body),
        ["a-0", "a-1", "a-2"],
        "another group is not held"
    );
    assert_eq!(attempts(&body), [1, 1, 1], "nor counted");
    pop_empty(&b, &pop_path(&queue, Some("a"), "consumerGroup=g")).await;

    // after it: a from its head, in order, each on its second delivery
    let (body, at) = pop_until(&b, &client, &path, Duration::from_secs(5)).await;
    assert!(millis(at - failed_at) + SLACK_MS >= 1500);
    assert_eq!(txn_ids(&body), ["a-0", "a-1", "a-2"]);
    assert_eq!(attempts(&body), [2, 2, 2]);
    ack_all_completed(&b, &body, Some("g")).await;
    // the counts belong to what failed: a new message starts at 1
    push_numbered(&b, &queue, "a", "late", 1).await;
    let body = pop_ok(&b, &path).await;
    assert_eq!(
        (txn_ids(&body), attempts(&body)),
        (vec!["late-0".into()], vec![1])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_ack_inside_a_transaction_rests_the_partition() {
    let (db, b) = setup().await;
    let client = db.client().await.unwrap();
    let queue = unique("retry-tx");
    configure(&b, &queue, json!({ "retryDelay": 800 })).await;
    push_numbered(&b, &queue, "p", "t", 2).await;
    let path = pop_path(&queue, None, "consumerGroup=g&batch=1");
    let body = pop_ok(&b, &path).await;
    let msg = &messages(&body)[0];
    let failed_at = db_now(&client).await;
    let (code, res) = b
        .post(
            "/api/v1/transaction",
            &json!({ "operations": [
                { "type": "ack", "transactionId": msg["transactionId"],
                  "partitionId": msg["partitionId"], "status": "failed",
                  "consumerGroup": "g", "leaseId": msg["leaseId"] } ] }),
        )
        .await;
    assert_eq!(code, StatusCode::OK, "{res}");
    assert_eq!(res["success"], true, "{res}");
    // inside a transaction `failed` dead-letters at once (the contract) ...
    assert_eq!(
        count(
            &client,
            "SELECT count(*) FROM queen.dead_letters WHERE transaction_id = 't-0'"
        )
        .await,
        1
    );
    // ... and the partition rests before its next delivery
    pop_empty(&b, &path).await;
    let (body, at) = pop_until(&b, &client, &path, Duration::from_secs(5)).await;
    let took = millis(at - failed_at);
    assert!(
        took + SLACK_MS >= 800,
        "t-1 came {took} ms after the failure"
    );
    assert!(took < 800 + LATE_MS, "t-1 came {took} ms late");
    assert_eq!(
        (txn_ids(&body), attempts(&body)),
        (vec!["t-1".into()], vec![1])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_lease_rests_the_partition_from_its_expiry() {
    let (db, b) = setup().await;
    let client = db.client().await.unwrap();
    let queue = unique("retry-expiry");
    configure(&b, &queue, json!({ "retryDelay": 1000, "leaseTime": 1 })).await;
    push_numbered(&b, &queue, "p", "e", 2).await;
    let path = pop_path(&queue, None, "consumerGroup=g&batch=10");
    let body = pop_ok(&b, &path).await;
    assert_eq!(attempts(&body), [1, 1]);
    let pid = partition_id(&client, &queue, "p").await;
    let expires: DateTime<Utc> = client
        .query_one(
            "SELECT lease_expires_at FROM queen.log_consumers
             WHERE partition_id = $1 AND consumer_group = 'g'",
            &[&pid],
        )
        .await
        .unwrap()
        .get(0);
    // never acked: the lease runs out, then the partition rests 1 s more
    let (body, at) = pop_until(&b, &client, &path, Duration::from_secs(6)).await;
    let took = millis(at - expires);
    assert!(
        took + SLACK_MS >= 1000,
        "redelivered {took} ms after the expiry"
    );
    assert!(
        took < 1000 + LATE_MS,
        "redelivered {took} ms after the expiry"
    );
    assert_eq!(txn_ids(&body), ["e-0", "e-1"]);
    assert_eq!(attempts(&body), [2, 2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_long_poll_answers_when_the_delay_ends() {
    // re-checks 20 s apart: only the wake at the delay's end can answer it
    let (db, b) = setup_with(&[
        ("POP_WAIT_INITIAL_INTERVAL_MS", "20000"),
        ("POP_WAIT_MAX_INTERVAL_MS", "20000"),
    ])
    .await;
    let client = db.client().await.unwrap();
    let queue = unique("retry-wake");
    configure(&b, &queue, json!({ "retryDelay": 1200 })).await;
    push_one(&b, &queue, "p", json!({}), "w-0").await;
    let path = pop_path(&queue, None, "consumerGroup=g&batch=1");
    let body = pop_ok(&b, &path).await;
    let failed_at = db_now(&client).await;
    ack(&b, &messages(&body)[0], "failed", None).await;
    let waiting = pop_path(
        &queue,
        None,
        "consumerGroup=g&batch=1&wait=true&timeout=15000",
    );
    let body = pop_ok(&b, &waiting).await;
    let at = db_now(&client).await;
    let took = millis(at - failed_at);
    assert!(
        took + SLACK_MS >= 1200,
        "answered {took} ms after the failure"
    );
    assert!(
        took < 1200 + LATE_MS,
        "answered {took} ms after the failure"
    );
    assert_eq!(
        (txn_ids(&body), attempts(&body)),
        (vec!["w-0".into()], vec![2])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_retry_delay_a_failed_message_comes_back_at_once_counted() {
    let (db, b) = setup().await;
    let client = db.client().await.unwrap();
    let queue = unique("retry-none");
    configure(&b, &queue, json!({ "leaseTime": 1 })).await;
    push_numbered(&b, &queue, "p", "n", 2).await;
    let path = pop_path(&queue, None, "consumerGroup=g&batch=1");
    let body = pop_ok(&b, &path).await;
    assert_eq!(attempts(&body), [1]);
    ack(&b, &messages(&body)[0], "failed", None).await;
    // no hold: served again by the next pop
    let body = pop_ok(&b, &path).await;
    assert_eq!(
        (txn_ids(&body), attempts(&body)),
        (vec!["n-0".into()], vec![2])
    );
    // a `retry` ack releases without a delay and counts the delivery too
    ack(&b, &messages(&body)[0], "retry", None).await;
    let body = pop_ok(&b, &path).await;
    assert_eq!(attempts(&body), [3]);
    // an expired lease counts, and the partition is free right after it
    sleep_ms(1200).await;
    let (body, _) = pop_until(&b, &client, &path, Duration::from_secs(3)).await;
    assert_eq!(
        (txn_ids(&body), attempts(&body)),
        (vec!["n-0".into()], vec![4])
    );
    ack_all_completed(&b, &body, Some("g")).await;
    let body = pop_ok(&b, &path).await;
    assert_eq!(
        (txn_ids(&body), attempts(&body)),
        (vec!["n-1".into()], vec![1])
    );
    let pid = partition_id(&client, &queue, "p").await;
    assert_eq!(
        count(
            &client,
            &format!(
                "SELECT count(*) FROM queen.log_consumers WHERE partition_id = '{pid}'
                 AND lease_id IS NULL AND lease_expires_at > now()"
            )
        )
        .await,
        0,
        "no hold was ever made"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_retry_options_are_refused_by_name_and_nothing_is_stored() {
    let (db, b) = setup().await;
    let client = db.client().await.unwrap();
    let queue = unique("retry-bad");
    let cases = [
        (json!({ "retryDelay": -5 }), "retryDelay"),
        (json!({ "retryDelay": "soon" }), "retryDelay"),
        (json!({ "retryDelay": 604_800_001 }), "retryDelay"),
        (json!({ "retryBackoff": 0.5 }), "retryBackoff"),
        (json!({ "retryBackoff": -2 }), "retryBackoff"),
        (json!({ "retryBackoff": "x2" }), "retryBackoff"),
        (json!({ "retryBackoff": [2] }), "retryBackoff"),
        (json!({ "retryBackoff": 1e300 }), "retryBackoff"),
        (json!({ "retryDelayMax": -1 }), "retryDelayMax"),
        (json!({ "retryDelayMax": 2.5 }), "retryDelayMax"),
        (json!({ "retryDelayMax": 1e10 }), "retryDelayMax"),
    ];
    let refuse = |options: Value| {
        let b = &b;
        let queue = queue.clone();
        async move {
            let (code, res) = b
                .post(
                    "/api/v1/configure",
                    &json!({ "queue": queue, "options": options }),
                )
                .await;
            (code, res)
        }
    };
    for (options, field) in &cases {
        let (code, res) = refuse(options.clone()).await;
        let error = assert_error(code, &res, StatusCode::BAD_REQUEST);
        assert!(error.contains(field), "{options}: {error}");
    }
    assert_eq!(
        count(
            &client,
            &format!("SELECT count(*) FROM queen.queues WHERE name = '{queue}'")
        )
        .await,
        0,
        "a refused configure creates nothing"
    );
    // an existing queue keeps what it had
    configure(
        &b,
        &queue,
        json!({ "retryDelay": 250, "retryBackoff": 1.5, "retryDelayMax": 4000 }),
    )
    .await;
    for (options, field) in &cases {
        let (code, res) = refuse(options.clone()).await;
        assert_error(code, &res, StatusCode::BAD_REQUEST);
        let row = client
            .query_one(
                "SELECT retry_delay, retry_backoff, retry_delay_max FROM queen.queues WHERE name = $1",
                &[&queue],
            )
            .await
            .unwrap();
        let stored: (i32, f64, i32) = (row.get(0), row.get(1), row.get(2));
        assert_eq!(stored, (250, 1.5, 4000), "{field}");
    }
    // echoed by the queue's status detail
    let (code, res) = b.get(&format!("/api/v1/status/queues/{queue}")).await;
    assert_eq!(code, StatusCode::OK, "{res}");
    let o = &res["queue"]["config"];
    assert_eq!(o["retryDelay"], 250, "{res}");
    assert_eq!(o["retryBackoff"], 1.5, "{res}");
    assert_eq!(o["retryDelayMax"], 4000, "{res}");
    // absent options take their defaults: constant, uncapped, none
    let res = configure(&b, &queue, json!({})).await;
    assert_eq!(res["options"]["retryDelay"], 0, "{res}");
    assert_eq!(res["options"]["retryBackoff"], 1.0, "{res}");
    assert_eq!(res["options"]["retryDelayMax"], 0, "{res}");
}
