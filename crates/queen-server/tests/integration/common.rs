//! Helpers shared by every area of the integration suite.

use std::collections::BTreeSet;
use std::time::Duration;

use queen_testkit::{TestBroker, TestDb};
use reqwest::StatusCode;
use serde_json::{json, Value};

/// A fresh database and a broker on it. Bind as `let (db, b) = setup().await;`.
pub async fn setup() -> (TestDb, TestBroker) {
    setup_with(&[]).await
}

/// Like [`setup`], with extra environment variables for the broker.
pub async fn setup_with(env: &[(&str, &str)]) -> (TestDb, TestBroker) {
    let db = TestDb::new().await.expect("create test database");
    let b = TestBroker::start_with(&db, env)
        .await
        .expect("start test broker");
    (db, b)
}

/// A queue (or partition, group) name no other test uses.
pub fn unique(prefix: &str) -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("{prefix}-{}", &id[..12])
}

/// The sorted key set of a JSON object.
pub fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .cloned()
        .collect()
}

/// Asserts that `v` is an object with exactly `expected` as keys.
#[track_caller]
pub fn assert_keys(v: &Value, expected: &[&str]) {
    let want: BTreeSet<String> = expected.iter().map(|s| (*s).to_owned()).collect();
    assert_eq!(keys(v), want, "keys of {v}");
}

/// Asserts a 4xx/5xx answer with a JSON `error` string, and returns that string.
#[track_caller]
pub fn assert_error(status: StatusCode, body: &Value, want: StatusCode) -> String {
    assert_eq!(status, want, "status (body: {body})");
    body["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no string `error` in {body}"))
        .to_owned()
}

/// True for `YYYY-MM-DDTHH:MM:SS.<digits>Z` with exactly `frac` fractional digits.
pub fn is_utc_timestamp(s: &str, frac: usize) -> bool {
    let b = s.as_bytes();
    if frac == 0 || b.len() != 21 + frac {
        return false;
    }
    let digit = |i: usize| b[i].is_ascii_digit();
    let fixed = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')];
    if fixed.iter().any(|&(i, c)| b[i] != c) {
        return false;
    }
    let date_time_digits = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18];
    if !date_time_digits.iter().all(|&i| digit(i)) {
        return false;
    }
    if b[19] != b'.' || !(20..20 + frac).all(digit) {
        return false;
    }
    b[b.len() - 1] == b'Z' && chrono::DateTime::parse_from_rfc3339(s).is_ok()
}

/// Path of the pop route of `queue` (and `partition`) with `query` appended.
pub fn pop_path(queue: &str, partition: Option<&str>, query: &str) -> String {
    let mut p = format!("/api/v1/pop/queue/{queue}");
    if let Some(part) = partition {
        p.push_str(&format!("/partition/{part}"));
    }
    if !query.is_empty() {
        p.push('?');
        p.push_str(query);
    }
    p
}

/// Pushes `items`, asserting 201 and one result per item; returns the results.
pub async fn push_items(b: &TestBroker, items: Value) -> Vec<Value> {
    let n = items.as_array().map_or(0, Vec::len);
    let (status, body) = b.post("/api/v1/push", &json!({ "items": items })).await;
    assert_eq!(status, StatusCode::CREATED, "push answered {body}");
    let results = body
        .as_array()
        .unwrap_or_else(|| panic!("push body is not an array: {body}"))
        .clone();
    assert_eq!(results.len(), n, "one result per item: {body}");
    results
}

/// Pushes one message and asserts it was queued; returns its result.
pub async fn push_one(
    b: &TestBroker,
    queue: &str,
    partition: &str,
    payload: Value,
    transaction_id: &str,
) -> Value {
    let results = push_items(
        b,
        json!([{ "queue": queue, "partition": partition, "payload": payload,
                 "transactionId": transaction_id }]),
    )
    .await;
    assert_eq!(results[0]["status"], "queued", "{}", results[0]);
    results[0].clone()
}

