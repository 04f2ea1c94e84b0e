//! `POST /api/v1/configure` (http-api.md §3.1).

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::*;

const OPTION_KEYS: [&str; 17] = [
    "priority",
    "leaseTime",
    "retryLimit",
    "retryDelay",
    "retryBackoff",
    "retryDelayMax",
    "maxSize",
    "ttl",
    "deadLetterQueue",
    "dlqAfterMaxRetries",
    "delayedProcessing",
    "windowBuffer",
    "retentionSeconds",
    "completedRetentionSeconds",
    "retentionEnabled",
    "encryptionEnabled",
    "maxWaitTimeSeconds",
];

fn defaults() -> Value {
    json!({
        "priority": 0, "leaseTime": 300, "retryLimit": 3, "retryDelay": 0,
        "retryBackoff": 1.0, "retryDelayMax": 0, "maxSize": 0, "ttl": 0, "deadLetterQueue": false, "dlqAfterMaxRetries": false,
        "delayedProcessing": 0, "windowBuffer": 0, "retentionSeconds": 0,
        "completedRetentionSeconds": 0, "retentionEnabled": false,
        "encryptionEnabled": false, "maxWaitTimeSeconds": 0
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configure_echoes_all_seventeen_typed_options() {
    let (db, b) = setup().await;
    let queue = unique("cfg");
    let options = json!({
        "priority": 7, "leaseTime": 120, "retryLimit": 5, "retryDelay": 250,
        "retryBackoff": 1.5, "retryDelayMax": 5000, "maxSize": 10, "ttl": 60, "deadLetterQueue": true, "dlqAfterMaxRetries": true,
        "delayedProcessing": 2, "windowBuffer": 3, "retentionSeconds": 40,
        "completedRetentionSeconds": 50, "retentionEnabled": true,
        "encryptionEnabled": true, "maxWaitTimeSeconds": 90, "unknownKey": "ignored"
    });
    let (status, body) = b
        .post(
            "/api/v1/configure",
            &json!({ "queue": queue, "namespace": "billing", "task": "invoice", "options": options }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["configured"], Value::Bool(true));
    assert_eq!(body["queue"], queue.as_str());
    assert_eq!(body["namespace"], "billing");
    assert_eq!(body["task"], "invoice");
    assert!(uuid::Uuid::parse_str(body["queueId"].as_str().expect("queueId")).is_ok());
    let default_pid = body["partitionId"]
        .as_str()
        .expect("partitionId")
        .to_owned();
    assert!(uuid::Uuid::parse_str(&default_pid).is_ok());

    let echoed = &body["options"];
    assert_keys(echoed, &OPTION_KEYS);
    for key in OPTION_KEYS {
        // same value and same JSON type (numbers stay numbers, booleans booleans)
        assert_eq!(echoed[key], options[key], "option {key}");
    }

    // stored as given, and the Default partition exists with the answered id
    let client = db.client().await.expect("db client");
    let row = client
        .query_one(
            "SELECT lease_time, retry_limit, encryption_enabled, namespace, task
             FROM queen.queues WHERE name = $1",
            &[&queue],
        )
        .await
        .expect("queue row");
    assert_eq!(row.get::<_, i32>(0), 120);
    assert_eq!(row.get::<_, i32>(1), 5);
    assert!(row.get::<_, bool>(2));
    assert_eq!(row.get::<_, String>(3), "billing");
    assert_eq!(row.get::<_, String>(4), "invoice");
    assert_eq!(
        partition_id(&client, &queue, "Default").await.to_string(),
        default_pid
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configure_replaces_the_whole_option_set() {
    let (db, b) = setup().await;
    let queue = unique("cfg-replace");
    let first = b
        .post(
            "/api/v1/configure",
            &json!({ "queue": queue, "namespace": "ns", "task": "t",
                     "options": { "leaseTime": 10, "retryLimit": 9, "retentionEnabled": true } }),
        )
        .await
        .1;
    assert_eq!(first["options"]["leaseTime"], 10);
    assert_eq!(first["options"]["retryLimit"], 9);

    // second configure names only priority: everything else reverts, namespace/task clear
    let (status, second) = b
        .post(
            "/api/v1/configure",
            &json!({ "queue": queue, "options": { "priority": 4 } }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{second}");
    let mut want = defaults();
    want["priority"] = json!(4);
    assert_eq!(second["options"], want);
    assert_eq!(second["namespace"], "");
    assert_eq!(second["task"], "");
    assert_eq!(second["queueId"], first["queueId"], "same queue");
    assert_eq!(
        second["partitionId"], first["partitionId"],
        "same Default partition"
    );

    // no options at all: all defaults
    let third = configure(&b, &queue, Value::Null).await;
    assert_eq!(third["options"], defaults());

    let client = db.client().await.expect("db client");
    let row = client
        .query_one(
            "SELECT lease_time, retry_limit, retention_enabled, priority FROM queen.queues WHERE name = $1",
            &[&queue],
        )
        .await
        .expect("queue row");
    assert_eq!(row.get::<_, i32>(0), 300);
    assert_eq!(row.get::<_, i32>(1), 3);
    assert!(!row.get::<_, bool>(2));
    assert_eq!(row.get::<_, i32>(3), 0);
    assert_eq!(
        count(&client, "SELECT count(*) FROM queen.partitions").await,
        1,
        "configure creates the Default partition once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configured_lease_time_applies_to_the_next_pop() {
    let (db, b) = setup().await;
    let queue = unique("cfg-lease");
    configure(&b, &queue, json!({ "leaseTime": 1000 })).await;
    // reconfigure right away: the broker must not keep using the old lease time
    configure(&b, &queue, json!({ "leaseTime": 7 })).await;
    push_one(&b, &queue, "Default", json!(1), "cfg-lease-1").await;
    pop_ok(&b, &pop_path(&queue, None, "")).await;
    let client = db.client().await.expect("db client");
    let secs: f64 = client
        .query_one(
            "SELECT extract(epoch FROM lease_expires_at - now())::float8 FROM queen.log_consumers",
            &[],
        )
        .await
        .expect("lease row")
        .get(0);
    assert!(
        secs > 0.0 && secs <= 7.5,
        "lease of ~7 s expected, got {secs}"
    );
}

/// Configure while a push that creates the queue's Default partition is still
/// in flight (held by a test lock on the segments table): both succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configure_racing_with_pushes_to_default_succeeds() {
    let (db, b) = setup().await;
    let b = std::sync::Arc::new(b);
    let queue = unique("cfg-race");
    // the queue exists, its Default partition does not yet
    push_one(&b, &queue, "other", json!(0), "seed").await;
    let blocker = db.client().await.expect("db client");
    blocker
        .batch_execute("BEGIN; LOCK TABLE queen.segments IN EXCLUSIVE MODE")
        .await
        .expect("lock");
    let push = {
        let b = b.clone();
        let queue = queue.clone();
        tokio::spawn(async move {
            b.post(
                "/api/v1/push",
                &json!({ "items": [ { "queue": queue, "payload": 1, "transactionId": "d-1" } ] }),
            )
            .await
        })
    };
    sleep_ms(300).await;
    let configure = {
        let b = b.clone();
        let queue = queue.clone();
        tokio::spawn(async move {
            b.post(
                "/api/v1/configure",
                &json!({ "queue": queue, "options": { "leaseTime": 5 } }),
            )
            .await
        })
    };
    sleep_ms(300).await;
    blocker.batch_execute("COMMIT").await.expect("unlock");
    let (status, body) = push.await.expect("push");
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body) = configure.await.expect("configure");
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["configured"], true, "{body}");
    let client = db.client().await.expect("db client");
    let pid = partition_id(&client, &queue, "Default").await;
    assert_eq!(body["partitionId"], pid.to_string());
}
