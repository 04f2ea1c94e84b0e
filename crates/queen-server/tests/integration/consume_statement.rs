//! The one-statement consume path (issue 19): `sql/statements/consume_flight.sql`
//! for hinted wildcard pops (first contact with a partition included) and
//! acks of a whole lease. Each test checks both that the statement path ran (the
//! `queen_consume_statement_total{op}` counter) or did not, and that the
//! answer and the cursor are what `queen.pop_queue` and `queen.ack_batch`
//! give for the same requests.

use std::collections::BTreeSet;

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::*;

const GROUP: &str = "__QUEUE_MODE__";

async fn statement_count(b: &queen_testkit::TestBroker, op: &str) -> f64 {
    prometheus_value(b, &format!("queen_consume_statement_total{{op=\"{op}\"}}"))
        .await
        .unwrap_or(0.0)
}

/// Acks `msgs` as one `/ack/batch` request with `status`; returns the results.
async fn ack_all(b: &queen_testkit::TestBroker, msgs: &[Value], status: &str) -> Vec<Value> {
    ack_all_in(b, None, msgs, status).await
}

/// [`ack_all`] for consumer group `group` (`None`: queue mode).
async fn ack_all_in(
    b: &queen_testkit::TestBroker,
    group: Option<&str>,
    msgs: &[Value],
    status: &str,
) -> Vec<Value> {
    let items: Vec<Value> = msgs.iter().map(|m| ack_item(m, status, None)).collect();
    let mut req = json!({ "acknowledgments": items });
    if let Some(g) = group {
        req["consumerGroup"] = json!(g);
    }
    let (code, body) = b.post("/api/v1/ack/batch", &req).await;
    assert_eq!(code, StatusCode::OK, "ack answered {body}");
    body.as_array()
        .unwrap_or_else(|| panic!("ack body is not an array: {body}"))
        .clone()
}

/// One consumer of `queue`: pops `batch` at a time and acks each pop whole,
/// until five pops in a row found nothing; the transactionIds it received.
async fn consume_until_idle(
    b: std::sync::Arc<queen_testkit::TestBroker>,
    queue: String,
    batch: usize,
) -> Vec<String> {
    let mut seen = Vec::new();
    let mut empty = 0;
    while empty < 5 {
        let (status, body) = b
            .get(&pop_path(&queue, None, &format!("batch={batch}")))
            .await;
        if status != StatusCode::OK {
            empty += 1;
            sleep_ms(30).await;
            continue;
        }
        empty = 0;
        let r = ack_all(&b, &messages(&body), "completed").await;
        assert!(r.iter().all(|o| o["success"] == true), "{r:?}");
        seen.extend(txn_ids(&body));
    }
    seen
}

/// What the consumer `tasks` received, added to `all`: `want` messages,
/// none twice.
async fn assert_each_once(
    mut all: Vec<String>,
    tasks: Vec<tokio::task::JoinHandle<Vec<String>>>,
    want: usize,
) {
    for t in tasks {
        all.extend(t.await.expect("consumer task"));
    }
    let total = all.len();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), total, "a message was delivered twice");
    assert_eq!(total, want, "every message once");
}

