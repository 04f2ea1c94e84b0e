//! Request validation, unknown routes, body limits and CORS (§1, §3).

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::*;

/// Posts raw bytes as JSON and returns status and parsed body.
async fn post_raw(b: &queen_testkit::TestBroker, path: &str, body: &str) -> (StatusCode, Value) {
    let resp = b
        .http
        .post(b.url(path))
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .expect("request");
    let status = resp.status();
    let ct = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap_or_default().to_owned());
    let bytes = resp.bytes().await.expect("body");
    let v: Value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| panic!("non-JSON answer: {}", String::from_utf8_lossy(&bytes)));
    if !status.is_success() {
        assert!(
            ct.as_deref()
                .is_some_and(|c| c.starts_with("application/json")),
            "content-type {ct:?}"
        );
    }
    (status, v)
}

async fn assert_nothing_written(db: &queen_testkit::TestDb) {
    let client = db.client().await.expect("db client");
    assert_eq!(count(&client, "SELECT count(*) FROM queen.queues").await, 0);
    assert_eq!(
        count(&client, "SELECT count(*) FROM queen.partitions").await,
        0
    );
    assert_eq!(
        count(&client, "SELECT count(*) FROM queen.segments").await,
        0
    );
    assert_eq!(
        count(&client, "SELECT count(*) FROM queen.log_consumers").await,
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_json_is_400_on_every_route() {
    let (db, b) = setup().await;
    for path in [
        "/api/v1/push",
        "/api/v1/configure",
        "/api/v1/ack",
        "/api/v1/ack/batch",
        "/api/v1/transaction",
    ] {
        let (status, body) = post_raw(&b, path, r#"{"items": [ {"queue": "q""#).await;
        let e = assert_error(status, &body, StatusCode::BAD_REQUEST);
        assert!(e.starts_with("Invalid JSON"), "{path}: {e}");
    }
    assert_nothing_written(&db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_items_are_validated_all_or_nothing() {
    let (db, b) = setup().await;
    let q = unique("val");
    let long = "x".repeat(256);
    let cases: Vec<(Value, Option<&str>)> = vec![
        (json!({}), Some("items array is required")),
        (
            json!({ "items": { "queue": q } }),
            Some("items array is required"),
        ),
        (json!({ "items": "nope" }), Some("items array is required")),
        (
            json!({ "items": [ { "payload": 1 } ] }),
            Some("Queue must be a string"),
        ),
        (
            json!({ "items": [ { "queue": 5 } ] }),
            Some("Queue must be a string"),
        ),
        (
            json!({ "items": [ { "queue": q, "partition": 7 } ] }),
            Some("Partition must be a string"),
        ),
        (
            json!({ "items": [ { "queue": q, "transactionId": 7 } ] }),
            Some("TransactionId must be a string"),
        ),
        (
            json!({ "items": [ { "queue": q, "traceId": 7 } ] }),
            Some("TraceId must be a string"),
        ),
        (
            json!({ "items": [ { "queue": q, "traceId": "not-a-uuid" } ] }),
            None,
        ),
        (json!({ "items": [ { "queue": "" } ] }), None),
        (json!({ "items": [ { "queue": long } ] }), None),
        (
            json!({ "items": [ { "queue": q, "partition": long } ] }),
            None,
        ),
        (
            json!({ "items": [ { "queue": q, "partition": "" } ] }),
            None,
        ),
        (
            json!({ "items": [ { "queue": q, "transactionId": long } ] }),
            None,
        ),
        // the first bad item rejects the whole request
        (
            json!({ "items": [ { "queue": q, "payload": 1 }, { "queue": q, "partition": 1 } ] }),
            Some("Partition must be a string"),
        ),
        (
            json!({ "items": [ { "queue": q, "payload": 1 }, { "queue": q, "traceId": "zzz" } ] }),
            None,
        ),
    ];
    for (body, want) in cases {
        let (status, res) = b.post("/api/v1/push", &body).await;
        let e = assert_error(status, &res, StatusCode::BAD_REQUEST);
        assert!(!e.is_empty());
        if let Some(want) = want {
            assert_eq!(e, want, "for {body}");
        }
    }
    assert_nothing_written(&db).await;

    // exactly 255 characters is fine
    let name = "q".repeat(255);
    let part = "p".repeat(255);
    let r = push_items(
        &b,
        json!([{ "queue": name, "partition": part, "payload": 1 }]),
    )
    .await;
    assert_eq!(r[0]["status"], "queued");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configure_is_validated() {
    let (db, b) = setup().await;
    let (status, res) = post_raw(&b, "/api/v1/configure", "").await;
    assert_eq!(
        assert_error(status, &res, StatusCode::BAD_REQUEST),
        "queue is required"
    );
    let (status, res) = b.post("/api/v1/configure", &json!({ "queue": 5 })).await;
    assert_eq!(
        assert_error(status, &res, StatusCode::BAD_REQUEST),
        "queue is required"
    );
    let (status, res) = b
        .post(
            "/api/v1/configure",
            &json!({ "queue": unique("cv"), "options": { "retryLimit": "many" } }),
        )
        .await;
    assert_error(status, &res, StatusCode::BAD_REQUEST);
    let (status, res) = b.post("/api/v1/configure", &json!({ "queue": "" })).await;
    assert_error(status, &res, StatusCode::BAD_REQUEST);
    assert_nothing_written(&db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ack_requests_are_validated_with_the_contract_texts() {
    let (db, b) = setup().await;
    let pid = uuid::Uuid::new_v4().to_string();
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "/api/v1/ack",
            json!({ "partitionId": pid }),
            "transactionId is required",
        ),
        (
            "/api/v1/ack",
            json!({ "transactionId": "", "partitionId": pid }),
            "transactionId is required",
        ),
        (
            "/api/v1/ack",
            json!({ "transactionId": 5, "partitionId": pid }),
            "transactionId is required",
        ),
        (
            "/api/v1/ack",
            json!({ "transactionId": "t" }),
            "partitionId is required to ensure message uniqueness",
        ),
        (
            "/api/v1/ack",
            json!({ "transactionId": "t", "partitionId": null }),
            "partitionId is required to ensure message uniqueness",
        ),
        (
            "/api/v1/ack/batch",
            json!({}),
            "acknowledgments array is required",
        ),
        (
            "/api/v1/ack/batch",
            json!({ "acknowledgments": {} }),
            "acknowledgments array is required",
        ),
        (
            "/api/v1/ack/batch",
            json!({ "acknowledgments": [ { "partitionId": pid } ] }),
            "Each acknowledgment must have a valid transactionId string",
        ),
        (
            "/api/v1/ack/batch",
            json!({ "acknowledgments": [ { "transactionId": "t", "partitionId": pid }, { "transactionId": "t" } ] }),
            "Each acknowledgment must have a valid partitionId string to ensure message uniqueness",
        ),
    ];
    for (path, body, want) in cases {
        let (status, res) = b.post(path, &body).await;
        assert_eq!(
            assert_error(status, &res, StatusCode::BAD_REQUEST),
            want,
            "{path} {body}"
        );
    }
    // a partitionId that is not a UUID
    let (status, res) = b
        .post(
            "/api/v1/ack",
            &json!({ "transactionId": "t", "partitionId": "not-a-uuid" }),
        )
        .await;
    assert_error(status, &res, StatusCode::BAD_REQUEST);
    assert_nothing_written(&db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_ack_status_fails_in_the_body_and_changes_nothing() {
    let (db, b) = setup().await;
    let queue = unique("ack-status");
    push_numbered(&b, &queue, "Default", "s", 1).await;
    let body = pop_ok(&b, &pop_path(&queue, None, "")).await;
    let msg = messages(&body)[0].clone();
    let r = ack(&b, &msg, "maybe", None).await;
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(r["error"], Value::Null, "{r}");
    assert_eq!(r["dlq"], false);
    assert_eq!(r["leaseReleased"], false);
    let client = db.client().await.expect("db client");
    let pid = partition_id(&client, &queue, "Default").await;
    assert_eq!(
        cursor(&client, pid, "__QUEUE_MODE__").await,
        Some((0, true))
    );
    assert_eq!(
        count(&client, "SELECT count(*) FROM queen.dead_letters").await,
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transaction_requests_are_validated() {
    let (db, b) = setup().await;
    let (status, res) = b.post("/api/v1/transaction", &json!({})).await;
    assert_eq!(
        assert_error(status, &res, StatusCode::BAD_REQUEST),
        "operations array required"
    );
    let (status, res) = b
        .post("/api/v1/transaction", &json!({ "operations": [] }))
        .await;
    assert_eq!(
        assert_error(status, &res, StatusCode::BAD_REQUEST),
        "operations array cannot be empty"
    );
    let q = unique("txv");
    let (status, res) = b
        .post(
            "/api/v1/transaction",
            &json!({ "operations": [
                { "type": "push", "items": [ { "queue": q, "payload": 1 } ] },
                { "type": "ack", "partitionId": uuid::Uuid::new_v4().to_string() }
            ] }),
        )
        .await;
    assert_error(status, &res, StatusCode::BAD_REQUEST);
    assert_nothing_written(&db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_routes_answer_404_json() {
    let (_db, b) = setup().await;
    for (method, path) in [
        (Method::GET, "/api/v1/nope"),
        (Method::GET, "/api/v1/kv/some-key"),
        (Method::GET, "/api/v1/push"),
        (Method::DELETE, "/api/v1/queues/x/clear"),
    ] {
        let (status, body) = b.call(method.clone(), path, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {path}");
        assert_eq!(body, json!({ "error": "Not found" }), "{method} {path}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_over_the_limit_answer_413_json() {
    let (db, b) = setup_with(&[("MAX_BODY_BYTES", "1024")]).await;
    let queue = unique("big");
    let payload = "x".repeat(2000);
    let (status, res) = b
        .post(
            "/api/v1/push",
            &json!({ "items": [ { "queue": queue, "payload": payload } ] }),
        )
        .await;
    assert_error(status, &res, StatusCode::PAYLOAD_TOO_LARGE);
    let (status, res) = b
        .post(
            "/api/v1/ack/batch",
            &json!({ "acknowledgments": [ { "transactionId": payload, "partitionId": "x" } ] }),
        )
        .await;
    assert_error(status, &res, StatusCode::PAYLOAD_TOO_LARGE);
    assert_nothing_written(&db).await;
    // a body under the limit still works
    push_one(&b, &queue, "Default", json!("small"), "small-1").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_preflight_and_headers() {
    let (_db, b) = setup().await;
    let resp = b
        .http
        .request(Method::OPTIONS, b.url("/api/v1/push"))
        .header("Origin", "http://example.com")
        .header("Access-Control-Request-Method", "POST")
        .send()
        .await
        .expect("preflight");
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    let h = resp.headers().clone();
    assert_eq!(h["access-control-allow-origin"], "*");
    assert_eq!(
        h["access-control-allow-methods"],
        "GET, POST, PUT, DELETE, OPTIONS"
    );
    assert_eq!(
        h["access-control-allow-headers"],
        "Content-Type, Authorization"
    );
    assert_eq!(h["access-control-max-age"], "86400");
    assert!(resp.bytes().await.expect("body").is_empty());

    // any path, even unknown ones
    let resp = b
        .http
        .request(Method::OPTIONS, b.url("/whatever/else"))
        .send()
        .await
        .expect("preflight");
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);

    // normal answers carry the CORS headers and a JSON content type
    for (method, path, want) in [
        (Method::GET, "/health", StatusCode::OK),
        (Method::GET, "/api/v1/nope", StatusCode::NOT_FOUND),
        (Method::POST, "/api/v1/push", StatusCode::BAD_REQUEST),
    ] {
        let resp = b
            .http
            .request(method.clone(), b.url(path))
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .expect("request");
        assert_eq!(resp.status(), want, "{method} {path}");
        let h = resp.headers();
        assert_eq!(h["access-control-allow-origin"], "*", "{method} {path}");
        assert_eq!(
            h["access-control-allow-methods"],
            "GET, POST, PUT, DELETE, OPTIONS"
        );
        assert!(
            h["content-type"]
                .to_str()
                .unwrap_or_default()
                .starts_with("application/json"),
            "{method} {path}"
        );
    }
}
