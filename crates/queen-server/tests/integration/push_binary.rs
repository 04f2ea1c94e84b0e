//! The binary push and transaction bodies of the 2.6 clients
//! (client-dataplane-2.6 §3, §4, §6): `QPB1` on `/push`, `QTB1` on
//! `/transaction`, `Content-Type: application/x-queen-push`.

use std::time::Duration;

use queen_proto::push_binary::{
    encode_push, encode_transaction, Batch, Form, Message, CONTENT_TYPE,
};
use queen_testkit::TestBroker;
use reqwest::StatusCode;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::*;

/// POSTs a binary body; returns status and JSON answer.
async fn post_binary(b: &TestBroker, path: &str, body: Vec<u8>) -> (StatusCode, Value) {
    post_binary_as(b, path, body, None).await
}

async fn post_binary_as(
    b: &TestBroker,
    path: &str,
    body: Vec<u8>,
    token: Option<&str>,
) -> (StatusCode, Value) {
    let mut req = b
        .http
        .post(b.url(path))
        .header(reqwest::header::CONTENT_TYPE, CONTENT_TYPE)
        .body(body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status();
    let bytes = resp.bytes().await.unwrap();
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(&bytes)));
    (status, value)
}

fn msg<'a>(txn: &'a str, id: Uuid, payload: &'a str) -> Message<'a> {
    Message {
        transaction_id: txn,
        message_id: id,
        payload: payload.as_bytes(),
    }
}

fn batch<'a>(queue: &'a str, partition: &'a str, messages: Vec<Message<'a>>) -> Batch<'a> {
    Batch {
        queue,
        partition,
        messages,
    }
}