fn numbered(queue: &str, partition: &str, prefix: &str, range: std::ops::Range<usize>) -> Value {
    Value::Array(
        range
            .map(|i| {
                json!({ "queue": queue, "partition": partition, "payload": { "n": i },
                        "transactionId": format!("{prefix}-{i}") })
            })
            .collect(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hinted_pops_and_whole_lease_acks_take_one_statement_each() {
    let (db, b) = setup().await;
    let queue = unique("cs1");
    // three pushes: three segments, so a batch of 10 spans them
    for r in [0..4, 4..8, 8..12] {
        push_items(&b, numbered(&queue, "p", "m", r)).await;
    }
    let path = pop_path(&queue, None, "batch=1");
    // first contact: no cursor row yet, the statement makes it, leased
    let first = pop_ok(&b, &path).await;
    assert_eq!(txn_ids(&first), vec!["m-0"]);
    assert_eq!(statement_count(&b, "pop").await, 1.0);
    let client = db.client().await.expect("db client");
    let pid = partition_id(&client, &queue, "p").await;
    assert_eq!(cursor(&client, pid, GROUP).await, Some((0, true)));
    let r = ack_all(&b, &messages(&first), "completed").await;
    assert_eq!(r[0]["success"], true, "{r:?}");
    assert_eq!(r[0]["leaseReleased"], true, "{r:?}");
    assert_eq!(statement_count(&b, "ack").await, 1.0);

    // from now on: one statement per pop, one per ack
    let body = pop_ok(&b, &pop_path(&queue, None, "batch=10")).await;
    assert_eq!(statement_count(&b, "pop").await, 2.0);
    let want: Vec<String> = (1..11).map(|i| format!("m-{i}")).collect();
    assert_eq!(txn_ids(&body), want);
    let msgs = messages(&body);
    for (i, m) in msgs.iter().enumerate() {
        assert_eq!(m["data"], json!({ "n": i + 1 }), "{m}");
        assert_eq!(m["partition"], "p", "{m}");
        assert_eq!(m["queue"], queue.as_str(), "{m}");
        assert_eq!(m["leaseId"], body["leaseId"], "{m}");
    }
    assert_eq!(cursor(&client, pid, GROUP).await, Some((1, true)));
    // the partition is leased: a second pop finds nothing past the lease
    pop_empty(&b, &pop_path(&queue, None, "batch=10")).await;

    let r = ack_all(&b, &msgs, "completed").await;
    assert_eq!(statement_count(&b, "ack").await, 2.0);
    assert_eq!(r.len(), 10);
    for (i, o) in r.iter().enumerate() {
        assert_eq!(o["index"], i, "{o}");
        assert_eq!(o["transactionId"], format!("m-{}", i + 1), "{o}");
        assert_eq!(o["success"], true, "{o}");
        assert_eq!(o["error"], Value::Null, "{o}");
        assert_eq!(o["queueName"], queue.as_str(), "{o}");
        assert_eq!(o["partitionName"], "p", "{o}");
        assert_eq!(o["leaseReleased"], i == 9, "{o}");
        assert_eq!(o["dlq"], false, "{o}");
    }
    assert_eq!(cursor(&client, pid, GROUP).await, Some((11, false)));
    let (consumed, batches) = cursor_counts(&client, pid, GROUP).await;
    assert_eq!((consumed, batches), (11, 2));

    // a repeated ack finds the lease gone: the function path answers it as
    // an idempotent success that releases nothing
    let again = ack_all(&b, &msgs, "completed").await;
    assert_eq!(statement_count(&b, "ack").await, 2.0);
    assert!(again.iter().all(|o| o["success"] == true), "{again:?}");
    assert!(
        again.iter().all(|o| o["leaseReleased"] == false),
        "{again:?}"
    );

    // (which path this one takes depends on whether the broker still hints
    // the partition; either way it hands out the rest)
    let last = pop_ok(&b, &pop_path(&queue, None, "batch=10")).await;
    assert_eq!(txn_ids(&last), vec!["m-11"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_that_are_not_the_whole_lease_in_order_take_the_function_path() {
    let (db, b) = setup().await;
    let queue = unique("cs2");
    push_items(&b, numbered(&queue, "p", "m", 0..1)).await;
    let warm = pop_ok(&b, &pop_path(&queue, None, "")).await;
    ack_all(&b, &messages(&warm), "completed").await;
    push_items(&b, numbered(&queue, "p", "m", 1..20)).await;
    let acks_before = statement_count(&b, "ack").await;
    let pops_before = statement_count(&b, "pop").await;
    let client = db.client().await.expect("db client");
    let pid = partition_id(&client, &queue, "p").await;

    // part of the lease: the cursor moves to the last acked one, the lease stays
    let body = pop_ok(&b, &pop_path(&queue, None, "batch=3")).await;
    assert_eq!(statement_count(&b, "pop").await, pops_before + 1.0);
    let msgs = messages(&body);
    let r = ack_all(&b, &msgs[..2], "completed").await;
    assert!(r.iter().all(|o| o["success"] == true), "{r:?}");
    assert!(r.iter().all(|o| o["leaseReleased"] == false), "{r:?}");
    assert_eq!(cursor(&client, pid, GROUP).await, Some((3, true)));
    // the rest, alone: the statement compares with the span from the cursor
    let r = ack_all(&b, &msgs[2..], "completed").await;
    assert_eq!(r[0]["leaseReleased"], true, "{r:?}");
    assert_eq!(statement_count(&b, "ack").await, acks_before + 1.0);
    assert_eq!(cursor(&client, pid, GROUP).await, Some((4, false)));

    // the whole lease in another order: same outcome as one by one
    let body = pop_ok(&b, &pop_path(&queue, None, "batch=3")).await;
    let mut msgs = messages(&body);
    msgs.swap(0, 2);
    let r = ack_all(&b, &msgs, "completed").await;
    assert_eq!(statement_count(&b, "ack").await, acks_before + 1.0);
    assert!(r.iter().all(|o| o["success"] == true), "{r:?}");
    let released: Vec<bool> = r.iter().map(|o| o["leaseReleased"] == true).collect();
    assert_eq!(released, vec![true, false, false], "{r:?}");
    assert_eq!(cursor(&client, pid, GROUP).await, Some((7, false)));

    // a wrong lease id: refused, nothing moves
    let body = pop_ok(&b, &pop_path(&queue, None, "batch=2")).await;
    let mut msgs = messages(&body);
    for m in &mut msgs {
        m["leaseId"] = json!(uuid::Uuid::now_v7().to_string());
    }
    let r = ack_all(&b, &msgs, "completed").await;
    assert!(r.iter().all(|o| o["success"] == false), "{r:?}");
    assert_eq!(r[0]["error"], "Invalid or expired lease", "{r:?}");
    assert_eq!(cursor(&client, pid, GROUP).await, Some((7, true)));

    // a transactionId outside the lease: that one is not found, the other moves the cursor
    let mut msgs = messages(&body);
    msgs[1]["transactionId"] = json!("not-there");
    let r = ack_all(&b, &msgs, "completed").await;
    assert_eq!(r[0]["success"], true, "{r:?}");
    assert_eq!(r[1]["success"], false, "{r:?}");
    assert_eq!(r[1]["error"], "Message not found", "{r:?}");
    assert_eq!(cursor(&client, pid, GROUP).await, Some((8, true)));

    // failed: a retry, then redelivery from the failed message
    let msgs = messages(&body);
    let r = ack_all(&b, &msgs[1..], "failed").await;
    assert_eq!(r[0]["success"], true, "{r:?}");
    assert_eq!(statement_count(&b, "ack").await, acks_before + 1.0);
    let again = pop_ok(&b, &pop_path(&queue, None, "batch=1")).await;
    assert_eq!(txn_ids(&again), vec!["m-8"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_deleted_inside_the_range_sends_the_pop_to_the_function_path() {
    let (db, b) = setup().await;
    let queue = unique("cs3");
    push_items(&b, numbered(&queue, "p", "m", 0..1)).await;
    let warm = pop_ok(&b, &pop_path(&queue, None, "")).await;
    ack_all(&b, &messages(&warm), "completed").await;
    push_items(&b, numbered(&queue, "p", "m", 1..6)).await;
    let client = db.client().await.expect("db client");
    let pid = partition_id(&client, &queue, "p").await;
    let (status, body) = b.delete(&format!("/api/v1/messages/{pid}/m-2")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let pops_before = statement_count(&b, "pop").await;

    let body = pop_ok(&b, &pop_path(&queue, None, "batch=3")).await;
    // the statement claimed m-1..m-3, saw the deletion and let pop_queue
    // claim again, which skips it
    assert_eq!(statement_count(&b, "pop").await, pops_before);
    assert_eq!(txn_ids(&body), vec!["m-1", "m-3"]);
    let r = ack_all(&b, &messages(&body), "completed").await;
    assert!(r.iter().all(|o| o["success"] == true), "{r:?}");
    assert_eq!(cursor(&client, pid, GROUP).await, Some((4, false)));

    // past the deletion the statement path is back
    let body = pop_ok(&b, &pop_path(&queue, None, "batch=5")).await;
    assert_eq!(txn_ids(&body), vec!["m-4", "m-5"]);
    assert_eq!(statement_count(&b, "pop").await, pops_before + 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_statement_path_hands_out_the_same_messages_as_the_partition_route() {
    let (_db, b) = setup().await;
    let queue = unique("cs4");
    let items: Vec<Value> = (0..6)
        .map(|i| {
            json!({ "queue": queue, "partition": "p", "payload": { "n": i, "s": "é\"x" },
                    "transactionId": format!("t-{i}"),
                    "traceId": if i % 2 == 0 { json!(uuid::Uuid::new_v4().to_string()) } else { Value::Null } })
        })
        .collect();
    push_items(&b, Value::Array(items)).await;
    let mut answers = Vec::new();
    for (group, route) in [("gw", None), ("gp", Some("p"))] {
        // first contact, then the rest
        let q = format!("consumerGroup={group}&batch=1");
        let warm = pop_ok(&b, &pop_path(&queue, route, &q)).await;
        let r = ack_all_in(&b, Some(group), &messages(&warm), "completed").await;
        assert_eq!(r[0]["success"], true, "{r:?}");
        let q = format!("consumerGroup={group}&batch=10");
        let body = pop_ok(&b, &pop_path(&queue, route, &q)).await;
        answers.push(messages(&body));
    }
    // the wildcard group's first contact and its second pop; the partition route never
    assert_eq!(statement_count(&b, "pop").await, 2.0);
    let strip = |msgs: &[Value]| -> Vec<Value> {
        msgs.iter()
            .map(|m| {
                let mut m = m.clone();
                let o = m.as_object_mut().expect("message object");
                o.remove("leaseId");
                o.remove("consumerGroup");
                m
            })
            .collect()
    };
    assert_eq!(answers[0].len(), 5);
    assert_eq!(strip(&answers[0]), strip(&answers[1]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_consumers_get_every_message_once() {
    let (db, b) = setup().await;
    let queue = unique("cs5");
    let parts = 4;
    let per = 30;
    for p in 0..parts {
        push_items(
            &b,
            numbered(&queue, &format!("p{p}"), &format!("p{p}"), 0..1),
        )
        .await;
    }
    let b = std::sync::Arc::new(b);
    // first contact for every partition, one at a time
    let mut all = Vec::new();
    for _ in 0..(parts * 2) {
        let (status, body) = b.get(&pop_path(&queue, None, "batch=1")).await;
        if status == StatusCode::OK {
            ack_all(&b, &messages(&body), "completed").await;
            all.extend(txn_ids(&body));
        }
    }
    for p in 0..parts {
        push_items(
            &b,
            numbered(&queue, &format!("p{p}"), &format!("p{p}"), 1..per),
        )
        .await;
    }
    let mut tasks = Vec::new();
    for w in 0..8 {
        let batch = if w % 2 == 0 { 1 } else { 3 };
        tasks.push(tokio::spawn(consume_until_idle(
            b.clone(),
            queue.clone(),
            batch,
        )));
    }
    assert_each_once(all, tasks, parts * per).await;
    assert!(statement_count(&b, "pop").await > 0.0);
    let client = db.client().await.expect("db client");
    for p in 0..parts {
        let pid = partition_id(&client, &queue, &format!("p{p}")).await;
        assert_eq!(cursor(&client, pid, GROUP).await, Some((per as i64, false)));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_groups_first_contact_starts_where_its_subscription_does() {
    let (db, b) = setup().await;
    let client = db.client().await.expect("db client");
    let queue = unique("cs6");
    push_items(&b, numbered(&queue, "p", "before", 0..3)).await;
    sleep_ms(20).await;
    let t: chrono::DateTime<chrono::Utc> = client
        .query_one("SELECT clock_timestamp()", &[])
        .await
        .expect("clock")
        .get(0);
    sleep_ms(20).await;
    push_items(&b, numbered(&queue, "p", "after", 0..2)).await;
    let from = t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true);

    let before = statement_count(&b, "pop").await;
    let body = pop_ok(
        &b,
        &pop_path(
            &queue,
            None,
            &format!("consumerGroup=g1&batch=10&subscriptionFrom={from}"),
        ),
    )
    .await;
    assert_eq!(txn_ids(&body), vec!["after-0", "after-1"]);
    assert_eq!(
        statement_count(&b, "pop").await,
        before + 1.0,
        "the statement made the cursor"
    );
    let pid = partition_id(&client, &queue, "p").await;
    assert_eq!(cursor(&client, pid, "g1").await, Some((3, true)));
    assert_eq!(
        count(
            &client,
            &format!(
                "SELECT count(*) FROM queen.consumer_subscriptions
                 WHERE consumer_group = 'g1' AND queue_name = '{queue}' AND partition_name = ''"
            )
        )
        .await,
        1,
        "the subscription is stored as queen.pop_queue stores it"
    );
    let r = ack_all_in(&b, Some("g1"), &messages(&body), "completed").await;
    assert!(r.iter().all(|o| o["success"] == true), "{r:?}");

    // mode new: only what comes after the group's first pop
    pop_empty(
        &b,
        &pop_path(&queue, None, "consumerGroup=g2&subscriptionMode=new"),
    )
    .await;
    sleep_ms(20).await;
    push_items(&b, numbered(&queue, "p", "later", 0..1)).await;
    let body = pop_ok(&b, &pop_path(&queue, None, "consumerGroup=g2&batch=10")).await;
    assert_eq!(txn_ids(&body), vec!["later-0"]);
    // and a group without a subscription reads everything
    let body = pop_ok(&b, &pop_path(&queue, None, "consumerGroup=g3&batch=10")).await;
    assert_eq!(txn_ids(&body).len(), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn consumers_racing_for_new_partitions_get_every_message_once() {
    let (db, b) = setup().await;
    let queue = unique("cs7");
    let parts = 24;
    let per = 3;
    let b = std::sync::Arc::new(b);
    let mut tasks = Vec::new();
    for w in 0..8 {
        let batch = if w % 2 == 0 { 1 } else { per };
        tasks.push(tokio::spawn(consume_until_idle(
            b.clone(),
            queue.clone(),
            batch,
        )));
    }
    // every partition is new while the consumers poll: each first pop of one
    // makes its cursor row
    for p in 0..parts {
        push_items(
            &b,
            numbered(&queue, &format!("n{p}"), &format!("n{p}"), 0..per),
        )
        .await;
    }
    assert_each_once(Vec::new(), tasks, parts * per).await;
    assert!(statement_count(&b, "pop").await > 0.0);
    let client = db.client().await.expect("db client");
    assert_eq!(
        count(
            &client,
            &format!(
                "SELECT count(*) FROM queen.log_consumers lc JOIN queen.partitions pt ON pt.id = lc.partition_id
                 JOIN queen.queues q ON q.id = pt.queue_id
                 WHERE q.name = '{queue}' AND lc.committed_offset = {per} AND lc.lease_expires_at IS NULL"
            )
        )
        .await,
        parts as i64,
        "one cursor row per partition, at its end, released"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_statement_reports_hinted_partitions_it_found_drained() {
    let (_db, b) = setup().await;
    let queue = unique("cs8");
    // both partitions get their cursor rows and are drained
    push_items(&b, numbered(&queue, "a", "a", 0..1)).await;
    push_items(&b, numbered(&queue, "b", "b", 0..1)).await;
    for _ in 0..2 {
        let body = pop_ok(&b, &pop_path(&queue, None, "batch=1")).await;
        ack_all(&b, &messages(&body), "completed").await;
    }
    pop_empty(&b, &pop_path(&queue, None, "batch=1")).await;
    // written again: a one message, b two; the next pop drains one of them
    push_items(&b, numbered(&queue, "a", "a", 1..2)).await;
    push_items(&b, numbered(&queue, "b", "b", 1..3)).await;
    let body = pop_ok(&b, &pop_path(&queue, None, "batch=2")).await;
    ack_all(&b, &messages(&body), "completed").await;
    let drained_before = prometheus_value(&b, "queen_pop_hints_drained_total")
        .await
        .unwrap_or(0.0);
    let pops_before = statement_count(&b, "pop").await;
    // the statement leases the other one and reports the drained one
    let body = pop_ok(&b, &pop_path(&queue, None, "batch=2")).await;
    assert_eq!(statement_count(&b, "pop").await, pops_before + 1.0);
    let drained_after = prometheus_value(&b, "queen_pop_hints_drained_total")
        .await
        .unwrap_or(0.0);
    assert_eq!(drained_after, drained_before + 1.0);
    ack_all(&b, &messages(&body), "completed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_that_never_saw_the_writes_finds_a_backlog_over_many_partitions() {
    let (db, writer) = setup().await;
    let queue = unique("cs9");
    let parts = 300;
    let items: Vec<Value> = (0..parts)
        .map(|p| {
            json!({ "queue": queue, "partition": format!("n{p}"), "payload": { "p": p },
                         "transactionId": format!("n{p}") })
        })
        .collect();
    push_items(&writer, Value::Array(items)).await;
    drop(writer);
    // a broker started after the writes (a restart): its hint list is empty
    let b = queen_testkit::TestBroker::start(&db)
        .await
        .expect("second broker");
    let path = pop_path(&queue, None, "batch=1");
    let mut seen = BTreeSet::new();
    loop {
        let (status, body) = b.get(&path).await;
        if status != StatusCode::OK {
            // the walk's turn may miss; long enough for any lookup to land
            sleep_ms(100).await;
            if b.get(&path).await.0 != StatusCode::OK {
                break;
            }
            continue;
        }
        let r = ack_all(&b, &messages(&body), "completed").await;
        assert!(r.iter().all(|o| o["success"] == true), "{r:?}");
        for t in txn_ids(&body) {
            assert!(seen.insert(t.clone()), "twice: {t}");
        }
    }
    assert_eq!(seen.len(), parts, "every message once");
    // the first walk found work its list did not know; a lookup listed the
    // rest, so most pops were answered by the statement, not by walks
    let walks = prometheus_value(&b, "queen_db_op_duration_seconds_count{op=\"pop\"}")
        .await
        .unwrap_or(0.0);
    let lookups = prometheus_value(&b, "queen_pop_discoveries_total")
        .await
        .unwrap_or(0.0);
    assert!(
        walks < 60.0,
        "{walks} pops went to queen.pop_queue for {parts} partitions"
    );
    assert!(lookups >= 1.0, "{lookups} lookups");
}
