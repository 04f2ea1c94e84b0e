//! ADMIN and SECONDARY routes: response shapes and effects.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::*;

/// Pushes `n` messages to `queue/partition`, pops them all in one batch and
/// returns the popped messages.
async fn push_and_pop(
    b: &queen_testkit::TestBroker,
    queue: &str,
    partition: &str,
    n: usize,
) -> Vec<Value> {
    push_numbered(b, queue, partition, partition, n).await;
    let body = pop_ok(b, &pop_path(queue, Some(partition), &format!("batch={n}"))).await;
    messages(&body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dlq_lists_dead_letters_with_filters_and_a_total() {
    let (_db, b) = setup().await;
    let q = unique("dlq");
    configure(&b, &q, json!({"retryLimit": 0})).await;
    let msgs = push_and_pop(&b, &q, "p1", 1).await;
    let r = ack(&b, &msgs[0], "failed", Some("boom")).await;
    assert_eq!(r["dlq"], true, "{r}");
    let other = unique("dlq-other");
    configure(&b, &other, json!({"retryLimit": 0})).await;
    let msgs2 = push_and_pop(&b, &other, "p2", 1).await;
    ack(&b, &msgs2[0], "dlq", Some("manual")).await;

    let (status, body) = b.get(&format!("/api/v1/dlq?queue={q}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_keys(&body, &["messages", "pagination", "total"]);
    assert_eq!(body["total"], 1, "{body}");
    let m = &body["messages"][0];
    assert_keys(
        m,
        &[
            "id",
            "transactionId",
            "partitionId",
            "queue",
            "partition",
            "consumerGroup",
            "errorMessage",
            "retryCount",
            "data",
            "producerSub",
            "createdAt",
            "failedAt",
        ],
    );
    assert_eq!(m["errorMessage"], "boom");
    assert_eq!(m["data"], json!({"n": 0}));
    assert_eq!(m["id"], msgs[0]["id"]);
    assert_eq!(m["queue"], q.as_str());
    assert!(is_utc_timestamp(m["failedAt"].as_str().unwrap(), 3));

    let (_, body) = b.get("/api/v1/dlq?limit=1&offset=0").await;
    assert_eq!(body["total"], 2);
    assert_eq!(body["messages"].as_array().unwrap().len(), 1);
    assert_eq!(body["pagination"], json!({"limit": 1, "offset": 0}));
    let (_, body) = b
        .get("/api/v1/dlq?partition=p2&consumerGroup=__QUEUE_MODE__")
        .await;
    assert_eq!(body["total"], 1);
    assert_eq!(body["messages"][0]["errorMessage"], "manual");
    let (_, body) = b.get("/api/v1/dlq?from=2999-01-01").await;
    assert_eq!(body["total"], 0);
    let (status, body) = b.get("/api/v1/dlq?from=notatime").await;
    assert_error(status, &body, StatusCode::BAD_REQUEST);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traces_are_recorded_and_read_back() {
    let (_db, b) = setup().await;
    let q = unique("tr");
    let msgs = push_and_pop(&b, &q, "p", 1).await;
    let m = &msgs[0];
    let name = unique("tenant");
    let (status, body) = b
        .post(
            "/api/v1/traces",
            &json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                    "consumerGroup": null, "traceNames": [name], "eventType": "step",
                    "data": {"step": 1}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["success"], true);
    assert!(uuid::Uuid::parse_str(body["traceId"].as_str().unwrap()).is_ok());
    // a single string name and the default event type
    let (status, _) = b
        .post(
            "/api/v1/traces",
            &json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                    "traceNames": name, "data": {"step": 2}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);

    let (status, body) = b
        .get(&format!(
            "/api/v1/traces/{}/{}",
            m["partitionId"].as_str().unwrap(),
            m["transactionId"].as_str().unwrap()
        ))
        .await;
    assert_eq!(status, StatusCode::OK);
    let traces = body["traces"].as_array().unwrap();
    assert_eq!(traces.len(), 2);
    assert_keys(
        &traces[0],
        &[
            "id",
            "event_type",
            "data",
            "consumer_group",
            "worker_id",
            "created_at",
            "trace_names",
        ],
    );
    assert_eq!(traces[0]["data"], json!({"step": 1}));
    assert_eq!(traces[1]["event_type"], "info");

    let (_, body) = b.get(&format!("/api/v1/traces/by-name/{name}")).await;
    assert_eq!(body["total"], 2);
    assert_eq!(body["traces"][0]["queue_name"], q.as_str());
    assert_eq!(body["traces"][0]["message_payload"], json!({"n": 0}));
    assert_eq!(body["pagination"], json!({"limit": 100, "offset": 0}));

    let (_, body) = b.get("/api/v1/traces/names").await;
    let entry = body["trace_names"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["trace_name"] == name.as_str())
        .cloned()
        .expect("trace name listed");
    assert_eq!(entry["trace_count"], 2);
    assert_eq!(entry["message_count"], 1);

    let (status, body) = b
        .post(
            "/api/v1/traces",
            &json!({"transactionId": "nope", "partitionId": m["partitionId"], "data": {}}),
        )
        .await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        body,
        json!({"success": false, "error": "Message not found"})
    );
    let (status, body) = b.post("/api/v1/traces", &json!({"data": {}})).await;
    assert_eq!(
        assert_error(status, &body, StatusCode::BAD_REQUEST),
        "transactionId and partitionId are required"
    );
    let (status, body) = b
        .post(
            "/api/v1/traces",
            &json!({"transactionId": "x", "partitionId": m["partitionId"]}),
        )
        .await;
    assert_eq!(
        assert_error(status, &body, StatusCode::BAD_REQUEST),
        "data is required"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_group_listing_detail_and_deletion() {
    let (db, b) = setup().await;
    let q = unique("cg");
    push_numbered(&b, &q, "p1", "a", 3).await;
    push_numbered(&b, &q, "p2", "b", 3).await;
    let g = unique("grp");
    let body = pop_ok(
        &b,
        &pop_path(&q, Some("p1"), &format!("consumerGroup={g}&batch=1")),
    )
    .await;
    ack(&b, &messages(&body)[0], "completed", None).await;
    pop_ok(
        &b,
        &pop_path(&q, Some("p2"), &format!("consumerGroup={g}&batch=1")),
    )
    .await;

    let (status, body) = b.get("/api/v1/consumer-groups").await;
    assert_eq!(status, StatusCode::OK);
    let entry = body
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == g.as_str())
        .cloned()
        .expect("group listed");
    assert_keys(
        &entry,
        &[
            "name",
            "topics",
            "queueName",
            "members",
            "partitionsWithLag",
            "totalLag",
            "maxTimeLag",
            "state",
            "subscriptionMode",
            "subscriptionTimestamp",
            "subscriptionCreatedAt",
            "conflation",
        ],
    );
    assert_eq!(entry["topics"], json!([q]));
    assert_eq!(entry["members"], 2);
    assert_eq!(entry["partitionsWithLag"], 2);
    assert_eq!(entry["state"], "Stable");

    let (_, body) = b.get(&format!("/api/v1/consumer-groups/{g}")).await;
    let parts = body[q.as_str()]["partitions"].as_array().unwrap();
    assert_eq!(parts.len(), 2);
    assert_keys(
        &parts[0],
        &[
            "partition",
            "workerId",
            "lastConsumedAt",
            "totalConsumed",
            "offsetLag",
            "timeLagSeconds",
            "leaseActive",
        ],
    );
    assert_eq!(parts[0]["partition"], "p1");
    assert_eq!(parts[0]["totalConsumed"], 1);
    assert_eq!(parts[0]["offsetLag"], 2);
    assert_eq!(parts[1]["leaseActive"], true);
    let (_, body) = b.get("/api/v1/consumer-groups/nobody").await;
    assert_eq!(body, json!({}));

    let (status, body) = b
        .get("/api/v1/consumer-groups/lagging?minLagSeconds=0")
        .await;
    assert_eq!(status, StatusCode::OK);
    let rows: Vec<&Value> = body
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["consumer_group"] == g.as_str())
        .collect();
    assert_eq!(rows.len(), 2, "{body}");
    assert_keys(
        rows[0],
        &[
            "consumer_group",
            "queue_name",
            "partition_name",
            "partition_id",
            "worker_id",
            "offset_lag",
            "time_lag_seconds",
            "lag_hours",
            "oldest_unconsumed_at",
            "last_consumed_at",
        ],
    );

    let (status, body) = b
        .delete(&format!(
            "/api/v1/consumer-groups/{g}/queues/{q}?deleteMetadata=false"
        ))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        json!({"success": true, "consumerGroup": g, "queueName": q,
               "deletedPartitions": 2, "metadataDeleted": false})
    );
    let client = db.client().await.unwrap();
    let left = count(
        &client,
        &format!("SELECT count(*) FROM queen.log_consumers WHERE consumer_group = '{g}'"),
    )
    .await;
    assert_eq!(left, 0);
    // the group starts over from the oldest message
    let body = pop_ok(&b, &pop_path(&q, Some("p1"), &format!("consumerGroup={g}"))).await;
    assert_eq!(txn_ids(&body), vec!["a-0"]);

    let (status, body) = b.delete(&format!("/api/v1/consumer-groups/{g}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        json!({"success": true, "consumerGroup": g, "deletedPartitions": 1, "metadataDeleted": true})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seek_moves_cursors_to_the_end_or_to_a_time() {
    let (_db, b) = setup().await;
    let q = unique("seek");
    let g = unique("g");
    push_numbered(&b, &q, "p", "old", 3).await;
    sleep_ms(1100).await;
    let middle = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    sleep_ms(200).await;
    push_numbered(&b, &q, "p", "new", 2).await;
    let body = pop_ok(
        &b,
        &pop_path(&q, None, &format!("consumerGroup={g}&batch=1")),
    )
    .await;
    assert_eq!(txn_ids(&body), vec!["old-0"]);

    // the group holds a lease: seek releases it
    let (status, body) = b
        .post(
            &format!("/api/v1/consumer-groups/{g}/queues/{q}/seek"),
            &json!({"timestamp": middle}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_keys(
        &body,
        &[
            "success",
            "consumerGroup",
            "queueName",
            "seekToEnd",
            "targetTimestamp",
            "partitionsUpdated",
        ],
    );
    assert_eq!(body["partitionsUpdated"], 1);
    let body = pop_ok(
        &b,
        &pop_path(&q, None, &format!("consumerGroup={g}&batch=10")),
    )
    .await;
    assert_eq!(txn_ids(&body), vec!["new-0", "new-1"]);

    let (status, body) = b
        .post(
            &format!("/api/v1/consumer-groups/{g}/queues/{q}/seek"),
            &json!({"toEnd": true}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["seekToEnd"], true);
    pop_empty(&b, &pop_path(&q, None, &format!("consumerGroup={g}"))).await;

    let (status, body) = b
        .post(
            &format!("/api/v1/consumer-groups/{g}/queues/{q}/seek"),
            &json!({}),
        )
        .await;
    assert_eq!(
        assert_error(status, &body, StatusCode::BAD_REQUEST),
        "Must specify either 'toEnd': true or 'timestamp'"
    );

    // partition seek to the end, after a new push
    push_numbered(&b, &q, "p", "later", 1).await;
    let (status, body) = b
        .post(
            &format!("/api/v1/consumer-groups/{g}/queues/{q}/partitions/p/seek"),
            &json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["updated"], true);
    assert_eq!(body["cursorMovedTo"], 6);
    pop_empty(&b, &pop_path(&q, None, &format!("consumerGroup={g}"))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscription_update_rewrites_the_stored_timestamp() {
    let (_db, b) = setup().await;
    let q = unique("sub");
    let g = unique("g");
    push_numbered(&b, &q, "p", "m", 2).await;
    pop_empty(
        &b,
        &pop_path(&q, None, &format!("consumerGroup={g}&subscriptionMode=new")),
    )
    .await;
    let (status, body) = b
        .post(
            &format!("/api/v1/consumer-groups/{g}/subscription"),
            &json!({"subscriptionTimestamp": "2020-01-01T00:00:00Z"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        json!({"success": true, "consumerGroup": g, "newTimestamp": "2020-01-01T00:00:00Z", "rowsUpdated": 1})
    );
    // the stored timestamp applies to partitions the group has not read yet
    push_numbered(&b, &q, "p2", "x", 1).await;
    let body = pop_ok(&b, &pop_path(&q, Some("p2"), &format!("consumerGroup={g}"))).await;
    assert_eq!(txn_ids(&body), vec!["x-0"]);
    let (status, body) = b
        .post(
            &format!("/api/v1/consumer-groups/{g}/subscription"),
            &json!({}),
        )
        .await;
    assert_eq!(
        assert_error(status, &body, StatusCode::BAD_REQUEST),
        "Missing subscriptionTimestamp in request body"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_report_queues_partitions_and_counts() {
    let (_db, b) = setup().await;
    let q = format!("{}.invoice", unique("billing"));
    push_numbered(&b, &q, "p1", "a", 3).await;
    let body = pop_ok(&b, &pop_path(&q, Some("p1"), "batch=2")).await;
    ack(&b, &messages(&body)[0], "completed", None).await;

    let (status, body) = b.get("/api/v1/resources/overview").await;
    assert_eq!(status, StatusCode::OK);
    assert_keys(
        &body,
        &[
            "queues",
            "partitions",
            "namespaces",
            "tasks",
            "messages",
            "lag",
            "throughput",
            "timestamp",
            "statsAge",
        ],
    );
    assert_eq!(body["messages"]["total"], 3);
    assert_eq!(body["messages"]["completed"], 1);
    assert_eq!(body["messages"]["processing"], 1);
    assert_eq!(body["messages"]["pending"], 1);

    let (_, body) = b.get("/api/v1/resources/queues").await;
    let entry = &body["queues"][0];
    assert_keys(
        entry,
        &[
            "id",
            "name",
            "namespace",
            "task",
            "createdAt",
            "partitions",
            "messages",
        ],
    );
    assert_eq!(entry["name"], q.as_str());
    assert_eq!(entry["namespace"], q.split('.').next().unwrap());
    assert_eq!(entry["task"], "invoice");

    let (status, body) = b.get(&format!("/api/v1/resources/queues/{q}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_keys(
        &body,
        &[
            "id",
            "name",
            "namespace",
            "task",
            "createdAt",
            "partitions",
            "totals",
        ],
    );
    let p = &body["partitions"][0];
    assert_keys(
        p,
        &[
            "id",
            "name",
            "createdAt",
            "stats",
            "oldestMessage",
            "newestMessage",
        ],
    );
    assert_eq!(p["stats"]["total"], 3);
    assert_eq!(body["totals"]["deadLetter"], 0);
    let (status, body) = b.get("/api/v1/resources/queues/unknown-queue").await;
    assert_eq!(
        assert_error(status, &body, StatusCode::NOT_FOUND),
        "Queue not found"
    );

    let (_, body) = b.get("/api/v1/resources/namespaces").await;
    let ns = &body["namespaces"][0];
    assert_keys(ns, &["namespace", "queues", "partitions", "messages"]);
    let (_, body) = b.get("/api/v1/resources/tasks").await;
    assert_eq!(body["tasks"][0]["task"], "invoice");
    assert_eq!(body["tasks"][0]["messages"]["total"], 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_can_be_listed_inspected_and_deleted() {
    let (db, b) = setup().await;
    let q = unique("msg");
    push_numbered(&b, &q, "p", "m", 3).await;
    let (status, body) = b.get(&format!("/api/v1/messages?queue={q}")).await;
    assert_eq!(status, StatusCode::OK);
    let list = body["messages"].as_array().unwrap();
    assert_eq!(list.len(), 3);
    assert_eq!(list[0]["transactionId"], "m-2", "newest first");
    assert_eq!(list[0]["status"], "pending");
    assert_eq!(list[0]["queuePath"], format!("{q}/p"));
    assert_keys(&body["mode"], &["hasQueueMode", "busGroupsCount", "type"]);
    let pid = list[0]["partitionId"].as_str().unwrap().to_owned();

    let body = pop_ok(&b, &pop_path(&q, None, "batch=1")).await;
    assert_eq!(txn_ids(&body), vec!["m-0"]);
    let (status, detail) = b.get(&format!("/api/v1/messages/{pid}/m-0")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(detail["payload"], json!({"n": 0}));
    assert_eq!(detail["status"], "processing");
    assert!(detail["queueConfig"].is_object() && detail["consumerGroups"].is_array());
    let (_, body) = b
        .get(&format!("/api/v1/messages?queue={q}&status=pending"))
        .await;
    assert_eq!(body["messages"].as_array().unwrap().len(), 2);
    let (status, body) = b.get(&format!("/api/v1/messages/{pid}/nope")).await;
    assert_eq!(
        assert_error(status, &body, StatusCode::NOT_FOUND),
        "Message not found"
    );

    // delete m-1: the consumer skips it and its transactionId is free again
    let (status, body) = b.delete(&format!("/api/v1/messages/{pid}/m-1")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        json!({"success": true, "partitionId": pid, "transactionId": "m-1",
               "message": "Message deleted successfully"})
    );
    let (_, body) = b.delete(&format!("/api/v1/messages/{pid}/m-1")).await;
    assert_eq!(body["success"], false);
    assert_eq!(body["message"], "Message not found");
    let body = pop_ok(&b, &pop_path(&q, None, "batch=10&consumerGroup=fresh")).await;
    assert_eq!(txn_ids(&body), vec!["m-0", "m-2"]);
    let again = push_items(
        &b,
        json!([{"queue": q, "partition": "p", "transactionId": "m-1"}]),
    )
    .await;
    assert_eq!(again[0]["status"], "queued");
    let client = db.client().await.unwrap();
    assert_eq!(
        count(&client, "SELECT count(*) FROM queen.message_keys").await,
        3
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_and_analytics_routes_answer_their_shapes() {
    let (_db, b) = setup().await;
    let q = unique("st");
    push_numbered(&b, &q, "p", "m", 2).await;
    let (status, body) = b.get("/api/v1/status").await;
    assert_eq!(status, StatusCode::OK);
    for key in [
        "timeRange",
        "bucketMinutes",
        "pointCount",
        "throughput",
        "queues",
        "messages",
        "leases",
        "deadLetterQueue",
        "workers",
        "errors",
        "statsAge",
    ] {
        assert!(body.get(key).is_some(), "status lacks {key}: {body}");
    }
    assert_eq!(body["messages"]["total"], 2);
    let ingested: i64 = body["throughput"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["ingested"].as_i64().unwrap())
        .sum();
    assert_eq!(ingested, 2);

    let (_, body) = b.get("/api/v1/status/queues").await;
    assert_keys(&body, &["queues", "pagination"]);
    let (status, body) = b.get(&format!("/api/v1/status/queues/{q}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_keys(&body, &["queue", "partitions", "totals"]);
    assert_eq!(body["queue"]["config"]["leaseTime"], 300);
    let (status, body) = b.get("/api/v1/status/queues/unknown").await;
    assert_error(status, &body, StatusCode::NOT_FOUND);
    let (_, body) = b.get(&format!("/api/v1/status/queues/{q}/messages")).await;
    assert_eq!(body.as_array().unwrap().len(), 2);
    let (_, body) = b.get("/api/v1/status/analytics?interval=minute").await;
    assert_keys(&body, &["dataPoints", "interval", "from", "to"]);
    assert_eq!(body["interval"], "minute");
    let (status, body) = b.get("/api/v1/status/analytics?interval=week").await;
    assert_error(status, &body, StatusCode::BAD_REQUEST);
    let (_, body) = b.get("/api/v1/status/buffers").await;
    assert_keys(&body, &["pending", "failed", "dbHealthy", "worker"]);
    for path in [
        "system-metrics",
        "worker-metrics",
        "postgres-stats",
        "queue-lag",
        "queue-ops",
    ] {
        let (status, _) = b.get(&format!("/api/v1/analytics/{path}")).await;
        assert_eq!(status, StatusCode::OK, "{path}");
    }
    let (status, body) = b.post("/api/v1/stats/refresh", &json!({})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["success"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintenance_modes_are_persisted_and_applied() {
    let (db, b) = setup().await;
    let q = unique("mnt");
    push_numbered(&b, &q, "p", "m", 1).await;

    let (status, body) = b.get("/api/v1/system/maintenance").await;
    assert_eq!(status, StatusCode::OK);
    assert_keys(
        &body,
        &[
            "maintenanceMode",
            "popMaintenanceMode",
            "bufferedMessages",
            "bufferHealthy",
            "bufferStats",
            "effective",
        ],
    );
    let (status, body) = b
        .post("/api/v1/system/maintenance/pop", &json!({"enabled": true}))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["popMaintenanceMode"], true);
    pop_empty(&b, &pop_path(&q, None, "")).await;
    let client = db.client().await.unwrap();
    let stored: bool = client
        .query_one(
            "SELECT (value->>'enabled')::boolean FROM queen.system_state WHERE key = 'pop_maintenance_mode'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(stored);
    b.post("/api/v1/system/maintenance/pop", &json!({"enabled": false}))
        .await;
    pop_ok(&b, &pop_path(&q, None, "")).await;

    let (status, body) = b
        .post("/api/v1/system/maintenance", &json!({"enabled": true}))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["maintenanceMode"], true);
    assert!(body["message"].is_string());
    let (status, body) = b
        .post(
            "/api/v1/push",
            &json!({"items": [{"queue": q, "payload": 1}]}),
        )
        .await;
    // push maintenance sends pushes to the disk spool (covered in spool.rs)
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body[0]["status"], "buffered", "{body}");
    b.post("/api/v1/system/maintenance", &json!({"enabled": false}))
        .await;
    push_numbered(&b, &q, "p", "after", 1).await;

    let (status, body) = b
        .post("/api/v1/system/maintenance", &json!({"enabled": "yes"}))
        .await;
    assert_eq!(
        assert_error(status, &body, StatusCode::BAD_REQUEST),
        "enabled (boolean) is required"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flag_set_directly_in_postgres_is_picked_up_by_reconcile() {
    let (db, b) = setup_with(&[("QUEEN_RECONCILE_INTERVAL_MS", "200")]).await;
    let q = unique("rec");
    push_numbered(&b, &q, "p", "m", 1).await;
    let client = db.client().await.unwrap();
    client
        .execute(
            "INSERT INTO queen.system_state (key, value) VALUES ('pop_maintenance_mode', '{\"enabled\": true}')",
            &[],
        )
        .await
        .unwrap();
    sleep_ms(700).await;
    pop_empty(&b, &pop_path(&q, None, "")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_served_as_json_and_prometheus_text() {
    let (_db, b) = setup().await;
    let q = unique("met");
    push_numbered(&b, &q, "p", "m", 3).await;
    let body = pop_ok(&b, &pop_path(&q, None, "batch=3")).await;
    ack(&b, &messages(&body)[0], "completed", None).await;

    let (status, body) = b.get("/metrics").await;
    assert_eq!(status, StatusCode::OK);
    assert_keys(
        &body,
        &[
            "uptime", "requests", "messages", "database", "memory", "cpu",
        ],
    );
    assert_eq!(body["messages"]["total"], 3);
    assert!(body["database"]["poolSize"].as_u64().unwrap() > 0);

    let resp = b
        .http
        .get(b.url("/metrics/prometheus"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let ctype = resp.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(ctype.starts_with("text/plain; version=0.0.4"), "{ctype}");
    let text = resp.text().await.unwrap();
    let lines = text.lines().map(|l| Ok(l.to_owned()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("valid exposition format");
    let value = |name: &str| {
        scrape
            .samples
            .iter()
            .find(|s| s.metric == name)
            .map(|s| match s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => v,
                _ => f64::NAN,
            })
            .unwrap_or_else(|| panic!("{name} missing from {text}"))
    };
    assert_eq!(value("queen_push_messages_total"), 3.0);
    assert_eq!(value("queen_pop_messages_total"), 3.0);
    assert!(value("queen_db_pool_size") > 0.0);
    assert_eq!(value("queen_maintenance_mode_enabled"), 0.0);
    let success = scrape
        .samples
        .iter()
        .find(|s| s.metric == "queen_ack_total" && s.labels.get("result") == Some("success"))
        .expect("ack counter");
    assert!(matches!(success.value, prometheus_parse::Value::Counter(v) if v == 1.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_pop_reads_every_queue_of_the_namespace() {
    let (_db, b) = setup().await;
    let ns = unique("ns");
    let q1 = format!("{ns}.orders");
    let q2 = format!("{ns}.refunds");
    push_numbered(&b, &q1, "p", "o", 1).await;
    push_numbered(&b, &q2, "p", "r", 1).await;
    let mut seen = Vec::new();
    for _ in 0..2 {
        let body = pop_ok(&b, &format!("/api/v1/pop?namespace={ns}&batch=5")).await;
        let msgs = messages(&body);
        assert_eq!(msgs[0]["queue"], body["queue"]);
        seen.extend(txn_ids(&body));
    }
    seen.sort();
    assert_eq!(seen, vec!["o-0", "r-0"]);
    pop_empty(&b, &format!("/api/v1/pop?namespace={ns}")).await;
    let body = pop_ok(
        &b,
        &format!("/api/v1/pop?namespace={ns}&task=orders&consumerGroup=g2"),
    )
    .await;
    assert_eq!(body["queue"], q1.as_str());
    let (status, body) = b.get("/api/v1/pop").await;
    assert_error(status, &body, StatusCode::BAD_REQUEST);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_absent_from_the_reference_answer_404_json() {
    let (_db, b) = setup().await;
    for (method, path) in [
        (reqwest::Method::DELETE, "/api/v1/queues/q/clear"),
        (reqwest::Method::GET, "/api/v1/resources/partitions"),
        (reqwest::Method::POST, "/api/v1/messages/p/t/dlq"),
        (reqwest::Method::GET, "/api/v1/kv/some-key"),
        (reqwest::Method::POST, "/api/v1/locks/a"),
        (reqwest::Method::GET, "/api/v1/ephemeral/x"),
    ] {
        let (status, body) = b.call(method.clone(), path, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {path}");
        assert_eq!(body, json!({"error": "Not found"}), "{method} {path}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn database_operations_are_timed_per_operation() {
    let (_db, b) = setup().await;
    let q = unique("dbop");
    push_numbered(&b, &q, "p", "m", 2).await;
    let body = pop_ok(&b, &pop_path(&q, None, "batch=2")).await;
    ack(&b, &messages(&body)[0], "completed", None).await;
    let text = prometheus_text(&b).await;
    let lines = text.lines().map(|l| Ok(l.to_owned()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("valid exposition format");
    let count = |op: &str| {
        scrape
            .samples
            .iter()
            .find(|s| {
                s.metric == "queen_db_op_duration_seconds_count" && s.labels.get("op") == Some(op)
            })
            .map(|s| match s.value {
                prometheus_parse::Value::Untyped(v) | prometheus_parse::Value::Counter(v) => v,
                _ => f64::NAN,
            })
            .unwrap_or_else(|| panic!("no latency of {op} in {text}"))
    };
    assert!(count("push") >= 1.0);
    // the first pop of a partition is the consume statement's too
    assert!(count("consume") >= 1.0);
    assert!(count("ack") >= 1.0);
    assert!(count("find_queue") >= 1.0);
}