/// The JSON push answer's keys of a queued item.
const QUEUED_KEYS: [&str; 7] = [
    "index",
    "transaction_id",
    "status",
    "message_id",
    "partition_id",
    "trace_id",
    "queueName",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_binary_push_answers_and_stores_as_the_json_push_does() {
    let (db, b) = setup().await;
    let q = unique("bin-plain");
    let body = encode_push(
        &[
            batch(
                &q,
                "p1",
                vec![
                    msg("t1", Uuid::nil(), r#"{"n":1}"#),
                    msg("t2", Uuid::nil(), r#""hi""#),
                ],
            ),
            batch(&q, "Default", vec![msg("", Uuid::nil(), "null")]),
        ],
        Form::Plain { zstd: false },
        false,
    )
    .unwrap();
    let (status, res) = post_binary(&b, "/api/v1/push", body).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    let results = res.as_array().expect("a bare array");
    assert_eq!(results.len(), 3);
    for (i, r) in results.iter().enumerate() {
        assert_keys(r, &QUEUED_KEYS);
        assert_eq!(r["index"], i);
        assert_eq!(r["status"], "queued");
        assert_eq!(r["queueName"], q.as_str());
    }
    assert_eq!(results[0]["transaction_id"], "t1");
    assert_eq!(results[1]["transaction_id"], "t2");
    // an empty transaction id: the broker mints one, as for JSON
    let minted = results[2]["transaction_id"].as_str().unwrap();
    assert!(Uuid::parse_str(minted).is_ok(), "{minted}");

    let body = pop_ok(&b, &pop_path(&q, Some("p1"), "batch=10")).await;
    assert_eq!(txn_ids(&body), vec!["t1", "t2"]);
    let data: Vec<Value> = messages(&body).iter().map(|m| m["data"].clone()).collect();
    assert_eq!(data, vec![json!({"n": 1}), json!("hi")]);
    assert_eq!(messages(&body)[0]["id"], results[0]["message_id"]);
    let body = pop_ok(&b, &pop_path(&q, Some("Default"), "")).await;
    assert_eq!(messages(&body)[0]["data"], Value::Null);
    assert_eq!(txn_ids(&body), vec![minted]);

    // zstd over the whole body (flag 1) gives the same
    let q2 = unique("bin-zstd");
    let body = encode_push(
        &[batch(&q2, "p", vec![msg("z1", Uuid::nil(), "[1,2]")])],
        Form::Plain { zstd: true },
        false,
    )
    .unwrap();
    let (status, res) = post_binary(&b, "/api/v1/push", body).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    assert_eq!(res[0]["status"], "queued");
    let body = pop_ok(&b, &pop_path(&q2, None, "")).await;
    assert_eq!(messages(&body)[0]["data"], json!([1, 2]));
    let client = db.client().await.unwrap();
    assert_eq!(
        count(&client, "SELECT count(*) FROM queen.message_keys").await,
        4
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_keep_the_client_minted_ids_and_a_retry_is_a_duplicate() {
    let (db, b) = setup().await;
    let q = unique("bin-frames");
    let (id1, id2) = (Uuid::now_v7(), Uuid::now_v7());
    let body = encode_push(
        &[batch(
            &q,
            "p1",
            vec![msg("t1", id1, r#"{"n":1}"#), msg("", id2, r#""hi""#)],
        )],
        Form::Frames,
        false,
    )
    .unwrap();
    let (status, res) = post_binary(&b, "/api/v1/push", body.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    assert_eq!(res[0]["message_id"], id1.to_string());
    assert_eq!(res[0]["transaction_id"], "t1");
    assert_eq!(res[1]["message_id"], id2.to_string());
    // a message without its own transaction id has the id's text
    assert_eq!(res[1]["transaction_id"], id2.to_string());

    let popped = pop_ok(&b, &pop_path(&q, None, "batch=10")).await;
    let msgs = messages(&popped);
    assert_eq!(msgs[0]["id"], id1.to_string());
    assert_eq!(msgs[0]["transactionId"], "t1");
    assert_eq!(msgs[0]["data"], json!({"n": 1}));
    assert_eq!(msgs[1]["id"], id2.to_string());
    assert_eq!(msgs[1]["transactionId"], id2.to_string());
    assert_eq!(msgs[1]["data"], json!("hi"));

    // the client sends the very same bytes again on a retry: duplicates of the originals
    let (status, res) = post_binary(&b, "/api/v1/push", body).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    for (i, id) in [id1, id2].iter().enumerate() {
        assert_eq!(res[i]["status"], "duplicate", "{res}");
        assert_eq!(res[i]["message_id"], id.to_string());
    }
    // a repeat inside one body keeps the first
    let id3 = Uuid::now_v7();
    let body = encode_push(
        &[batch(
            &q,
            "p1",
            vec![msg("t3", id3, "1"), msg("t3", Uuid::now_v7(), "2")],
        )],
        Form::Frames,
        false,
    )
    .unwrap();
    let (_, res) = post_binary(&b, "/api/v1/push", body).await;
    assert_eq!(res[0]["status"], "queued");
    assert_eq!(res[1]["status"], "duplicate");
    assert_eq!(res[1]["message_id"], id3.to_string());
    let client = db.client().await.unwrap();
    assert_eq!(
        count(&client, "SELECT count(*) FROM queen.message_keys").await,
        3
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_counts_flag_answers_counts() {
    let (_db, b) = setup().await;
    let q = unique("bin-counts");
    push_one(&b, &q, "p", json!(0), "seen").await;
    let batches = [batch(
        &q,
        "p",
        vec![
            msg("seen", Uuid::nil(), "1"),
            msg("new", Uuid::nil(), "2"),
            msg("", Uuid::nil(), "3"),
        ],
    )];
    for form in [Form::Plain { zstd: false }, Form::Frames] {
        let body = encode_push(&batches, form, true).unwrap();
        let (status, res) = post_binary(&b, "/api/v1/push", body).await;
        assert_eq!(status, StatusCode::CREATED, "{res}");
        let queued = if form == Form::Frames { 1 } else { 2 };
        assert_eq!(
            res,
            json!({"count": 3, "queued": queued, "duplicate": 3 - queued, "error": 0}),
            "{form:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_pushes_are_encrypted_and_stamped_like_json_ones() {
    const KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
    const SECRET: &str = "binary-push-secret";
    let (db, b) = setup_with(&[
        ("QUEEN_ENCRYPTION_KEY", KEY),
        ("JWT_ENABLED", "true"),
        ("JWT_SECRET", SECRET),
    ])
    .await;
    let token = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &json!({"sub": "svc-bin", "role": "admin", "exp": chrono::Utc::now().timestamp() + 600}),
        &jsonwebtoken::EncodingKey::from_secret(SECRET.as_bytes()).unwrap(),
    )
    .unwrap();
    let q = unique("bin-enc");
    let status = b
        .http
        .post(b.url("/api/v1/configure"))
        .bearer_auth(&token)
        .json(&json!({"queue": q, "options": {"encryptionEnabled": true}}))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, StatusCode::OK);
    let id = Uuid::now_v7();
    let body = encode_push(
        &[batch(&q, "p", vec![msg("e1", id, r#"{"card":"4111"}"#)])],
        Form::Frames,
        false,
    )
    .unwrap();
    let (status, res) = post_binary_as(&b, "/api/v1/push", body.clone(), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{res}");
    let (status, res) = post_binary_as(&b, "/api/v1/push", body, Some(&token)).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    assert_eq!(res[0]["message_id"], id.to_string());

    let client = db.client().await.unwrap();
    let stored: Vec<String> = texts(&client, "SELECT unnest(payloads) FROM queen.segments").await;
    assert!(!stored[0].contains("4111"), "stored sealed: {}", stored[0]);
    let popped = b
        .http
        .get(b.url(&pop_path(&q, None, "")))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    let m = &messages(&popped)[0];
    assert_eq!(m["data"], json!({"card": "4111"}));
    assert_eq!(m["id"], id.to_string());
    assert_eq!(m["producerSub"], "svc-bin");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binary_transaction_runs_the_head_then_the_pushes() {
    let (db, b) = setup().await;
    let input = unique("btx-in");
    let output = unique("btx-out");
    push_numbered(&b, &input, "p", "in", 1).await;
    let popped = pop_ok(&b, &pop_path(&input, None, "consumerGroup=etl")).await;
    let m = messages(&popped)[0].clone();
    let head = json!({
        "operations": [{ "type": "ack", "transactionId": m["transactionId"],
                         "partitionId": m["partitionId"], "status": "completed",
                         "consumerGroup": "etl", "leaseId": m["leaseId"] }],
        "requiredLeases": [m["leaseId"]],
    });
    let (id1, id2) = (Uuid::now_v7(), Uuid::now_v7());
    let body = encode_transaction(
        head.to_string().as_bytes(),
        &[batch(
            &output,
            "p",
            vec![msg("out-1", id1, r#"{"total":9}"#), msg("", id2, "2")],
        )],
        false,
    )
    .unwrap();
    let (status, res) = post_binary(&b, "/api/v1/transaction", body).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(res["success"], true, "{res}");
    let results = res["results"].as_array().unwrap();
    assert_eq!(results.len(), 3, "{res}");
    // broker order: the head's operations, then the pushes in wire order
    assert_eq!(results[0]["type"], "ack");
    assert_eq!(results[0]["index"], 0);
    assert_eq!(results[1]["type"], "push");
    assert_eq!(results[1]["index"], 1);
    assert_eq!(results[1]["messageId"], id1.to_string());
    assert_eq!(results[1]["transactionId"], "out-1");
    assert_eq!(results[2]["messageId"], id2.to_string());
    assert_eq!(results[2]["transactionId"], id2.to_string());

    pop_empty(&b, &pop_path(&input, None, "consumerGroup=etl")).await;
    let out = pop_ok(&b, &pop_path(&output, None, "batch=10")).await;
    assert_eq!(messages(&out)[0]["id"], id1.to_string());
    assert_eq!(messages(&out)[0]["data"], json!({"total": 9}));

    // only pushes: the head's operations are an empty array (or the head is empty)
    for head in [&br#"{"operations":[],"requiredLeases":[]}"#[..], b""] {
        let id = Uuid::now_v7();
        let txn = id.to_string();
        let body = encode_transaction(
            head,
            &[batch(&output, "p", vec![msg(&txn, id, "3")])],
            false,
        )
        .unwrap();
        let (status, res) = post_binary(&b, "/api/v1/transaction", body).await;
        assert_eq!(status, StatusCode::OK, "{res}");
        assert_eq!(res["results"][0]["messageId"], id.to_string(), "{res}");
    }
    let client = db.client().await.unwrap();
    assert_eq!(
        count(&client, "SELECT count(*) FROM queen.message_keys").await,
        5
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binary_transaction_that_fails_keeps_nothing() {
    let (db, b) = setup().await;
    let input = unique("btx-fail-in");
    let output = unique("btx-fail-out");
    push_numbered(&b, &input, "p", "in", 1).await;
    let popped = pop_ok(&b, &pop_path(&input, None, "")).await;
    let m = messages(&popped)[0].clone();
    // the head's ack names no message: the transaction is refused as a whole
    let head = json!({"operations": [
        { "type": "ack", "transactionId": "no-such-message", "partitionId": m["partitionId"] }
    ]});
    let body = encode_transaction(
        head.to_string().as_bytes(),
        &[batch(&output, "p", vec![msg("x", Uuid::now_v7(), "1")])],
        false,
    )
    .unwrap();
    let (status, res) = post_binary(&b, "/api/v1/transaction", body).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(res["success"], false, "{res}");
    assert_eq!(res["results"][0]["index"], 0, "{res}");
    let client = db.client().await.unwrap();
    assert_eq!(
        count(&client, "SELECT count(*) FROM queen.message_keys").await,
        1,
        "only the input message"
    );
    pop_empty(&b, &pop_path(&output, None, "")).await;
}

/// Bytes of a hand-made zstd frame: one raw block of `content`, declaring
/// `declared` bytes (8-byte content size field, single segment).
fn lying_frame(content: &[u8], declared: u64) -> Vec<u8> {
    let mut out = vec![0x28, 0xb5, 0x2f, 0xfd, 0xe0];
    out.extend_from_slice(&declared.to_le_bytes());
    out.extend_from_slice(&(((content.len() as u32) << 3) | 1).to_le_bytes()[..3]);
    out.extend_from_slice(content);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_binary_bodies_are_refused_and_nothing_is_stored() {
    let (db, b) = setup().await;
    let q = unique("bin-bad");
    let good = encode_push(
        &[batch(&q, "p", vec![msg("t", Uuid::now_v7(), "1")])],
        Form::Frames,
        false,
    )
    .unwrap();
    let plain = encode_push(
        &[batch(&q, "p", vec![msg("t", Uuid::nil(), "1")])],
        Form::Plain { zstd: false },
        false,
    )
    .unwrap();
    let with = |at: usize, byte: u8, base: &[u8]| {
        let mut v = base.to_vec();
        v[at] = byte;
        v
    };
    let tail = |extra: &[u8]| [&plain[..], extra].concat();
    let long_txn = "x".repeat(256);
    let frames_with_flags = {
        let mut f = 20u32.to_le_bytes().to_vec();
        f.push(2);
        f.extend_from_slice(Uuid::now_v7().as_bytes());
        f.extend_from_slice(&[0, 0, b'1']);
        let z = zstd::bulk::compress(&f, 1).unwrap();
        let mut body = b"QPB1\x08\x01\x00\x00\x00".to_vec();
        body.extend_from_slice(&(q.len() as u16).to_le_bytes());
        body.extend_from_slice(q.as_bytes());
        body.extend_from_slice(b"\x01\x00p\x01\x00\x00\x00");
        body.extend_from_slice(&(z.len() as u32).to_le_bytes());
        body.extend_from_slice(&z);
        body
    };
    let bomb = {
        let mut body = b"QPB1\x05".to_vec();
        body.extend_from_slice(&(1u32 << 30).to_le_bytes());
        body.extend_from_slice(&lying_frame(b"x", 1 << 30));
        body
    };
    let liar = {
        // the plain body, in a frame that says it holds 10 bytes
        let raw = &plain[5..];
        let mut body = b"QPB1\x05".to_vec();
        body.extend_from_slice(&10u32.to_le_bytes());
        body.extend_from_slice(&lying_frame(raw, 10));
        body
    };
    let zeros = {
        // 32 MiB of zeros compress to about a kilobyte: over the 16 MiB body limit once inflated
        let raw = vec![0u8; 32 << 20];
        let mut body = b"QPB1\x05".to_vec();
        body.extend_from_slice(&(raw.len() as u32).to_le_bytes());
        body.extend_from_slice(&zstd::bulk::compress(&raw, 1).unwrap());
        body
    };
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("/api/v1/push", b"QPB9\x04".to_vec(), "must start with QPB1"),
        ("/api/v1/push", b"{\"items\":[]}".to_vec(), "must start with QPB1"),
        ("/api/v1/push", good[..good.len() - 3].to_vec(), "groups[0].z runs past the end"),
        ("/api/v1/push", tail(b"!"), "1 bytes left over"),
        ("/api/v1/push", with(4, 0x10, &plain), "unknown bits"),
        ("/api/v1/push", with(4, 0x09, &good), "combines frames"),
        ("/api/v1/push", with(4, 0x0c, &good), "combines frames"),
        ("/api/v1/push", b"QPB1\x04\x00\x00\x00\x00".to_vec(), "groups must be at least 1"),
        (
            "/api/v1/push",
            b"QPB1\x04\x01\x00\x00\x00\x01\x00q\x01\x00p\x00\x00\x00\x00".to_vec(),
            "groups[0].n must be at least 1",
        ),
        (
            "/api/v1/push",
            b"QPB1\x04\x01\x00\x00\x00\x00\x00\x01\x00p\x01\x00\x00\x00\x00\x00\x01\x00\x00\x001"
                .to_vec(),
            "groups[0].queue: queue must not be empty",
        ),
        (
            "/api/v1/push",
            b"QPB1\x04\x01\x00\x00\x00\x01\x00q\x01\x00\x00\x01\x00\x00\x00\x00\x00\x01\x00\x00\x001"
                .to_vec(),
            "groups[0].partition: partition must not contain control characters",
        ),
        (
            "/api/v1/push",
            encode_push(
                &[batch(&q, "p", vec![msg(&long_txn, Uuid::nil(), "1")])],
                Form::Plain { zstd: false },
                false,
            )
            .unwrap(),
            "groups[0].items[0].transactionId must be at most 255 characters",
        ),
        (
            "/api/v1/push",
            encode_push(
                &[batch(&q, "p", vec![msg("t", Uuid::nil(), "{\"a\":")])],
                Form::Plain { zstd: false },
                false,
            )
            .unwrap(),
            "groups[0].items[0].payload is not one JSON document",
        ),
        ("/api/v1/push", frames_with_flags, "frame flags 0x02 must be 0"),
        ("/api/v1/push", bomb, "declares 1073741824 bytes, over the limit"),
        ("/api/v1/push", liar, "does not inflate to its declared 10 bytes"),
        ("/api/v1/push", zeros, "declares 33554432 bytes, over the limit"),
        ("/api/v1/transaction", good.clone(), "a QPB1 body is a push"),
        (
            "/api/v1/push",
            encode_transaction(b"{}", &[batch(&q, "p", vec![msg("t", Uuid::now_v7(), "1")])], false)
                .unwrap(),
            "a QTB1 body is a transaction",
        ),
        (
            "/api/v1/transaction",
            encode_transaction(b"{\"operations\":", &[batch(&q, "p", vec![msg("t", Uuid::now_v7(), "1")])], false)
                .unwrap(),
            "binary body: head: Invalid JSON",
        ),
        (
            "/api/v1/transaction",
            encode_transaction(b"{}", &[batch(&q, "p", vec![msg("t", Uuid::now_v7(), "1")])], true)
                .unwrap(),
            "counts",
        ),
        (
            "/api/v1/transaction",
            encode_transaction(
                br#"{"operations":[{"type":"ack","transactionId":"a\u0000"}]}"#,
                &[batch(&q, "p", vec![msg("t", Uuid::now_v7(), "1")])],
                false,
            )
            .unwrap(),
            "must not contain NUL characters",
        ),
    ];
    for (path, body, want) in cases {
        let (status, res) = post_binary(&b, path, body).await;
        let error = assert_error(status, &res, StatusCode::BAD_REQUEST);
        assert!(
            error.contains(want),
            "{path}: {error:?} should say {want:?}"
        );
    }
    let client = db.client().await.unwrap();
    for table in ["queues", "partitions", "segments", "message_keys"] {
        assert_eq!(
            count(&client, &format!("SELECT count(*) FROM queen.{table}")).await,
            0,
            "{table}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_items_than_allowed_are_413() {
    let (db, b) = setup_with(&[("MAX_PUSH_ITEMS", "2")]).await;
    let q = unique("bin-many");
    let messages = (0..3).map(|_| msg("", Uuid::now_v7(), "1")).collect();
    let body = encode_push(&[batch(&q, "p", messages)], Form::Frames, false).unwrap();
    let (status, res) = post_binary(&b, "/api/v1/push", body).await;
    let error = assert_error(status, &res, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(error.contains("more than 2 items"), "{error}");
    let client = db.client().await.unwrap();
    assert_eq!(
        count(&client, "SELECT count(*) FROM queen.segments").await,
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spooled_binary_push_keeps_the_client_ids() {
    let (db, b) = setup().await;
    let q = unique("bin-spool");
    let (status, _) = b
        .post("/api/v1/system/maintenance", &json!({"enabled": true}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let ids: Vec<Uuid> = (0..3).map(|_| Uuid::now_v7()).collect();
    let body = encode_push(
        &[batch(
            &q,
            "p",
            ids.iter().map(|id| msg("", *id, "7")).collect(),
        )],
        Form::Frames,
        false,
    )
    .unwrap();
    let (status, res) = post_binary(&b, "/api/v1/push", body).await;
    assert_eq!(status, StatusCode::CREATED, "{res}");
    for (i, id) in ids.iter().enumerate() {
        assert_eq!(res[i]["status"], "buffered", "{res}");
        assert_eq!(res[i]["transactionId"], id.to_string(), "{res}");
    }
    let (status, _) = b
        .post("/api/v1/system/maintenance", &json!({"enabled": false}))
        .await;
    assert_eq!(status, StatusCode::OK);

    let client = db.client().await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while count(&client, "SELECT count(*) FROM queen.message_keys").await < 3 {
        assert!(tokio::time::Instant::now() < deadline, "the spool drains");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let popped = pop_ok(&b, &pop_path(&q, None, "batch=10")).await;
    let got: Vec<Value> = messages(&popped).iter().map(|m| m["id"].clone()).collect();
    let want: Vec<Value> = ids.iter().map(|i| json!(i.to_string())).collect();
    assert_eq!(got, want);
}
