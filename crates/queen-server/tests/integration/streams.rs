//! `/streams/v1/*`: registration, state reads, and cycles that commit state,
//! sink pushes and the source ack all together, or refuse and write nothing.

use queen_testkit::{TestBroker, TestDb};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::*;

/// Registers `name` on `source` (sink `sink`) with `hash`; asserts 200.
async fn register(b: &TestBroker, name: &str, source: &str, sink: &str, hash: &str) -> Value {
    let (status, body) = b
        .post(
            "/streams/v1/queries",
            &json!({ "name": name, "source_queue": source, "sink_queue": sink,
                     "config_hash": hash, "reset": false }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["success"], true, "{body}");
    body
}

/// A source queue with `n` messages in partition `p`, popped by the stream's
/// group: returns (query_id, the popped messages).
struct Fixture {
    db: TestDb,
    b: TestBroker,
    query: String,
    name: String,
    source: String,
    sink: String,
    group: String,
    msgs: Vec<Value>,
}

async fn fixture(n: usize) -> Fixture {
    let (db, b) = setup().await;
    let name = unique("q");
    let source = unique("src");
    let sink = unique("sink");
    let group = format!("streams.{name}");
    let reg = register(&b, &name, &source, &sink, "h1").await;
    assert_eq!(reg["fresh"], true);
    push_numbered(&b, &source, "p1", "m", n).await;
    let body = pop_ok(
        &b,
        &pop_path(&source, None, &format!("consumerGroup={group}&batch={n}")),
    )
    .await;
    let msgs = messages(&body);
    assert_eq!(msgs.len(), n);
    Fixture {
        db,
        b,
        query: reg["query_id"].as_str().unwrap().to_owned(),
        name,
        source,
        sink,
        group,
        msgs,
    }
}

impl Fixture {
    fn pid(&self) -> &str {
        self.msgs[0]["partitionId"].as_str().unwrap()
    }

    fn ack_of(&self, i: usize) -> Value {
        json!({ "transactionId": self.msgs[i]["transactionId"],
                "leaseId": self.msgs[i]["leaseId"], "status": "completed", "count": i + 1 })
    }

    fn cycle(&self, state_ops: Value, push_items: Value, ack: Value) -> Value {
        json!({ "query_id": self.query, "partition_id": self.pid(),
                "consumer_group": self.group, "state_ops": state_ops,
                "push_items": push_items, "ack": ack, "release_lease": true })
    }

    async fn post_cycle(&self, body: &Value) -> (StatusCode, Value) {
        self.b.post("/streams/v1/cycle", body).await
    }

    async fn state(&self) -> Vec<(String, Value)> {
        let (status, body) = self
            .b
            .post(
                "/streams/v1/state/get",
                &json!({ "query_id": self.query, "partition_id": self.pid(), "keys": [] }),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["key"].as_str().unwrap().to_owned(), r["value"].clone()))
            .collect()
    }

    /// Messages in the sink queue (all partitions), by a direct read.
    async fn sink_count(&self) -> i64 {
        let c = self.db.client().await.unwrap();
        c.query_one(
            "SELECT coalesce(sum(p.next_offset - 1), 0)::bigint FROM queen.partitions p
             JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1",
            &[&self.sink],
        )
        .await
        .unwrap()
        .get(0)
    }

    async fn committed(&self) -> i64 {
        let c = self.db.client().await.unwrap();
        c.query_opt(
            "SELECT committed_offset FROM queen.log_consumers
             WHERE partition_id = $1::text::uuid AND consumer_group = $2",
            &[&self.pid(), &self.group],
        )
        .await
        .unwrap()
        .map_or(0, |r| r.get(0))
    }

    /// Asserts that nothing of a refused cycle was written.
    async fn assert_untouched(&self, state: &[(String, Value)]) {
        assert_eq!(self.state().await, state, "state changed");
        assert_eq!(self.sink_count().await, 0, "sink written");
        assert_eq!(self.committed().await, 0, "source acked");
    }
}

fn upsert(key: &str, value: Value) -> Value {
    json!({ "type": "upsert", "key": key, "value": value })
}

