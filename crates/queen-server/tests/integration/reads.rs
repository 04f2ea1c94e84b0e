//! Issue 21: reads by offset, partition discovery, queue depth, dead-letter
//! retry and ephemeral queues: semantics the compat suite cannot reach, and
//! every kind of bad input (a 4xx with a JSON `error`, nothing written).

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::{assert_error, configure, push_numbered, setup, unique};

async fn fetch(b: &queen_testkit::TestBroker, body: Value) -> (StatusCode, Value) {
    b.post("/api/v1/fetch", &body).await
}

#[tokio::test]
async fn fetch_refuses_bad_entries_and_reads_by_offset_without_moving_cursors() {
    let (_db, b) = setup().await;
    let q = unique("fetch");
    push_numbered(&b, &q, "p", "m", 3).await;

    for bad in [
        json!({}),
        json!({ "entries": "x" }),
        json!({ "entries": [ { "partition": "p" } ] }),
        json!({ "entries": [ { "queue": q, "offset": -1 } ] }),
        json!({ "entries": [ { "queue": q, "offset": "0" } ] }),
        json!({ "entries": [ { "queue": q, "offset": 1.5 } ] }),
        json!({ "entries": [ { "queue": q, "partition": true } ] }),
        json!({ "entries": [ { "queue": q, "maxBytes": -5 } ] }),
        json!({ "entries": [ 7 ] }),
        json!({ "entries": [ { "queue": q } ], "maxWaitMs": "soon" }),
    ] {
        let (status, body) = fetch(&b, bad.clone()).await;
        assert_error(status, &body, StatusCode::BAD_REQUEST);
    }
    let many: Vec<Value> = (0..1025)
        .map(|_| json!({ "queue": q, "partition": "p" }))
        .collect();
    let (status, body) = fetch(&b, json!({ "entries": many })).await;
    assert!(assert_error(status, &body, StatusCode::BAD_REQUEST).contains("too many entries"));

    // at least one record even over the budget; bounds always present
    let (status, body) = fetch(
        &b,
        json!({ "entries": [
            { "queue": q, "partition": "p", "offset": 0, "maxBytes": 1 },
            { "queue": q, "partition": "p", "offset": 3 },
            { "queue": q, "partition": "p", "offset": 4 },
            { "queue": unique("none"), "partition": "p" },
            { "queue": q, "partition": 7 },
            { "queue": q },
        ] }),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let e = body["entries"].as_array().unwrap();
    assert_eq!(e.len(), 6);
    assert_eq!(e[0]["records"].as_array().unwrap().len(), 1, "{body}");
    assert_eq!(e[0]["records"][0]["offset"], 0);
    assert_eq!(e[0]["records"][0]["payload"], json!({ "n": 0 }));
    assert_eq!(e[0]["records"][0]["transactionId"], "m-0");
    assert_eq!(
        (
            e[0]["highWatermark"].clone(),
            e[0]["logStartOffset"].clone()
        ),
        (json!(3), json!(0))
    );
    assert!(
        e[1]["records"].as_array().unwrap().is_empty() && e[1].get("error").is_none(),
        "{body}"
    );
    assert_eq!(e[2]["error"], "OFFSET_OUT_OF_RANGE");
    assert_eq!(e[3]["error"], "UNKNOWN_TOPIC_OR_PARTITION");
    assert_eq!(
        (e[4]["partition"].clone(), e[4]["highWatermark"].clone()),
        (json!("7"), json!(0))
    );
    assert_eq!(e[5]["partition"], "Default");

    // nothing moved: the first pop of the queue still starts at message 0
    let (status, popped) = b
        .get(&format!("/api/v1/pop/queue/{q}/partition/p?batch=1"))
        .await;
    assert_eq!(status, StatusCode::OK, "{popped}");
    assert_eq!(popped["messages"][0]["transactionId"], "m-0");
}

#[tokio::test]
async fn partition_discovery_pages_refuses_bad_input_and_its_safe_time_holds() {
    let (_db, b) = setup().await;
    let q = unique("changed");
    for p in ["a", "b", "c", "d", "e"] {
        push_numbered(&b, &q, p, p, 1).await;
    }
    let call = |entry: Value| {
        let b = &b;
        async move {
            b.post("/api/v1/partitions/changed", &json!({ "entries": [entry] }))
                .await
        }
    };
    for bad in [
        json!({ "limit": 2 }),
        json!({ "queue": q, "since": "yesterday-ish" }),
        json!({ "queue": q, "since": 5 }),
        json!({ "queue": q, "limit": -1 }),
        json!({ "queue": q, "after": 3 }),
    ] {
        let (status, body) = call(bad).await;
        assert_error(status, &body, StatusCode::BAD_REQUEST);
    }
    let (status, body) = call(json!({ "queue": q, "after": "not-a-cursor" })).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["entries"][0]["error"], "BAD_CURSOR");

    // pages of 2 by name, then the end
    let mut names = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..5 {
        let mut entry = json!({ "queue": q, "limit": 2 });
        if let Some(a) = &after {
            entry["after"] = json!(a);
        }
        let (status, body) = call(entry).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let e = &body["entries"][0];
        names.extend(
            e["partitions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["name"].as_str().unwrap().to_owned()),
        );
        match e["next"].as_str() {
            Some(n) => after = Some(n.to_owned()),
            None => break,
        }
    }
    assert_eq!(names, ["a", "b", "c", "d", "e"]);

    // a name cursor in since mode is another mode's cursor
    let (_, body) = call(json!({ "queue": q, "limit": 2 })).await;
    let cursor = body["entries"][0]["next"].as_str().unwrap().to_owned();
    let safe = body["safeTime"].as_str().unwrap().to_owned();
    assert_eq!(body["safeTimeDegraded"], false);
    let (_, body) = call(json!({ "queue": q, "since": safe, "after": cursor })).await;
    assert_eq!(body["entries"][0]["error"], "BAD_CURSOR");

    // everything written before the call is before its safe time
    let (_, body) = call(json!({ "queue": q, "since": safe })).await;
    assert_eq!(body["entries"][0]["partitions"], json!([]), "{body}");
    push_numbered(&b, &q, "c", "c2", 1).await;
    let (_, body) = call(json!({ "queue": q, "since": safe })).await;
    let parts = body["entries"][0]["partitions"].as_array().unwrap();
    assert_eq!(parts.len(), 1, "{body}");
    assert_eq!(
        (parts[0]["name"].clone(), parts[0]["lastOffset"].clone()),
        (json!("c"), json!(1))
    );
}

#[tokio::test]
async fn depth_and_retry_refuse_bad_input() {
    let (_db, b) = setup().await;
    let (status, body) = b
        .get(&format!(
            "/api/v1/resources/queues/{}/depth",
            unique("none")
        ))
        .await;
    assert_eq!(
        assert_error(status, &body, StatusCode::NOT_FOUND),
        "Queue not found"
    );

    let q = unique("retry");
    configure(&b, &q, json!({ "retryLimit": 0 })).await;
    push_numbered(&b, &q, "Default", "t", 1).await;
    let (_, popped) = b.get(&format!("/api/v1/pop/queue/{q}?batch=1")).await;
    let m = &popped["messages"][0];
    let (status, acked) = b
        .post(
            "/api/v1/ack",
            &json!({ "transactionId": m["transactionId"], "partitionId": m["partitionId"],
                     "leaseId": m["leaseId"], "status": "failed", "error": "x" }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{acked}");
    let pid = m["partitionId"].as_str().unwrap();

    let (status, body) = b
        .post("/api/v1/messages/not-a-uuid/t-0/retry", &json!({}))
        .await;
    assert_error(status, &body, StatusCode::BAD_REQUEST);
    let (status, body) = b
        .post(
            &format!("/api/v1/messages/{pid}/t-0/retry"),
            &json!({ "queue": "elsewhere" }),
        )
        .await;
    assert_error(status, &body, StatusCode::BAD_REQUEST);
    let (status, body) = b
        .post(&format!("/api/v1/messages/{pid}/nope/retry"), &json!({}))
        .await;
    assert_error(status, &body, StatusCode::NOT_FOUND);
    assert_eq!(
        (body["success"].clone(), body["result"].clone()),
        (json!(false), json!("gone"))
    );
    // none of that touched the dead letter
    let (_, dlq) = b.get(&format!("/api/v1/dlq?queue={q}")).await;
    assert_eq!(dlq["total"], 1, "{dlq}");

    let (status, body) = b
        .post(&format!("/api/v1/messages/{pid}/t-0/retry"), &json!({}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["result"], "moved");
    assert_eq!(body["replayedAs"]["offset"], 1, "{body}");
    let (_, dlq) = b.get(&format!("/api/v1/dlq?queue={q}")).await;
    assert_eq!(dlq["total"], 0, "{dlq}");
}

fn code(body: &Value) -> &str {
    body["code"]
        .as_str()
        .unwrap_or_else(|| panic!("no code in {body}"))
}

#[tokio::test]
async fn ephemeral_bad_input_is_refused_with_a_code_and_writes_nothing() {
    let (_db, b) = setup().await;
    let q = unique("eph-bad");
    for bad in [
        json!({ "queue": q, "options": { "maxLenght": 3 } }),
        json!({ "queue": q, "options": { "maxLength": -1 } }),
        json!({ "queue": q, "options": { "leaseSeconds": 1.5 } }),
        json!({ "queue": q, "options": { "policy": "evict" } }),
        json!({ "queue": q, "options": { "windowBuffer": { "ms": 5, "size": 3 } } }),
        json!({ "queue": q, "options": [] }),
        json!({ "options": {} }),
        json!({ "queue": "", "options": {} }),
        json!({ "queue": "a\u{1}b", "options": {} }),
        json!({ "queue": "x".repeat(513), "options": {} }),
    ] {
        let (status, body) = b.post("/api/v1/ephemeral/configure", &bad).await;
        assert_error(status, &body, StatusCode::BAD_REQUEST);
        assert_eq!(code(&body), "ephemeral_bad_request");
    }
    let many: Vec<Value> = (0..10_001).map(|i| json!({ "payload": i })).collect();
    for bad in [
        json!({ "messages": [ { "payload": 1 } ] }),
        json!({ "queue": q, "messages": "x" }),
        json!({ "queue": q, "messages": [ { "data": 1 } ] }),
        json!({ "queue": q, "messages": [ 5 ] }),
        json!({ "queue": q, "partition": 3, "messages": [ { "payload": 1 } ] }),
        json!({ "queue": q, "messages": many }),
    ] {
        let (status, body) = b.post("/api/v1/ephemeral/push", &bad).await;
        assert_error(status, &body, StatusCode::BAD_REQUEST);
        assert_eq!(code(&body), "ephemeral_bad_request");
    }
    // nothing was declared or pushed
    let (status, body) = b.get(&format!("/api/v1/ephemeral/queues/{q}/depth")).await;
    assert_error(status, &body, StatusCode::NOT_FOUND);
    assert_eq!(code(&body), "ephemeral_queue_not_found");
    let (_, all) = b.get("/api/v1/ephemeral/queues").await;
    assert_eq!(all["count"], 0, "{all}");

    for bad in [
        "/api/v1/ephemeral/pop",
        "/api/v1/ephemeral/pop?queue=",
        "/api/v1/ephemeral/pop?queue=a&batch=x",
        "/api/v1/ephemeral/pop?queue=a&timeout=-1",
    ] {
        let (status, body) = b.get(bad).await;
        assert_error(status, &body, StatusCode::BAD_REQUEST);
    }

    // an ack call with one bad id applies none of its acks
    let (status, _) = b
        .post(
            "/api/v1/ephemeral/push",
            &json!({ "queue": q, "messages": [ { "payload": { "k": 1 } } ] }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (_, popped) = b.get(&format!("/api/v1/ephemeral/pop?queue={q}")).await;
    let id = popped["messages"][0]["id"].as_str().unwrap().to_owned();
    for bad in [
        json!({ "queue": q, "acks": [ { "id": id }, { "id": "garbage" } ] }),
        json!({ "queue": q, "acks": [ { "id": id }, { "id": 5 } ] }),
        json!({ "queue": q, "acks": "x" }),
    ] {
        let (status, body) = b.post("/api/v1/ephemeral/ack", &bad).await;
        assert_error(status, &body, StatusCode::BAD_REQUEST);
    }
    // a message id of another incarnation is stale, not an error
    let stale = format!("e:{:x}:Default:1", 12345);
    let (status, body) = b
        .post(
            "/api/v1/ephemeral/ack",
            &json!({ "queue": q, "acks": [ { "id": id }, { "id": stale } ] }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["results"][0]["outcome"], "acked",
        "the bad calls applied an ack: {body}"
    );
    assert_eq!(body["results"][1]["outcome"], "stale");

    // a group pop answers an empty array, never 204; unknown paths stay 404 without the queue code
    let (status, body) = b
        .get(&format!("/api/v1/ephemeral/pop?queue={q}&group=g"))
        .await;
    assert_eq!(
        (status, body["messages"].clone()),
        (StatusCode::OK, json!([]))
    );
    let (status, body) = b.get("/api/v1/ephemeral/nothing-here").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body
        .get("code")
        .is_none_or(|c| c != "ephemeral_queue_not_found"));
}

#[tokio::test]
async fn ephemeral_contents_are_unlogged_and_declarations_logged() {
    let (db, b) = setup().await;
    let client = db.client().await.expect("connect");
    let rows = client
        .query(
            "SELECT c.relname, c.relpersistence::text AS p FROM pg_class c
             JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = 'queen' AND c.relkind = 'r' AND c.relname LIKE 'ephemeral%'
             ORDER BY 1",
            &[],
        )
        .await
        .unwrap();
    let got: Vec<(String, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    for (table, persistence) in &got {
        let want = if table == "ephemeral_declarations" {
            "p"
        } else {
            "u"
        };
        assert_eq!(persistence, want, "{table}");
    }
    assert_eq!(got.len(), 7, "{got:?}");
    drop(b);
}