/// Pushes `n` messages `{ "n": i }` with transaction ids `<prefix>-<i>` into one partition.
pub async fn push_numbered(b: &TestBroker, queue: &str, partition: &str, prefix: &str, n: usize) {
    let items: Vec<Value> = (0..n)
        .map(|i| {
            json!({ "queue": queue, "partition": partition, "payload": { "n": i },
                    "transactionId": format!("{prefix}-{i}") })
        })
        .collect();
    let results = push_items(b, Value::Array(items)).await;
    assert!(results.iter().all(|r| r["status"] == "queued"));
}

/// Pops and asserts 200; returns the body.
pub async fn pop_ok(b: &TestBroker, path: &str) -> Value {
    let (status, body) = b.get(path).await;
    assert_eq!(status, StatusCode::OK, "pop {path} answered {body}");
    assert_eq!(body["success"], true, "{body}");
    body
}

/// Pops and asserts 204 with no body.
pub async fn pop_empty(b: &TestBroker, path: &str) {
    let (status, body) = b.get(path).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "pop {path} answered {body}");
    assert_eq!(body, Value::Null, "a 204 carries no body");
}

/// The `messages` array of a pop body.
pub fn messages(body: &Value) -> Vec<Value> {
    body["messages"]
        .as_array()
        .unwrap_or_else(|| panic!("no messages array in {body}"))
        .clone()
}

/// The transaction ids of the messages of a pop body, in order.
pub fn txn_ids(body: &Value) -> Vec<String> {
    messages(body)
        .iter()
        .map(|m| {
            m["transactionId"]
                .as_str()
                .expect("transactionId")
                .to_owned()
        })
        .collect()
}

/// The ack element for a popped message with `status` (and an error text).
pub fn ack_item(msg: &Value, status: &str, error: Option<&str>) -> Value {
    json!({
        "transactionId": msg["transactionId"],
        "partitionId": msg["partitionId"],
        "leaseId": msg["leaseId"],
        "consumerGroup": msg["consumerGroup"],
        "status": status,
        "error": error,
    })
}

/// Acks one popped message through `/ack`; asserts 200 and a one-element array.
pub async fn ack(b: &TestBroker, msg: &Value, status: &str, error: Option<&str>) -> Value {
    let (code, body) = b.post("/api/v1/ack", &ack_item(msg, status, error)).await;
    assert_eq!(code, StatusCode::OK, "ack answered {body}");
    let arr = body
        .as_array()
        .unwrap_or_else(|| panic!("ack body is not an array: {body}"));
    assert_eq!(arr.len(), 1, "{body}");
    arr[0].clone()
}

/// Acks every message of a pop body `completed` in one `/ack/batch` request
/// for `group` (`None`: queue mode); asserts 200 and that each one
/// succeeded; returns the results.
pub async fn ack_all_completed(b: &TestBroker, body: &Value, group: Option<&str>) -> Vec<Value> {
    let items: Vec<Value> = messages(body)
        .iter()
        .map(|m| ack_item(m, "completed", None))
        .collect();
    let (code, res) = b
        .post(
            "/api/v1/ack/batch",
            &json!({ "consumerGroup": group, "acknowledgments": items }),
        )
        .await;
    assert_eq!(code, StatusCode::OK, "ack answered {res}");
    let results = res.as_array().expect("ack results").clone();
    assert_eq!(results.len(), items.len(), "{res}");
    assert!(results.iter().all(|r| r["success"] == true), "{res}");
    results
}

