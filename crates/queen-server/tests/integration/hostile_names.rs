//! Issue 33: names and keys a URL path rewrites, values the database cannot
//! hold, numbers out of range, on the surfaces of the 2.6 client (KV,
//! timers, ephemeral queues, transaction riders) and the core routes. Every
//! case answers a 4xx JSON error naming the field, or does what the docs
//! say, and nothing of a refused request is written.

use std::time::{Duration, Instant};

use queen_testkit::TestBroker;
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::*;
use crate::hostile::{raw, RawAnswer};

/// Sends one request on a raw socket: the path exactly as given (no client
/// removes its dot segments), `Connection: close`.
pub(crate) async fn raw_request(
    b: &TestBroker,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> RawAnswer {
    let body = body.unwrap_or("");
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    raw(b, format!("{head}{body}").as_bytes()).await
}

/// The error of a refused answer: its status is 400 and its body JSON with
/// a string `error`; returns the whole body.
#[track_caller]
fn refused(status: StatusCode, body: &Value) -> Value {
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body["error"].is_string(), "no error string: {body}");
    body.clone()
}

fn b64(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}

fn schedule(queue: &str, key: &str, delay: Value) -> Value {
    json!({"op": "schedule", "queue": queue, "timerKey": key, "payload": b64("{\"t\":1}"),
           "delayMs": delay, "txn": format!("txn-{key}")})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_and_keys_a_url_path_rewrites_are_refused_where_they_are_created() {
    let (db, b) = setup().await;
    let client = db.client().await.unwrap();
    let q = unique("tq");

    // timers: a key with a dot or empty segment, a queue named "."
    for key in ["d/./x", "dots/../x", "..", "x/", "/x", "a//b", "%2e/x"] {
        let (s, body) = b
            .post(
                "/api/v1/timers",
                &json!({"operations": [schedule(&q, key, json!(60_000))]}),
            )
            .await;
        let body = refused(s, &body);
        assert_eq!(body["reason"], "timers_bad_key", "{key}: {body}");
        assert!(
            body["detail"].as_str().unwrap().contains("timerKey"),
            "{body}"
        );
    }
    let (s, body) = b
        .post(
            "/api/v1/timers",
            &json!([schedule(".", "Q2/k", json!(60_000))]),
        )
        .await;
    assert_eq!(refused(s, &body)["reason"], "timers_bad_queue");
    assert_eq!(count(&client, "SELECT count(*) FROM queen.timers").await, 0);

    // a key with a `/` that survives the trip is addressable as itself
    let (s, _) = b
        .post(
            "/api/v1/timers",
            &json!([schedule(&q, "d/x", json!(60_000))]),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let (s, body) = b.get(&format!("/api/v1/timers/{q}/d/x")).await;
    assert_eq!(
        (s, body["found"].clone()),
        (StatusCode::OK, json!(true)),
        "{body}"
    );
    // a raw path with a dot segment (no client would send it) is refused, not
    // read as another key
    let a = raw_request(&b, "GET", &format!("/api/v1/timers/{q}/d/./x"), None).await;
    assert_eq!(a.status, 400);
    let a = raw_request(&b, "DELETE", &format!("/api/v1/timers/{q}/d/%2e/x"), None).await;
    assert_eq!(a.status, 400);
    assert_eq!(count(&client, "SELECT count(*) FROM queen.timers").await, 1);

    // ephemeral queue, partition and group names
    for body in [
        json!({"queue": "..", "messages": [{"payload": 1}]}),
        json!({"queue": ".", "messages": [{"payload": 1}]}),
        json!({"queue": "e/../f", "messages": [{"payload": 1}]}),
        json!({"queue": "eq", "partition": "..", "messages": [{"payload": 1}]}),
    ] {
        let (s, answer) = b.post("/api/v1/ephemeral/push", &body).await;
        assert_eq!(
            refused(s, &answer)["code"],
            "ephemeral_bad_request",
            "{body}"
        );
    }
    let (s, answer) = b
        .post("/api/v1/ephemeral/configure", &json!({"queue": "./x"}))
        .await;
    assert_eq!(refused(s, &answer)["code"], "ephemeral_bad_request");
    let (s, answer) = b.get("/api/v1/ephemeral/pop?queue=..&wait=false").await;
    assert_eq!(refused(s, &answer)["code"], "ephemeral_bad_request");
    let (s, answer) = b
        .get("/api/v1/ephemeral/pop?queue=eq&group=g/&wait=false")
        .await;
    assert_eq!(refused(s, &answer)["code"], "ephemeral_bad_request");
    for table in [
        "ephemeral_queues",
        "ephemeral_declarations",
        "ephemeral_messages",
    ] {
        let n = count(&client, &format!("SELECT count(*) FROM queen.{table}")).await;
        assert_eq!(n, 0, "{table}");
    }

    // queue, partition and consumer group names on the core routes
    let (s, body) = b
        .post(
            "/api/v1/push",
            &json!({"items": [{"queue": "a/../b", "payload": 1}]}),
        )
        .await;
    assert!(refused(s, &body)["error"]
        .as_str()
        .unwrap()
        .starts_with("queue must not be"));
    let (s, body) = b
        .post(
            "/api/v1/push",
            &json!({"items": [{"queue": "ok", "partition": "p/", "payload": 1}]}),
        )
        .await;
    assert!(refused(s, &body)["error"]
        .as_str()
        .unwrap()
        .starts_with("partition must not"));
    let (s, body) = b.post("/api/v1/configure", &json!({"queue": "."})).await;
    refused(s, &body);
    let (s, body) = b
        .post(
            "/api/v1/transaction",
            &json!({"operations": [{"type": "push", "items": [{"queue": "..", "payload": 1}]}]}),
        )
        .await;
    refused(s, &body);
    let (s, body) = b
        .get("/api/v1/pop/queue/ok?consumerGroup=..&wait=false")
        .await;
    assert!(refused(s, &body)["error"]
        .as_str()
        .unwrap()
        .starts_with("consumerGroup"));
    let (s, body) = b
        .post(
            "/api/v1/traces",
            &json!({"partitionId": uuid::Uuid::new_v4(), "transactionId": "t",
            "traceName": "..", "data": {}}),
        )
        .await;
    assert!(
        refused(s, &body)["error"]
            .as_str()
            .unwrap()
            .contains("traceName"),
        "{body}"
    );
    // a path parameter naming such a resource: 400, after percent-decoding
    for path in [
        "/api/v1/resources/queues/%2E%2E",
        "/api/v1/status/queues/.",
        "/api/v1/consumer-groups/a%2F..%2Fb",
        "/api/v1/ephemeral/queues/%2e%2e/depth",
        "/api/v1/pop/queue/q/partition/%2e?wait=false",
    ] {
        let a = raw_request(&b, "GET", path, None).await;
        assert_eq!(
            a.status,
            400,
            "{path}: {}",
            String::from_utf8_lossy(&a.body)
        );
    }
    for table in [
        "queues",
        "partitions",
        "message_traces",
        "consumer_subscriptions",
    ] {
        let n = count(&client, &format!("SELECT count(*) FROM queen.{table}")).await;
        assert_eq!(n, 0, "{table}");
    }
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_the_database_cannot_hold_are_refused_naming_the_field() {
    let (db, b) = setup().await;
    let client = db.client().await.unwrap();
    let put = |key: &str, value: Value| json!({"op": "put", "ns": "h", "key": key, "value": value, "forever": true});

    // NUL in a KV value (a string, an object key, deep inside), in getPrefix's after
    for (value, field) in [
        (json!("a\u{0}b"), "value"),
        (json!({"k\u{0}": 1}), "value (an object key)"),
        (json!({"a": [1, {"b": "\u{0}"}]}), "value.a[1].b"),
    ] {
        let (s, body) = b
            .post("/api/v1/kv", &json!([put("ok", json!(1)), put("k", value)]))
            .await;
        let body = refused(s, &body);
        assert_eq!(
            (body["error"].as_str(), body["reason"].as_str()),
            (Some("kv_bad_request"), Some("kv_bad_value"))
        );
        assert!(
            body["detail"]
                .as_str()
                .unwrap()
                .contains(&format!("{field} must not contain NUL")),
            "{body}"
        );
    }
    let (s, body) = b
        .post(
            "/api/v1/kv",
            &json!([{"op": "getPrefix", "ns": "h", "prefix": "a", "after": "a\u{0}"}]),
        )
        .await;
    assert!(refused(s, &body)["detail"]
        .as_str()
        .unwrap()
        .contains("after"));
    // the same inside /transaction's kv rider
    let (s, body) = b
        .post(
            "/api/v1/transaction",
            &json!({"operations": [], "kv": [put("k", json!("a\u{0}"))]}),
        )
        .await;
    assert!(s.is_client_error(), "{s} {body}");
    assert_eq!(count(&client, "SELECT count(*) FROM queen.kv").await, 0);

    // NUL in a timer's txn
    let mut op = schedule("tq", "k", json!(1000));
    op["txn"] = json!("t\u{0}x");
    let (s, body) = b.post("/api/v1/timers", &json!([op])).await;
    assert_eq!(refused(s, &body)["reason"], "timers_bad_txn");
    assert_eq!(count(&client, "SELECT count(*) FROM queen.timers").await, 0);

    // incr past what a JSON number holds: 400 naming delta, nothing applied
    let (s, _) = b
        .post("/api/v1/kv", &json!([put("big", json!(1e308))]))
        .await;
    assert_eq!(s, StatusCode::OK);
    let (s, body) = b
        .post(
            "/api/v1/kv",
            &json!([put("other", json!(2)),
            {"op": "incr", "ns": "h", "key": "big", "delta": 1e308, "forever": true}]),
        )
        .await;
    let body = refused(s, &body);
    assert_eq!(body["error"], "kv_bad_request");
    assert!(
        body["detail"].as_str().unwrap().starts_with("delta:"),
        "{body}"
    );
    let (_, got) = b
        .post(
            "/api/v1/kv",
            &json!([{"op": "get", "ns": "h", "key": "big"}]),
        )
        .await;
    assert_eq!(got["results"][0]["value"], json!(1e308), "{got}");
    assert_eq!(
        count(&client, "SELECT count(*) FROM queen.kv WHERE key = 'other'").await,
        0
    );
    // exact decimals within range
    let (_, got) = b
        .post(
            "/api/v1/kv",
            &json!([{"op": "incr", "ns": "h", "key": "dec", "delta": 0.1, "forever": true}]),
        )
        .await;
    assert_eq!(got["results"][0]["value"], json!(0.1));
    let (_, got) = b
        .post(
            "/api/v1/kv",
            &json!([{"op": "incr", "ns": "h", "key": "dec", "delta": 0.2, "forever": true}]),
        )
        .await;
    assert_eq!(got["results"][0]["value"], json!(0.3));

    // a delay far below zero fires at the next sweep (the docs' "<= 0")
    let q = unique("neg");
    let (s, body) = b
        .post(
            "/api/v1/timers",
            &json!([
                schedule(&q, "a", json!(-1_000_000_000_000_000_i64)),
                schedule(&q, "b", json!(i64::MIN))
            ]),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let (s, body) = b
        .post(
            "/api/v1/transaction",
            &json!({"operations": [],
            "timers": [schedule(&q, "c", json!(i64::MIN))]}),
        )
        .await;
    assert_eq!(
        (s, body["success"].clone()),
        (StatusCode::OK, json!(true)),
        "{body}"
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut got = Vec::new();
    while got.len() < 3 && Instant::now() < deadline {
        let (s, body) = b
            .get(&pop_path(&q, None, "batch=10&wait=false&autoAck=true"))
            .await;
        if s == StatusCode::OK {
            got.extend(messages(&body));
        } else {
            sleep_ms(200).await;
        }
    }
    assert_eq!(got.len(), 3, "the three timers fired");
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_id_with_a_dot_segment_is_refused_json_and_binary() {
    use queen_proto::push_binary::{encode_push, Batch, Form, Message};

    let (db, b) = setup().await;
    let q = unique("txn-dots");
    for txn in ["..", "a/../b", "a/./b", "%2e%2e"] {
        let (status, body) = b
            .post(
                "/api/v1/push",
                &json!({"items": [{"queue": q, "partition": "p", "payload": 1, "transactionId": txn}]}),
            )
            .await;
        let error = assert_error(status, &body, StatusCode::BAD_REQUEST);
        assert!(error.contains("transactionId"), "{txn}: {error}");
        let batches = [Batch {
            queue: &q,
            partition: "p",
            messages: vec![Message {
                transaction_id: txn,
                message_id: uuid::Uuid::now_v7(),
                payload: b"1",
            }],
        }];
        for form in [Form::Plain { zstd: false }, Form::Frames] {
            let bytes = encode_push(&batches, form, false).unwrap();
            let r = b
                .http
                .post(b.url("/api/v1/push"))
                .header("content-type", "application/x-queen-push")
                .body(bytes)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{txn} {form:?}");
            let body: Value = r.json().await.unwrap();
            assert!(
                body["error"].as_str().unwrap().contains("transactionId"),
                "{body}"
            );
        }
    }
    // a slash alone travels percent-encoded: still accepted
    push_one(&b, &q, "p", json!(1), "order/42").await;
    let client = db.client().await.unwrap();
    assert_eq!(
        count(&client, "SELECT count(*) FROM queen.message_keys").await,
        1
    );
}