fn sink_item(sink: &str, v: i64) -> Value {
    json!({ "queue": sink, "partition": "p1", "payload": { "sum": v } })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_is_idempotent_and_a_new_hash_needs_reset() {
    let (db, b) = setup().await;
    let name = unique("q");
    let first = register(&b, &name, "src", "sink", "h1").await;
    assert_eq!(first["fresh"], true);
    assert_eq!(first["reset"], false);
    assert_eq!(first["name"], name.as_str());
    assert_eq!(first["config_hash"], "h1");
    let id = first["query_id"].as_str().unwrap().to_owned();
    assert!(uuid::Uuid::parse_str(&id).is_ok());
    let again = register(&b, &name, "src", "sink", "h1").await;
    assert_eq!(again["fresh"], false);
    assert_eq!(again["query_id"], id.as_str());

    // state to lose on reset
    let c = db.client().await.unwrap();
    c.execute(
        "INSERT INTO queen_streams.state (query_id, partition_id, key, value)
         VALUES ($1::text::uuid, gen_random_uuid(), 'k', '1')",
        &[&id],
    )
    .await
    .unwrap();

    let (status, body) = b
        .post(
            "/streams/v1/queries",
            &json!({ "name": name, "source_queue": "src", "config_hash": "h2" }),
        )
        .await;
    let err = assert_error(status, &body, StatusCode::CONFLICT);
    assert!(err.contains("config_hash mismatch"), "{err}");
    assert_eq!(body["success"], false);
    let rows: i64 = c
        .query_one("SELECT count(*) FROM queen_streams.state", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 1, "a refused registration clears nothing");

    let (status, body) = b
        .post(
            "/streams/v1/queries",
            &json!({ "name": name, "source_queue": "src", "config_hash": "h2", "reset": true }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["reset"], true);
    assert_eq!(body["fresh"], false);
    assert_eq!(body["query_id"], id.as_str());
    let rows: i64 = c
        .query_one("SELECT count(*) FROM queen_streams.state", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 0, "reset clears the query's state");

    // reset with the same hash clears nothing and says so
    let (_, body) = b
        .post(
            "/streams/v1/queries",
            &json!({ "name": name, "source_queue": "src", "config_hash": "h2", "reset": true }),
        )
        .await;
    assert_eq!(body["reset"], false, "{body}");

    // the official suites' cleanup statement works, state goes with the query
    c.execute(
        "INSERT INTO queen_streams.state (query_id, partition_id, key, value)
         VALUES ($1::text::uuid, gen_random_uuid(), 'k', '1')",
        &[&id],
    )
    .await
    .unwrap();
    c.execute(
        "DELETE FROM queen_streams.queries WHERE name = $1",
        &[&name],
    )
    .await
    .unwrap();
    let rows: i64 = c
        .query_one("SELECT count(*) FROM queen_streams.state", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_refuses_malformed_bodies() {
    let (_db, b) = setup().await;
    for (body, want) in [
        (
            json!({ "source_queue": "s", "config_hash": "h" }),
            "name is required",
        ),
        (
            json!({ "name": "", "source_queue": "s", "config_hash": "h" }),
            "name must not be empty",
        ),
        (
            json!({ "name": "n", "config_hash": "h" }),
            "source_queue is required",
        ),
        (
            json!({ "name": "n", "source_queue": "s" }),
            "config_hash is required",
        ),
        (
            json!({ "name": 5, "source_queue": "s", "config_hash": "h" }),
            "name must be a string",
        ),
        (
            json!({ "name": "n", "source_queue": "s", "config_hash": "h", "reset": "yes" }),
            "reset must be a boolean",
        ),
        (
            json!({ "name": "n", "source_queue": "s", "config_hash": "h", "sink_queue": 3 }),
            "sink_queue must be a string",
        ),
        (
            json!({ "name": "x".repeat(256), "source_queue": "s", "config_hash": "h" }),
            "at most 255",
        ),
    ] {
        let (status, res) = b.post("/streams/v1/queries", &body).await;
        let err = assert_error(status, &res, StatusCode::BAD_REQUEST);
        assert!(err.contains(want), "{body}: {err}");
    }
    let resp = reqwest::Client::new()
        .post(b.url("/streams/v1/queries"))
        .header("content-type", "application/json")
        .body("{nope")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let res: Value = resp.json().await.unwrap();
    assert!(
        res["error"].as_str().unwrap().contains("Invalid JSON"),
        "{res}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cycle_commits_state_pushes_and_ack_together() {
    let f = fixture(3).await;
    let body = f.cycle(
        json!([
            upsert(
                "tumb:1\u{1f}w1\u{1f}p1",
                json!({ "acc": 3, "windowStart": 0, "windowEnd": 1000 })
            ),
            upsert("__wm__", json!({ "eventTimeMs": 5 }))
        ]),
        json!([sink_item(&f.sink, 3), sink_item(&f.sink, 4)]),
        f.ack_of(2),
    );
    let (status, res) = f.post_cycle(&body).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(res["success"], true);
    assert_eq!(res["query_id"], f.query.as_str());
    assert_eq!(res["queueName"], f.source.as_str());
    assert_eq!(res["state_ops_applied"], 2);
    let pushes = res["push_results"].as_array().unwrap();
    assert_eq!(pushes.len(), 2);
    for p in pushes {
        assert_eq!(p["status"], "created", "{p}");
        assert_eq!(p["queueName"], f.sink.as_str());
    }
    assert_eq!(
        res["ack_result"],
        json!({ "success": true, "count": 3, "lease_released": true, "dlq": false })
    );
    assert_eq!(f.sink_count().await, 2);
    assert_eq!(f.committed().await, 3);
    let state = f.state().await;
    assert_eq!(state.len(), 2);
    assert_eq!(state[0].0, "__wm__");
    assert_eq!(state[1].1["acc"], 3);

    // the sink messages are ordinary messages with the payload given
    let out = pop_ok(&f.b, &pop_path(&f.sink, None, "batch=10")).await;
    let payloads: Vec<Value> = messages(&out).iter().map(|m| m["data"].clone()).collect();
    assert_eq!(payloads, vec![json!({ "sum": 3 }), json!({ "sum": 4 })]);

    // the source is free again: nothing left to pop for the group
    pop_empty(
        &f.b,
        &pop_path(&f.source, None, &format!("consumerGroup={}", f.group)),
    )
    .await;

    // the idle-flush filters: prefix and ripe windows
    let (_, res) =
        f.b.post(
            "/streams/v1/state/get",
            &json!({ "query_id": f.query, "partition_id": f.pid(), "keys": [],
                     "key_prefix": "tumb:1\u{1f}", "ripe_at_or_before": 1000 }),
        )
        .await;
    assert_eq!(res["rows"].as_array().unwrap().len(), 1, "{res}");
    let (_, res) =
        f.b.post(
            "/streams/v1/state/get",
            &json!({ "query_id": f.query, "partition_id": f.pid(),
                     "key_prefix": "tumb:1\u{1f}", "ripe_at_or_before": 999 }),
        )
        .await;
    assert_eq!(res["rows"], json!([]), "{res}");
    let (_, res) =
        f.b.post(
            "/streams/v1/state/get",
            &json!({ "query_id": f.query, "partition_id": f.pid(), "keys": ["__wm__"] }),
        )
        .await;
    assert_eq!(res["rows"][0]["value"], json!({ "eventTimeMs": 5 }));
    assert!(is_utc_timestamp(
        res["rows"][0]["updated_at"].as_str().unwrap(),
        3
    ));

    // a delete of an emitted window, then the same delete again (a replayed
    // flush) is refused and pushes nothing
    let flush = json!({ "query_id": f.query, "partition_id": f.pid(), "consumer_group": f.group,
                        "state_ops": [{ "type": "delete", "key": "tumb:1\u{1f}w1\u{1f}p1" }],
                        "push_items": [sink_item(&f.sink, 3)], "ack": null });
    let (status, res) = f.post_cycle(&flush).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(res["ack_result"], Value::Null);
    let (status, res) = f.post_cycle(&flush).await;
    let err = assert_error(status, &res, StatusCode::CONFLICT);
    assert!(err.contains("holds no state"), "{err}");
    assert_eq!(res["code"], "state_conflict");
    assert_eq!(f.sink_count().await, 3, "the replayed flush pushed nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_cycles_write_nothing() {
    let f = fixture(3).await;
    // some state the refused cycles must leave alone
    let seed = f.cycle(
        json!([upsert("keep", json!({ "n": 1 }))]),
        json!([]),
        Value::Null,
    );
    let (status, res) = f.post_cycle(&seed).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let state = f.state().await;
    let good_ops = json!([upsert("keep", json!({ "n": 2 })), upsert("new", json!(1))]);
    let good_push = json!([sink_item(&f.sink, 1)]);

    let unknown_query = {
        let mut c = f.cycle(good_ops.clone(), good_push.clone(), f.ack_of(2));
        c["query_id"] = json!(uuid::Uuid::new_v4().to_string());
        c
    };
    let unknown_partition = {
        let mut c = f.cycle(good_ops.clone(), good_push.clone(), f.ack_of(2));
        c["partition_id"] = json!(uuid::Uuid::new_v4().to_string());
        c
    };
    let foreign_lease = {
        let mut ack = f.ack_of(2);
        ack["leaseId"] = json!(uuid::Uuid::new_v4().to_string());
        f.cycle(good_ops.clone(), good_push.clone(), ack)
    };
    let foreign_group = {
        let mut c = f.cycle(good_ops.clone(), good_push.clone(), f.ack_of(2));
        c["consumer_group"] = json!("someone-else");
        c
    };
    let unknown_message = {
        let mut ack = f.ack_of(2);
        ack["transactionId"] = json!("no-such-message");
        f.cycle(good_ops.clone(), good_push.clone(), ack)
    };
    let delete_missing = f.cycle(
        json!([upsert("keep", json!(3)), { "type": "delete", "key": "never-written" }]),
        good_push.clone(),
        f.ack_of(2),
    );
    let bad_sink = f.cycle(
        good_ops.clone(),
        json!([sink_item(&f.sink, 1), { "queue": "", "payload": {} }]),
        f.ack_of(2),
    );
    let cases: Vec<(&str, Value, StatusCode, &str)> = vec![
        (
            "unknown query",
            unknown_query,
            StatusCode::NOT_FOUND,
            "unknown_query",
        ),
        (
            "unknown partition",
            unknown_partition,
            StatusCode::NOT_FOUND,
            "unknown_partition",
        ),
        (
            "foreign lease",
            foreign_lease,
            StatusCode::CONFLICT,
            "stale_lease",
        ),
        (
            "foreign group",
            foreign_group,
            StatusCode::CONFLICT,
            "stale_lease",
        ),
        (
            "unknown message",
            unknown_message,
            StatusCode::BAD_REQUEST,
            "message_not_found",
        ),
        (
            "delete of a missing key",
            delete_missing,
            StatusCode::CONFLICT,
            "state_conflict",
        ),
        (
            "invalid sink item",
            bad_sink,
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
    ];
    for (what, body, want, code) in cases {
        let (status, res) = f.post_cycle(&body).await;
        assert_error(status, &res, want);
        assert_eq!(res["code"], code, "{what}: {res}");
        assert_eq!(res["success"], false, "{what}");
        f.assert_untouched(&state).await;
    }

    // the same good cycle then commits
    let (status, res) = f
        .post_cycle(&f.cycle(good_ops.clone(), good_push.clone(), f.ack_of(2)))
        .await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(f.committed().await, 3);
    // and its replay (an answer lost, the SDK retrying) is refused whole
    let state = f.state().await;
    let (status, res) = f
        .post_cycle(&f.cycle(good_ops, good_push, f.ack_of(2)))
        .await;
    assert_error(status, &res, StatusCode::CONFLICT);
    assert_eq!(res["code"], "already_acknowledged");
    assert_eq!(f.state().await, state);
    assert_eq!(f.sink_count().await, 1, "the replay pushed nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_lease_refuses_the_cycle() {
    let (db, b) = setup().await;
    let name = unique("q");
    let source = unique("src");
    let group = format!("streams.{name}");
    configure(&b, &source, json!({ "leaseTime": 1 })).await;
    let reg = register(&b, &name, &source, "sink", "h").await;
    push_numbered(&b, &source, "p1", "m", 2).await;
    let body = pop_ok(
        &b,
        &pop_path(&source, None, &format!("consumerGroup={group}&batch=2")),
    )
    .await;
    let msgs = messages(&body);
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let (status, res) = b
        .post(
            "/streams/v1/cycle",
            &json!({ "query_id": reg["query_id"], "partition_id": msgs[0]["partitionId"],
                     "consumer_group": group,
                     "state_ops": [upsert("k", json!(1))], "push_items": [sink_item("sink", 1)],
                     "ack": { "transactionId": msgs[1]["transactionId"],
                              "leaseId": msgs[1]["leaseId"], "status": "completed", "count": 2 } }),
        )
        .await;
    assert_error(status, &res, StatusCode::CONFLICT);
    assert_eq!(res["code"], "stale_lease");
    let c = db.client().await.unwrap();
    let rows: i64 = c
        .query_one("SELECT count(*) FROM queen_streams.state", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 0);
    let sink: i64 = c
        .query_one("SELECT count(*) FROM queen.queues WHERE name = 'sink'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        sink, 0,
        "the refused cycle did not even create the sink queue"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prefix_ack_keeps_the_lease_on_the_rest() {
    let f = fixture(5).await;
    let mut body = f.cycle(
        json!([upsert("rate", json!({ "tokens": 0 }))]),
        json!([sink_item(&f.sink, 0), sink_item(&f.sink, 1)]),
        f.ack_of(1),
    );
    body["release_lease"] = json!(false);
    let (status, res) = f.post_cycle(&body).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(res["ack_result"]["lease_released"], false, "{res}");
    assert_eq!(f.committed().await, 2);
    // the lease still holds the rest: no other consumer of the group gets them
    pop_empty(
        &f.b,
        &pop_path(&f.source, None, &format!("consumerGroup={}", f.group)),
    )
    .await;
    // and the same lease acks the next prefix
    let mut body = f.cycle(json!([]), json!([]), f.ack_of(3));
    body["release_lease"] = json!(false);
    let (status, res) = f.post_cycle(&body).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(f.committed().await, 4);
    // release_lease:true on a prefix gives the unprocessed tail back
    let (status, res) = f
        .post_cycle(&f.cycle(json!([]), json!([]), Value::Null))
        .await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let body = f.cycle(json!([]), json!([]), f.ack_of(3));
    let (status, res) = f.post_cycle(&body).await;
    assert_error(status, &res, StatusCode::CONFLICT);
    assert_eq!(res["code"], "already_acknowledged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cycle_that_releases_early_redelivers_the_tail() {
    let f = fixture(4).await;
    let (status, res) = f
        .post_cycle(&f.cycle(json!([]), json!([]), f.ack_of(1)))
        .await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(res["ack_result"]["lease_released"], true);
    let body = pop_ok(
        &f.b,
        &pop_path(
            &f.source,
            None,
            &format!("consumerGroup={}&batch=10", f.group),
        ),
    )
    .await;
    assert_eq!(txn_ids(&body), vec!["m-2", "m-3"]);
}

/// The SDK acks the last message of its own order (createdAt to the
/// millisecond, then message id) with `count` = the messages it processed.
/// After a spool replay that message is not always the highest offset of the
/// batch; the cursor must still cover the whole processed batch, or the rest
/// is delivered again and counted twice (what queen-chaos's stream workload
/// found).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cycle_acks_count_messages_from_the_batch_start() {
    let f = fixture(4).await;
    // the named message is the second of the batch, the count covers all four
    let mut ack = f.ack_of(1);
    ack["count"] = json!(4);
    let (status, res) = f
        .post_cycle(&f.cycle(json!([upsert("k", json!({"count": 4}))]), json!([]), ack))
        .await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(res["ack_result"]["lease_released"], true, "{res}");
    assert_eq!(f.committed().await, 4);
    pop_empty(
        &f.b,
        &pop_path(&f.source, None, &format!("consumerGroup={}", f.group)),
    )
    .await;

    // a count past the batch stops at the batch end; a prefix cycle
    // (release_lease:false) moves to the message it names
    let f = fixture(5).await;
    let mut body = f.cycle(json!([]), json!([]), f.ack_of(0));
    body["release_lease"] = json!(false);
    body["ack"]["count"] = json!(3);
    let (status, res) = f.post_cycle(&body).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(res["ack_result"]["lease_released"], false, "{res}");
    assert_eq!(f.committed().await, 1);
    let mut ack = f.ack_of(2);
    ack["count"] = json!(50);
    let (status, res) = f.post_cycle(&f.cycle(json!([]), json!([]), ack)).await;
    assert_eq!(status, StatusCode::OK, "{res}");
    assert_eq!(res["ack_result"]["lease_released"], true, "{res}");
    assert_eq!(f.committed().await, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_and_oversized_cycles_are_refused() {
    let f = fixture(1).await;
    let ok = f.cycle(json!([]), json!([]), f.ack_of(0));
    let with = |key: &str, v: Value| {
        let mut c = ok.clone();
        c[key] = v;
        c
    };
    let big = "x".repeat(1024 * 1024 + 1);
    let cases: Vec<(Value, StatusCode, &str)> = vec![
        (
            with("query_id", json!("not-a-uuid")),
            StatusCode::BAD_REQUEST,
            "query_id must be a valid UUID",
        ),
        (
            with("query_id", Value::Null),
            StatusCode::BAD_REQUEST,
            "query_id is required",
        ),
        (
            with("partition_id", json!(7)),
            StatusCode::BAD_REQUEST,
            "partition_id must be a string",
        ),
        (
            with("state_ops", json!({})),
            StatusCode::BAD_REQUEST,
            "state_ops must be an array",
        ),
        (
            with("state_ops", json!([5])),
            StatusCode::BAD_REQUEST,
            "state_ops[0] must be an object",
        ),
        (
            with(
                "state_ops",
                json!([{ "type": "merge", "key": "k", "value": 1 }]),
            ),
            StatusCode::BAD_REQUEST,
            "must be \"upsert\" or \"delete\"",
        ),
        (
            with(
                "state_ops",
                json!([{ "type": "upsert", "key": "", "value": 1 }]),
            ),
            StatusCode::BAD_REQUEST,
            "key must be a non-empty string",
        ),
        (
            with(
                "state_ops",
                json!([{ "type": "upsert", "key": 3, "value": 1 }]),
            ),
            StatusCode::BAD_REQUEST,
            "key must be a non-empty string",
        ),
        (
            with("state_ops", json!([{ "type": "upsert", "key": "k" }])),
            StatusCode::BAD_REQUEST,
            "value is required",
        ),
        (
            with(
                "state_ops",
                json!([{ "type": "upsert", "key": "k", "value": "a\u{0}b" }]),
            ),
            StatusCode::BAD_REQUEST,
            "NUL",
        ),
        (
            with(
                "state_ops",
                json!([{ "type": "upsert", "key": "k", "value": big }]),
            ),
            StatusCode::PAYLOAD_TOO_LARGE,
            "is over",
        ),
        (
            with(
                "state_ops",
                json!([{ "type": "upsert", "key": "k".repeat(1025), "value": 1 }]),
            ),
            StatusCode::PAYLOAD_TOO_LARGE,
            "is over",
        ),
        (
            with("push_items", json!("x")),
            StatusCode::BAD_REQUEST,
            "push_items must be an array",
        ),
        (
            with("push_items", json!([{ "partition": "p" }])),
            StatusCode::BAD_REQUEST,
            "Queue must be a string",
        ),
        (
            with(
                "push_items",
                json!([{ "queue": "a", "transactionId": "t" }, { "queue": "a", "transactionId": "t" }]),
            ),
            StatusCode::BAD_REQUEST,
            "repeat transactionId",
        ),
        (
            with("ack", json!(5)),
            StatusCode::BAD_REQUEST,
            "ack must be an object",
        ),
        (
            with("ack", json!({ "leaseId": f.msgs[0]["leaseId"] })),
            StatusCode::BAD_REQUEST,
            "ack.transactionId is required",
        ),
        (
            with("ack", json!({ "transactionId": "m-0" })),
            StatusCode::BAD_REQUEST,
            "ack.leaseId is required",
        ),
        (
            with(
                "ack",
                json!({ "transactionId": "m-0", "leaseId": f.msgs[0]["leaseId"], "status": "failed" }),
            ),
            StatusCode::BAD_REQUEST,
            "ack.status",
        ),
        (
            with(
                "ack",
                json!({ "transactionId": "m-0", "leaseId": f.msgs[0]["leaseId"], "count": 0 }),
            ),
            StatusCode::BAD_REQUEST,
            "ack.count",
        ),
        (
            with("release_lease", json!("no")),
            StatusCode::BAD_REQUEST,
            "release_lease must be a boolean",
        ),
        (
            with("consumer_group", json!(1)),
            StatusCode::BAD_REQUEST,
            "consumer_group must be a string",
        ),
    ];
    for (body, want, text) in cases {
        let (status, res) = f.post_cycle(&body).await;
        let err = assert_error(status, &res, want);
        assert!(err.contains(text), "{body}: {err}");
        assert_eq!(res["success"], false);
        f.assert_untouched(&[]).await;
    }
    // state/get refuses the same way
    for (body, want) in [
        (json!({ "partition_id": f.pid() }), StatusCode::BAD_REQUEST),
        (
            json!({ "query_id": f.query, "partition_id": "nope" }),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!({ "query_id": f.query, "partition_id": f.pid(), "keys": [1] }),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!({ "query_id": f.query, "partition_id": f.pid(), "ripe_at_or_before": "x" }),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!({ "query_id": uuid::Uuid::new_v4().to_string(), "partition_id": f.pid() }),
            StatusCode::NOT_FOUND,
        ),
        (
            json!({ "query_id": f.query, "partition_id": uuid::Uuid::new_v4().to_string() }),
            StatusCode::NOT_FOUND,
        ),
    ] {
        let (status, res) = f.b.post("/streams/v1/state/get", &body).await;
        assert_error(status, &res, want);
    }
    // the good cycle still commits after all that
    let (status, res) = f.post_cycle(&ok).await;
    assert_eq!(status, StatusCode::OK, "{res}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cycles_and_state_show_in_the_metrics() {
    let f = fixture(1).await;
    let (status, _) = f
        .post_cycle(&f.cycle(
            json!([upsert("a", json!(1)), upsert("b", json!(2))]),
            json!([]),
            f.ack_of(0),
        ))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = f
        .post_cycle(&f.cycle(json!([]), json!([]), f.ack_of(0)))
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    let text = reqwest::get(f.b.url("/metrics/prometheus"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let line = |prefix: &str| {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} in metrics"))
            .rsplit(' ')
            .next()
            .unwrap()
            .to_owned()
    };
    assert_eq!(
        line("queen_streams_cycles_total{outcome=\"committed\"}"),
        "1"
    );
    assert_eq!(line("queen_streams_cycles_total{outcome=\"refused\"}"), "1");
    assert_eq!(line("queen_streams_state_ops_total{op=\"upsert\"}"), "2");
    assert_eq!(
        line(&format!("queen_streams_state_rows{{query=\"{}\"}}", f.name)),
        "2"
    );
    assert_eq!(line("queen_streams_cycle_duration_seconds_count"), "2");

    // the dashboard's listing: state rows and the lag of the query's group
    push_numbered(&f.b, &f.source, "p1", "more", 2).await;
    let (status, body) = f.b.get("/api/v1/streams/queries").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let q = body["queries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["name"] == f.name.as_str())
        .unwrap_or_else(|| panic!("query not listed: {body}"))
        .clone();
    assert_eq!(q["stateRows"], 2, "{q}");
    assert_eq!(q["lag"], 2, "{q}");
    assert_eq!(q["sourceQueue"], f.source.as_str());
    assert_eq!(q["sinkQueue"], f.sink.as_str());
    assert_eq!(q["consumerGroup"], f.group.as_str());
}