/// Configures `queue` with `options`; asserts 200 and returns the body.
pub async fn configure(b: &TestBroker, queue: &str, options: Value) -> Value {
    let (status, body) = b
        .post(
            "/api/v1/configure",
            &json!({ "queue": queue, "options": options }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "configure answered {body}");
    assert_eq!(body["configured"], true, "{body}");
    body
}

/// `SELECT count(*)` over `sql` (a full query returning one bigint).
pub async fn count(client: &tokio_postgres::Client, sql: &str) -> i64 {
    client
        .query_one(sql, &[])
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .get(0)
}

/// The first column (text) of every row `sql` returns, in order.
pub async fn texts<C: FromIterator<String>>(client: &tokio_postgres::Client, sql: &str) -> C {
    client
        .query(sql, &[])
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// The id of partition `partition` of `queue`.
pub async fn partition_id(
    client: &tokio_postgres::Client,
    queue: &str,
    partition: &str,
) -> uuid::Uuid {
    client
        .query_one(
            "SELECT pt.id FROM queen.partitions pt JOIN queen.queues q ON q.id = pt.queue_id
             WHERE q.name = $1 AND pt.name = $2",
            &[&queue, &partition],
        )
        .await
        .expect("partition row")
        .get(0)
}

/// `(committed_offset, lease active?)` of a (partition, group) cursor row.
pub async fn cursor(
    client: &tokio_postgres::Client,
    partition: uuid::Uuid,
    group: &str,
) -> Option<(i64, bool)> {
    client
        .query_opt(
            "SELECT committed_offset, lease_expires_at IS NOT NULL AND lease_expires_at > now()
             FROM queen.log_consumers WHERE partition_id = $1 AND consumer_group = $2",
            &[&partition, &group],
        )
        .await
        .expect("cursor query")
        .map(|r| (r.get(0), r.get(1)))
}

/// A cursor row's `(total_consumed, batches_consumed)`.
pub async fn cursor_counts(
    client: &tokio_postgres::Client,
    partition: uuid::Uuid,
    group: &str,
) -> (i64, i64) {
    let row = client
        .query_one(
            "SELECT total_consumed, batches_consumed FROM queen.log_consumers
             WHERE partition_id = $1 AND consumer_group = $2",
            &[&partition, &group],
        )
        .await
        .expect("cursor row");
    (row.get(0), row.get(1))
}

/// The broker's `/metrics/prometheus` page.
pub async fn prometheus_text(b: &TestBroker) -> String {
    b.http
        .get(b.url("/metrics/prometheus"))
        .send()
        .await
        .expect("scrape")
        .text()
        .await
        .expect("scrape body")
}

/// The value of the unlabelled metric `name` on the broker's Prometheus page.
pub async fn prometheus_value(b: &TestBroker, name: &str) -> Option<f64> {
    let text = prometheus_text(b).await;
    text.lines()
        .filter_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .find_map(|v| v.trim().parse().ok())
}

/// Consumes everything of `queue` for `group` through wildcard pops, then
/// pops empty a few times so the broker has marked the partitions drained.
pub async fn drain_group(b: &TestBroker, queue: &str, group: &str) -> Vec<String> {
    let path = pop_path(queue, None, &format!("consumerGroup={group}&batch=10"));
    let mut seen = Vec::new();
    loop {
        let (status, body) = b.get(&path).await;
        if status == StatusCode::NO_CONTENT {
            break;
        }
        seen.extend(txn_ids(&body));
        for m in messages(&body) {
            ack(b, &m, "completed", None).await;
        }
    }
    for _ in 0..3 {
        pop_empty(b, &path).await;
    }
    seen
}

/// Sleeps `ms` milliseconds.
pub async fn sleep_ms(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

#[test]
fn timestamp_checker_accepts_only_the_exact_shape() {
    assert!(is_utc_timestamp("2026-05-02T08:15:30.123456Z", 6));
    assert!(is_utc_timestamp("2026-05-02T08:15:30.123Z", 3));
    assert!(!is_utc_timestamp("2026-05-02T08:15:30.123Z", 6));
    assert!(!is_utc_timestamp("2026-05-02T08:15:30.123456+00:00", 6));
    assert!(!is_utc_timestamp("2026-05-02 08:15:30.123456Z", 6));
}

/// The `queen-server` binary with an empty environment (but `PATH`).
pub fn queen_server() -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_queen-server"));
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        // no load balancer to drain from: SIGTERM stops at once
        .env("SHUTDOWN_DRAIN_MS", "0");
    c
}
