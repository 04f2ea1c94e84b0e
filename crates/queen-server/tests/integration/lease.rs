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
