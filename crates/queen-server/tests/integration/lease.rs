//! Leases: expiry, redelivery and `POST /api/v1/lease/{id}/extend` (§3.8, §5.4).

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::*;

const EXTEND_KEYS_REQUIRED: [&str; 5] = ["index", "leaseId", "success", "error", "expiresAt"];

/// Posts to the extend route with `body` (`None`: no body and no content type at all).
async fn extend(b: &queen_testkit::TestBroker, lease: &str, body: Option<&Value>) -> Value {
    extend_expecting(b, lease, body, StatusCode::OK).await
}

/// Like [`extend`], expecting `want` as the status.
async fn extend_expecting(
    b: &queen_testkit::TestBroker,
    lease: &str,
    body: Option<&Value>,
    want: StatusCode,
) -> Value {
    let path = format!("/api/v1/lease/{lease}/extend");
    let (status, v) = match body {
        Some(body) => b.post(&path, body).await,
        None => {
            let resp = b
                .http
                .post(b.url(&path))
                .send()
                .await
                .expect("extend request");
            let status = resp.status();
            let bytes = resp.bytes().await.expect("body");
            (status, serde_json::from_slice(&bytes).expect("JSON body"))
        }
    };
    assert_eq!(status, want, "extend answered {v}");
    // one object, not the one-element array of the 0.15 contract: the Python
    // client 1.3.0 reads the body with `.get` (2.6.0 takes both, JS ignores it)
    assert!(v.is_object(), "not an object: {v}");
    for k in EXTEND_KEYS_REQUIRED {
        assert!(v.get(k).is_some(), "missing {k} in {v}");
    }
    assert_eq!(v["index"], 0);
    assert_eq!(v["leaseId"], lease);
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_lease_is_redelivered() {
    let (db, b) = setup().await;
    let queue = unique("expire");
    configure(&b, &queue, json!({ "leaseTime": 2 })).await;
    push_numbered(&b, &queue, "Default", "exp", 2).await;

    let first = pop_ok(&b, &pop_path(&queue, None, "batch=2")).await;
    assert_eq!(txn_ids(&first), vec!["exp-0", "exp-1"]);
    pop_empty(&b, &pop_path(&queue, None, "")).await;

    sleep_ms(2200).await;
    let second = pop_ok(
        &b,
        &pop_path(&queue, None, "batch=2&wait=true&timeout=3000"),
    )
    .await;
    assert_eq!(txn_ids(&second), vec!["exp-0", "exp-1"]);
    assert_eq!(messages(&second)[0]["id"], messages(&first)[0]["id"]);
    assert_ne!(second["leaseId"], first["leaseId"], "a new lease");

    // expiry is not a retry
    let client = db.client().await.expect("db client");
    let retries: i32 = client
        .query_one("SELECT retry_count FROM queen.log_consumers", &[])
        .await
        .expect("cursor row")
        .get(0);
    assert_eq!(retries, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_with_no_body_and_with_seconds() {
    let (_db, b) = setup().await;
    let queue = unique("extend");
    configure(&b, &queue, json!({ "leaseTime": 2 })).await;
    push_numbered(&b, &queue, "Default", "ext", 1).await;
    let body = pop_ok(&b, &pop_path(&queue, None, "")).await;
    let lease = body["leaseId"].as_str().expect("leaseId").to_owned();

    // the Python client sends no body at all
    let r = extend(&b, &lease, None).await;
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["error"], Value::Null);
    let first = r["expiresAt"].as_str().expect("expiresAt").to_owned();
    assert!(is_utc_timestamp(&first, 3), "expiresAt {first}");
    let first_t = chrono::DateTime::parse_from_rfc3339(&first).expect("ts");
    let ahead = (first_t.with_timezone(&chrono::Utc) - chrono::Utc::now()).num_seconds();
    assert!(
        (50..=61).contains(&ahead),
        "default extension ~60 s, got {ahead}"
    );

    let r = extend(&b, &lease, Some(&json!({ "seconds": 600 }))).await;
    assert_eq!(r["success"], true, "{r}");
    let second = r["expiresAt"].as_str().expect("expiresAt").to_owned();
    assert!(second > first, "{second} after {first}");

    // an empty object is fine too, and never shortens the lease
    let r = extend(&b, &lease, Some(&json!({}))).await;
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["expiresAt"], second.as_str());

    // the lease really holds past the configured 2 s lease time
    sleep_ms(2400).await;
    pop_empty(&b, &pop_path(&queue, None, "")).await;
    let a = ack(&b, &messages(&body)[0], "completed", None).await;
    assert_eq!(a["success"], true, "{a}");
    assert_eq!(a["leaseReleased"], true, "{a}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extending_unknown_or_expired_leases_fails_with_an_http_error() {
    // an HTTP error, not a 200 with success false: the Python client 1.3.0
    // reports a renewal as failed only on an HTTP error
    let (_db, b) = setup().await;
    let unknown = uuid::Uuid::now_v7().to_string();
    let r = extend_expecting(&b, &unknown, None, StatusCode::NOT_FOUND).await;
    assert_eq!(r["success"], false);
    assert_eq!(r["error"], "Lease not found");
    assert_eq!(r["expiresAt"], Value::Null);

    let queue = unique("extend-expired");
    configure(&b, &queue, json!({ "leaseTime": 1 })).await;
    push_numbered(&b, &queue, "Default", "ee", 1).await;
    let body = pop_ok(&b, &pop_path(&queue, None, "")).await;
    let lease = body["leaseId"].as_str().expect("leaseId").to_owned();
    sleep_ms(1300).await;
    let r = extend_expecting(
        &b,
        &lease,
        Some(&json!({ "seconds": 30 })),
        StatusCode::CONFLICT,
    )
    .await;
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(r["error"], "Lease already expired");
    assert_eq!(r["expiresAt"], Value::Null);
    // and the message is claimable again
    let again = pop_ok(&b, &pop_path(&queue, None, "")).await;
    assert_eq!(txn_ids(&again), vec!["ee-0"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acking_with_an_expired_lease_is_refused() {
    let (db, b) = setup().await;
    let queue = unique("stale");
    configure(&b, &queue, json!({ "leaseTime": 1 })).await;
    push_numbered(&b, &queue, "Default", "st", 1).await;
    let first = pop_ok(&b, &pop_path(&queue, None, "")).await;
    let msg = messages(&first)[0].clone();

    sleep_ms(1400).await;
    let r = ack(&b, &msg, "completed", None).await;
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(r["error"], "Invalid or expired lease");
    let client = db.client().await.expect("db client");
    let pid = partition_id(&client, &queue, "Default").await;
    assert_eq!(
        cursor(&client, pid, "__QUEUE_MODE__").await.map(|c| c.0),
        Some(0)
    );

    // redelivered under a new lease; the old lease id stays refused, the new one works
    let second = pop_ok(&b, &pop_path(&queue, None, "")).await;
    let redelivered = messages(&second)[0].clone();
    assert_eq!(redelivered["id"], msg["id"]);
    let r = ack(&b, &msg, "completed", None).await;
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(r["error"], "Invalid or expired lease");
    let r = ack(&b, &redelivered, "completed", None).await;
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(
        cursor(&client, pid, "__QUEUE_MODE__").await,
        Some((1, false))
    );
}

/// Extends `lease` by 120 s; asserts success and returns how many partition
/// leases it renewed.
async fn renewed(b: &queen_testkit::TestBroker, lease: &str) -> i64 {
    let r = extend(b, lease, Some(&json!({ "seconds": 120 }))).await;
    assert_eq!(r["success"], true, "{r}");
    r["renewed"].as_i64().expect("renewed")
}

/// The one lease id of a pop body: the body's and every message's.
fn lease_of(body: &Value) -> String {
    let lease = body["leaseId"].as_str().expect("leaseId").to_owned();
    for m in messages(body) {
        assert_eq!(m["leaseId"], lease.as_str(), "{body}");
    }
    lease
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_pop_path_hands_out_a_lease_extend_finds() {
    // leases are found by the cursor row's key in their id or, shared by
    // several partitions, by lease_group (migration V24): each way a pop
    // leases must give an id that extends every partition it holds
    let (_db, b) = setup().await;
    let queue = unique("extend-paths");
    for p in ["p0", "p1", "p2"] {
        push_numbered(&b, &queue, p, p, 3).await;
    }
    let statement_pops = "queen_consume_statement_total{op=\"pop\"}";

    // a pop naming its partition (queen.claim_partition)
    let named = pop_ok(&b, &pop_path(&queue, Some("p0"), "batch=1")).await;
    let named_lease = lease_of(&named);
    assert_eq!(renewed(&b, &named_lease).await, 1);

    // a wildcard pop on first contact (queen.pop_queue)
    let first = pop_ok(&b, &pop_path(&queue, None, "batch=1")).await;
    let first_lease = lease_of(&first);
    assert_ne!(first_lease, named_lease);
    assert_eq!(renewed(&b, &first_lease).await, 1);

    // once acked, p0's cursor row is free and known: the next wildcard pop
    // takes the one-statement path (consume_flight.sql)
    let a = ack(&b, &messages(&named)[0], "completed", None).await;
    assert_eq!(a["success"], true, "{a}");
    let before = prometheus_value(&b, statement_pops).await.unwrap_or(0.0);
    let flown = pop_ok(&b, &pop_path(&queue, None, "batch=1")).await;
    assert_eq!(
        prometheus_value(&b, statement_pops).await.unwrap_or(0.0),
        before + 1.0,
        "the pop did not take the statement path"
    );
    let flown_lease = lease_of(&flown);
    assert_eq!(renewed(&b, &flown_lease).await, 1);

    // a pop of several partitions holds them under one shared lease
    let wide = pop_ok(
        &b,
        &pop_path(&queue, None, "consumerGroup=wide&batch=9&partitions=3"),
    )
    .await;
    assert_eq!(wide["partitionsClaimed"], 3, "{wide}");
    let wide_lease = lease_of(&wide);
    assert_eq!(renewed(&b, &wide_lease).await, 3);

    // each lease still acks what it holds, and then extends no more
    for (body, lease) in [(&first, &first_lease), (&flown, &flown_lease)] {
        let a = ack(&b, &messages(body)[0], "completed", None).await;
        assert_eq!(a["success"], true, "{a}");
        let r = extend_expecting(&b, lease, None, StatusCode::CONFLICT).await;
        assert_eq!(r["error"], "Lease not active", "{r}");
    }
    assert_eq!(ack_all_completed(&b, &wide, Some("wide")).await.len(), 9);
    let r = extend_expecting(&b, &wide_lease, None, StatusCode::CONFLICT).await;
    assert_eq!(r["error"], "Lease not active", "{r}");
    // an id that is no lease, whose first 8 bytes name a real cursor row
    let forged = format!("{}{}", &named_lease[..19], "0000-000000000000");
    let r = extend_expecting(&b, &forged, None, StatusCode::NOT_FOUND).await;
    assert_eq!(r["error"], "Lease not found", "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pops_and_acks_rewrite_cursor_rows_heap_only() {
    // no index covers a column a pop or an ack changes (migration V24), so
    // PostgreSQL updates the cursor rows in place on their page instead of
    // writing index entries for every lease
    let (db, b) = setup().await;
    let queue = unique("hot");
    push_numbered(&b, &queue, "Default", "h", 12).await;
    for _ in 0..12 {
        let body = pop_ok(&b, &pop_path(&queue, None, "batch=1")).await;
        let a = ack(&b, &messages(&body)[0], "completed", None).await;
        assert_eq!(a["success"], true, "{a}");
    }
    let client = db.client().await.expect("db client");
    // the broker's backends report their counts within a second or so
    let mut last = (0, 0);
    for _ in 0..100 {
        let row = client
            .query_one(
                "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables
                 WHERE schemaname = 'queen' AND relname = 'log_consumers'",
                &[],
            )
            .await
            .expect("table stats");
        last = (row.get::<_, i64>(0), row.get::<_, i64>(1));
        if last.0 >= 23 {
            break;
        }
        sleep_ms(100).await;
    }
    assert!(last.0 >= 23, "pops and acks updated {} times", last.0);
    assert_eq!(last.1, last.0, "(updates, heap-only updates) = {last:?}");
}
