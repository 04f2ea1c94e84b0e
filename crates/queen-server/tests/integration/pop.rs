//! Pop routes (http-api.md §3.3, §5.3, §5.13).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::{json, Value};

use queen_testkit::TestBroker;

use crate::common::*;

const MESSAGE_KEYS: [&str; 10] = [
    "id",
    "transactionId",
    "traceId",
    "data",
    "producerSub",
    "createdAt",
    "partitionId",
    "partition",
    "leaseId",
    "consumerGroup",
];
const TOP_KEYS: [&str; 8] = [
    "success",
    "queue",
    "partition",
    "partitionId",
    "leaseId",
    "consumerGroup",
    "partitionsClaimed",
    "messages",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_pops_answer_204_without_body() {
    let (_db, b) = setup().await;
    // unknown queue, both routes
    let unknown = unique("nope");
    pop_empty(&b, &pop_path(&unknown, None, "")).await;
    pop_empty(&b, &pop_path(&unknown, Some("p"), "")).await;

    // configured but empty queue; unknown partition of a known queue
    let queue = unique("empty");
    configure(&b, &queue, json!({})).await;
    pop_empty(&b, &pop_path(&queue, None, "")).await;
    pop_empty(&b, &pop_path(&queue, Some("Default"), "")).await;
    pop_empty(&b, &pop_path(&queue, Some("nope"), "")).await;

    // partition leased by another consumer of the same group
    push_numbered(&b, &queue, "held", "held", 3).await;
    let first = pop_ok(&b, &pop_path(&queue, Some("held"), "consumerGroup=g")).await;
    assert_eq!(messages(&first).len(), 1);
    pop_empty(&b, &pop_path(&queue, Some("held"), "consumerGroup=g")).await;
    pop_empty(&b, &pop_path(&queue, None, "consumerGroup=g&batch=10")).await;
    // queue mode is another group: not blocked by g's lease
    let qm = pop_ok(&b, &pop_path(&queue, Some("held"), "batch=10")).await;
    assert_eq!(txn_ids(&qm), vec!["held-0", "held-1", "held-2"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn popped_messages_have_exactly_the_contract_fields() {
    let (_db, b) = setup().await;
    let queue = unique("fields");
    let trace = uuid::Uuid::now_v7().to_string();
    let pushed = push_items(
        &b,
        json!([
            { "queue": queue, "partition": "cust-42", "payload": { "orderId": 1 },
              "transactionId": "f-1", "traceId": trace },
            { "queue": queue, "partition": "cust-42", "payload": [1, "two", null],
              "transactionId": "f-2" }
        ]),
    )
    .await;

    let body = pop_ok(
        &b,
        &pop_path(
            &queue,
            Some("cust-42"),
            // frames=true is not served (JSON comes back); autopilot adds its
            // object (tests/integration/autopilot.rs)
            "batch=10&frames=true&x=y",
        ),
    )
    .await;
    let mut top = TOP_KEYS.to_vec();
    let body_keys = keys(&body);
    assert!(
        body_keys.len() == TOP_KEYS.len(),
        "top-level keys: {body_keys:?}"
    );
    top.sort_unstable();
    assert_keys(&body, &top);
    assert_eq!(body["queue"], queue.as_str());
    assert_eq!(body["partition"], "cust-42");
    assert_eq!(body["partitionId"], pushed[0]["partition_id"]);
    assert_eq!(body["consumerGroup"], "__QUEUE_MODE__");
    assert_eq!(body["partitionsClaimed"], 1);
    let lease = body["leaseId"].as_str().expect("leaseId").to_owned();
    assert!(uuid::Uuid::parse_str(&lease).is_ok(), "leaseId {lease}");

    let msgs = messages(&body);
    assert_eq!(msgs.len(), 2);
    for (m, p) in msgs.iter().zip(&pushed) {
        let mut k = keys(m);
        k.remove("queue"); // allowed extras
        assert_eq!(
            k.take("deliveryAttempt").as_deref(),
            Some("deliveryAttempt")
        );
        assert_eq!(m["deliveryAttempt"], 1, "{m}");
        let want: std::collections::BTreeSet<String> =
            MESSAGE_KEYS.iter().map(|s| (*s).to_owned()).collect();
        assert_eq!(k, want, "message keys of {m}");
        if let Some(q) = m.get("queue") {
            assert_eq!(q, queue.as_str());
        }
        assert_eq!(m["id"], p["message_id"]);
        assert_eq!(m["transactionId"], p["transaction_id"]);
        assert_eq!(m["partitionId"], p["partition_id"]);
        assert_eq!(m["partition"], "cust-42");
        assert_eq!(m["leaseId"], lease.as_str());
        assert_eq!(m["consumerGroup"], "__QUEUE_MODE__");
        assert_eq!(m["producerSub"], Value::Null);
        let created = m["createdAt"].as_str().expect("createdAt");
        assert!(is_utc_timestamp(created, 6), "createdAt {created}");
    }
    assert_eq!(msgs[0]["traceId"], trace.as_str());
    assert_eq!(msgs[1]["traceId"], Value::Null);
    assert_eq!(msgs[0]["data"], json!({ "orderId": 1 }));
    assert_eq!(msgs[1]["data"], json!([1, "two", null]));
    let c0 = msgs[0]["createdAt"].as_str().expect("c0");
    let c1 = msgs[1]["createdAt"].as_str().expect("c1");
    assert!(c0 <= c1, "ascending createdAt");

    // createdAt is true UTC: within a minute of the test's clock
    let t = chrono::DateTime::parse_from_rfc3339(c0).expect("rfc3339");
    let skew = (chrono::Utc::now() - t.with_timezone(&chrono::Utc)).num_seconds();
    assert!(skew.abs() < 60, "createdAt {c0} is {skew} s off UTC");
}

/// 8 producers push numbered messages into one partition at once; the partition
/// then delivers every message once, each producer's messages in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_partition_fifo_holds_under_concurrent_pushes() {
    let (_db, b) = setup().await;
    let queue = unique("fifo");
    configure(&b, &queue, json!({})).await;
    let b = Arc::new(b);
    const PRODUCERS: usize = 8;
    const PER_PRODUCER: usize = 25;
    let mut tasks = Vec::new();
    for p in 0..PRODUCERS {
        let b = b.clone();
        let queue = queue.clone();
        tasks.push(tokio::spawn(async move {
            for chunk in (0..PER_PRODUCER).collect::<Vec<_>>().chunks(3) {
                let items: Vec<Value> = chunk
                    .iter()
                    .map(|&i| {
                        json!({ "queue": queue, "partition": "lane", "payload": { "p": p, "i": i },
                                "transactionId": format!("fifo-{p}-{i}") })
                    })
                    .collect();
                push_items(&b, Value::Array(items)).await;
            }
        }));
    }
    for t in tasks {
        t.await.expect("producer");
    }

    let mut got: Vec<(u64, u64)> = Vec::new();
    loop {
        let (status, body) = b
            .get(&pop_path(&queue, Some("lane"), "batch=37&autoAck=true"))
            .await;
        if status == StatusCode::NO_CONTENT {
            break;
        }
        assert_eq!(status, StatusCode::OK, "{body}");
        for m in messages(&body) {
            got.push((
                m["data"]["p"].as_u64().expect("p"),
                m["data"]["i"].as_u64().expect("i"),
            ));
        }
        assert!(
            got.len() <= PRODUCERS * PER_PRODUCER,
            "redelivered messages"
        );
    }
    assert_eq!(got.len(), PRODUCERS * PER_PRODUCER, "every message once");
    let unique_msgs: HashSet<(u64, u64)> = got.iter().copied().collect();
    assert_eq!(unique_msgs.len(), got.len(), "no duplicates");
    let mut per_producer: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for (p, i) in got {
        per_producer.entry(p).or_default().push(i);
    }
    for (p, seq) in per_producer {
        let want: Vec<u64> = (0..PER_PRODUCER as u64).collect();
        assert_eq!(seq, want, "producer {p} out of order");
    }
}

/// A consumer popping and acking while producers push: nothing committed behind
/// the cursor is lost, and each producer's order holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consuming_during_concurrent_pushes_loses_nothing() {
    let (_db, b) = setup().await;
    let queue = unique("fifo-live");
    configure(&b, &queue, json!({})).await;
    let b = Arc::new(b);
    const PRODUCERS: usize = 4;
    const PER_PRODUCER: usize = 40;
    let mut producers = Vec::new();
    for p in 0..PRODUCERS {
        let b = b.clone();
        let queue = queue.clone();
        producers.push(tokio::spawn(async move {
            for i in 0..PER_PRODUCER {
                push_one(
                    &b,
                    &queue,
                    "lane",
                    json!({ "p": p, "i": i }),
                    &format!("live-{p}-{i}"),
                )
                .await;
            }
        }));
    }
    let consumer = {
        let b = b.clone();
        let queue = queue.clone();
        tokio::spawn(async move {
            let mut got: Vec<(u64, u64)> = Vec::new();
            let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(12);
            while got.len() < PRODUCERS * PER_PRODUCER && tokio::time::Instant::now() < deadline {
                let (status, body) = b.get(&pop_path(&queue, Some("lane"), "batch=7")).await;
                if status == StatusCode::NO_CONTENT {
                    sleep_ms(5).await;
                    continue;
                }
                assert_eq!(status, StatusCode::OK, "{body}");
                let msgs = messages(&body);
                for m in &msgs {
                    got.push((
                        m["data"]["p"].as_u64().expect("p"),
                        m["data"]["i"].as_u64().expect("i"),
                    ));
                }
                let acks: Vec<Value> = msgs
                    .iter()
                    .map(|m| ack_item(m, "completed", None))
                    .collect();
                let (status, res) = b
                    .post("/api/v1/ack/batch", &json!({ "acknowledgments": acks }))
                    .await;
                assert_eq!(status, StatusCode::OK, "{res}");
                assert!(
                    res.as_array()
                        .expect("array")
                        .iter()
                        .all(|r| r["success"] == true),
                    "{res}"
                );
            }
            got
        })
    };
    for p in producers {
        p.await.expect("producer");
    }
    let got = consumer.await.expect("consumer");
    assert_eq!(
        got.len(),
        PRODUCERS * PER_PRODUCER,
        "consumer saw {} of {} messages",
        got.len(),
        PRODUCERS * PER_PRODUCER
    );
    let mut per_producer: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for (p, i) in got {
        per_producer.entry(p).or_default().push(i);
    }
    for (p, seq) in per_producer {
        assert_eq!(
            seq,
            (0..PER_PRODUCER as u64).collect::<Vec<_>>(),
            "producer {p}"
        );
    }
    pop_empty(&b, &pop_path(&queue, None, "")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answered_push_is_visible_to_an_immediate_pop() {
    let (_db, b) = setup().await;
    let queue = unique("visible");
    for i in 0..20 {
        let pushed = push_one(&b, &queue, "Default", json!(i), &format!("vis-{i}")).await;
        let path = if i % 2 == 0 {
            pop_path(&queue, None, "wait=false")
        } else {
            pop_path(&queue, Some("Default"), "wait=false")
        };
        let body = pop_ok(&b, &path).await;
        let msgs = messages(&body);
        assert_eq!(msgs.len(), 1, "iteration {i}");
        assert_eq!(msgs[0]["id"], pushed["message_id"], "iteration {i}");
        let r = ack(&b, &msgs[0], "completed", None).await;
        assert_eq!(r["success"], true, "{r}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wildcard_pop_claims_up_to_n_partitions_within_a_global_budget() {
    let (_db, b) = setup().await;
    let queue = unique("wild");
    for p in 0..5 {
        push_numbered(&b, &queue, &format!("p{p}"), &format!("w{p}"), 3).await;
    }

    // budget 4 across up to 3 partitions: 3 from the first, 1 from the second
    let body = pop_ok(&b, &pop_path(&queue, None, "partitions=3&batch=4")).await;
    let msgs = messages(&body);
    assert_eq!(msgs.len(), 4, "{body}");
    assert_eq!(body["partitionsClaimed"], 2, "{body}");
    let lease = body["leaseId"].clone();
    assert!(
        msgs.iter().all(|m| m["leaseId"] == lease),
        "one lease id per pop"
    );
    assert_eq!(body["partition"], msgs[0]["partition"]);
    assert_eq!(body["partitionId"], msgs[0]["partitionId"]);

    // partitions come concatenated, each in order from its start
    let mut order: Vec<String> = Vec::new();
    let mut by_part: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for m in &msgs {
        let p = m["partition"].as_str().expect("partition").to_owned();
        if order.last() != Some(&p) {
            assert!(!order.contains(&p), "partitions interleaved: {body}");
            order.push(p.clone());
        }
        by_part
            .entry(p)
            .or_default()
            .push(m["transactionId"].as_str().expect("txn").to_owned());
    }
    for (p, txns) in &by_part {
        let n = &p[1..];
        let want: Vec<String> = (0..txns.len()).map(|i| format!("w{n}-{i}")).collect();
        assert_eq!(txns, &want, "partition {p} out of order");
    }

    // the rest: at most 10 partitions, large budget; the two leased ones are skipped
    let body = pop_ok(&b, &pop_path(&queue, None, "partitions=10&batch=100")).await;
    assert_eq!(body["partitionsClaimed"], 3, "{body}");
    let rest = txn_ids(&body);
    assert_eq!(rest.len(), 9, "{body}");
    let first: HashSet<String> = msgs
        .iter()
        .map(|m| m["transactionId"].as_str().expect("txn").to_owned())
        .collect();
    assert!(
        rest.iter().all(|t| !first.contains(t)),
        "overlap with leased partitions"
    );
    pop_empty(&b, &pop_path(&queue, None, "partitions=10&batch=100")).await;

    // partitions=1 (the default) never mixes partitions
    let queue2 = unique("wild-one");
    for p in 0..3 {
        push_numbered(&b, &queue2, &format!("p{p}"), &format!("o{p}"), 2).await;
    }
    let body = pop_ok(&b, &pop_path(&queue2, None, "batch=100")).await;
    assert_eq!(body["partitionsClaimed"], 1);
    assert_eq!(messages(&body).len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_ack_pops_take_no_lease_and_do_not_redeliver() {
    let (db, b) = setup().await;
    let queue = unique("autoack");
    configure(&b, &queue, json!({ "leaseTime": 1 })).await;
    push_numbered(&b, &queue, "Default", "aa", 3).await;

    let body = pop_ok(&b, &pop_path(&queue, None, "batch=2&autoAck=true")).await;
    assert_eq!(body["leaseId"], "");
    let msgs = messages(&body);
    assert_eq!(txn_ids(&body), vec!["aa-0", "aa-1"]);
    assert!(msgs.iter().all(|m| m["leaseId"] == ""), "{body}");

    let client = db.client().await.expect("db client");
    let pid = partition_id(&client, &queue, "Default").await;
    assert_eq!(
        cursor(&client, pid, "__QUEUE_MODE__").await,
        Some((2, false)),
        "cursor moved past the delivered messages, no lease"
    );

    // past the configured lease time nothing comes back; the next pop starts after them
    sleep_ms(1300).await;
    let body = pop_ok(&b, &pop_path(&queue, None, "batch=10&autoAck=1")).await;
    assert_eq!(txn_ids(&body), vec!["aa-2"]);
    pop_empty(&b, &pop_path(&queue, None, "batch=10")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_parameters_are_lenient() {
    let (_db, b) = setup().await;
    let queue = unique("lenient");
    push_numbered(&b, &queue, "Default", "ln", 4).await;
    // batch=0 is the default (1); garbage gives the default (1); unknown
    // parameters are ignored (conflation=false too)
    let body = pop_ok(
        &b,
        &pop_path(
            &queue,
            None,
            "batch=0&autoAck=true&conflation=false&namespace=x&task=y",
        ),
    )
    .await;
    assert_eq!(txn_ids(&body), vec!["ln-0"]);
    let body = pop_ok(&b, &pop_path(&queue, None, "batch=lots&autoAck=1")).await;
    assert_eq!(txn_ids(&body), vec!["ln-1"]);
    // autoAck=yes is not true: a lease is taken
    let body = pop_ok(&b, &pop_path(&queue, None, "autoAck=yes")).await;
    assert_ne!(body["leaseId"], "");
    // wait=yes is not true: answers at once although the partition is leased
    let started = std::time::Instant::now();
    pop_empty(&b, &pop_path(&queue, None, "wait=yes&timeout=5000")).await;
    assert!(started.elapsed() < std::time::Duration::from_millis(5000));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_processing_hides_messages_until_due() {
    let (_db, b) = setup().await;
    let queue = unique("delayed");
    configure(&b, &queue, json!({ "delayedProcessing": 1 })).await;
    push_numbered(&b, &queue, "Default", "dl", 2).await;
    pop_empty(&b, &pop_path(&queue, None, "batch=10")).await;
    sleep_ms(1200).await;
    let body = pop_ok(
        &b,
        &pop_path(&queue, None, "batch=10&wait=true&timeout=3000"),
    )
    .await;
    assert_eq!(txn_ids(&body), vec!["dl-0", "dl-1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn window_buffer_holds_a_partition_until_it_is_quiet() {
    let (_db, b) = setup().await;
    let queue = unique("window");
    configure(&b, &queue, json!({ "windowBuffer": 1 })).await;
    push_numbered(&b, &queue, "Default", "wb", 1).await;
    pop_empty(&b, &pop_path(&queue, None, "batch=10")).await;
    pop_empty(&b, &pop_path(&queue, Some("Default"), "batch=10")).await;
    sleep_ms(1200).await;
    let body = pop_ok(
        &b,
        &pop_path(&queue, Some("Default"), "batch=10&wait=true&timeout=3000"),
    )
    .await;
    assert_eq!(txn_ids(&body), vec!["wb-0"]);
}

/// A due message is delivered by a wildcard pop even when many partitions whose
/// heads are still delayed sort before its partition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wildcard_pop_finds_a_due_partition_behind_many_delayed_ones() {
    let (_db, b) = setup().await;
    let queue = unique("delay-many");
    configure(&b, &queue, json!({ "delayedProcessing": 2 })).await;
    // the ready partition has been consumed before, so it sorts after fresh ones
    push_numbered(&b, &queue, "ready", "first", 1).await;
    sleep_ms(2100).await;
    let body = pop_ok(
        &b,
        &pop_path(&queue, None, "autoAck=true&wait=true&timeout=3000"),
    )
    .await;
    assert_eq!(txn_ids(&body), vec!["first-0"]);

    push_numbered(&b, &queue, "ready", "due", 1).await;
    sleep_ms(1000).await;
    let items: Vec<Value> = (0..30)
        .map(|p| json!({ "queue": queue, "partition": format!("later-{p}"), "payload": p }))
        .collect();
    let pushed_at = std::time::Instant::now(); // their createdAt is later than this
    push_items(&b, Value::Array(items)).await;
    sleep_ms(1100).await;
    // "due-0" is due now; the 30 other partitions are not, for about another second
    let body = pop_ok(&b, &pop_path(&queue, None, "")).await;
    // (on a very slow machine the others may be due too; then any of them is fine)
    if pushed_at.elapsed() < std::time::Duration::from_millis(1900) {
        assert_eq!(txn_ids(&body), vec!["due-0"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wildcard_pops_serve_hinted_and_unhinted_partitions_exactly_once() {
    // The broker remembers the 32 partitions written to last and pops try
    // them first; everything else must still be found by the database walk:
    // older partitions that fell off the list, and partitions written behind
    // this broker's back (here: straight through the stored function).
    let (db, b) = setup().await;
    let queue = unique("hinted");
    for p in 0..40 {
        push_numbered(&b, &queue, &format!("h{p}"), &format!("h{p}"), 1).await;
    }
    let client = db.client().await.expect("db client");
    client
        .execute(
            "SELECT queen.push_batch(array_fill(q.id, ARRAY[5]),
                                     ARRAY['s0','s1','s2','s3','s4'],
                                     ARRAY(SELECT gen_random_uuid() FROM generate_series(1, 5)),
                                     ARRAY['s0-0','s1-0','s2-0','s3-0','s4-0'],
                                     array_fill(NULL::uuid, ARRAY[5]),
                                     array_fill('{}'::text, ARRAY[5]),
                                     array_fill(NULL::text, ARRAY[5]), false, NULL)
             FROM queen.queues q WHERE q.name = $1",
            &[&queue],
        )
        .await
        .expect("push behind the broker");

    // A wait=false pop may answer empty between the hints running out and the
    // next walk (the walk floor interval); what must hold is that every
    // partition is served, once, within the deadline.
    let mut seen: Vec<String> = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while seen.len() < 45 {
        assert!(
            std::time::Instant::now() < deadline,
            "only {} of 45 served: {seen:?}",
            seen.len()
        );
        let (status, body) = b
            .get(&pop_path(&queue, None, "consumerGroup=g&batch=1"))
            .await;
        if status == StatusCode::NO_CONTENT {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            continue;
        }
        assert_eq!(status, StatusCode::OK, "{body}");
        let msgs = messages(&body);
        assert_eq!(msgs.len(), 1, "{body}");
        ack(&b, &msgs[0], "completed", None).await;
        seen.extend(txn_ids(&body));
    }
    pop_empty(&b, &pop_path(&queue, None, "consumerGroup=g&batch=1")).await;
    let mut want: Vec<String> = (0..40).map(|p| format!("h{p}-0")).collect();
    want.extend((0..5).map(|p| format!("s{p}-0")));
    want.sort();
    seen.sort();
    assert_eq!(seen, want, "every partition served exactly once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wildcard_pops_report_drained_hints_and_skip_leased_ones() {
    // queen.pop_queue with p_report_drained: hinted partitions with nothing
    // past the group's cursor (or unknown) come back as marker rows; a leased
    // partition is not drained and is not reported.
    let (db, b) = setup().await;
    let queue = unique("drained");
    push_numbered(&b, &queue, "a", "a", 2).await;
    push_numbered(&b, &queue, "b", "b", 1).await;
    let body = pop_ok(&b, &pop_path(&queue, Some("b"), "consumerGroup=g")).await;
    ack(&b, &messages(&body)[0], "completed", None).await;

    let client = db.client().await.expect("db client");
    let pop = "SELECT partition_name, msg_offset, transaction_id
               FROM queen.queues q,
                    queen.pop_queue(q.id, q.name, 'g', 1, 1, gen_random_uuid(), 60, false, 0, 0,
                                    'all', NULL, 'test', ARRAY['b', 'a', 'zz'], $2, true)
               WHERE q.name = $1";
    let rows = |report: bool| {
        let client = &client;
        let queue = &queue;
        async move {
            let mut rows: Vec<(String, Option<i64>, Option<String>)> = client
                .query(pop, &[queue, &report])
                .await
                .expect("pop_queue")
                .iter()
                .map(|r| (r.get(0), r.get(1), r.get(2)))
                .collect();
            rows.sort();
            rows
        }
    };
    assert_eq!(
        rows(true).await,
        vec![
            ("a".to_owned(), Some(1), Some("a-0".to_owned())),
            ("b".to_owned(), None, None),
            ("zz".to_owned(), None, None),
        ]
    );
    // `a` is leased now: neither claimable nor drained
    assert_eq!(
        rows(true).await,
        vec![("b".to_owned(), None, None), ("zz".to_owned(), None, None)]
    );
    // without the walk only hinted partitions are claimed
    push_numbered(&b, &queue, "c", "c", 1).await;
    let walk = |walk: bool| {
        let client = &client;
        let queue = &queue;
        async move {
            let rows = client
                .query(
                    "SELECT m.partition_name, m.msg_offset FROM queen.queues q,
                            queen.pop_queue(q.id, q.name, 'g', 1, 1, gen_random_uuid(), 60, false,
                                            0, 0, 'all', NULL, 'test', ARRAY['b'], true, $2) m
                     WHERE q.name = $1",
                    &[queue, &walk],
                )
                .await
                .expect("pop_queue");
            rows.iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect::<Vec<(String, Option<i64>)>>()
        }
    };
    assert_eq!(walk(false).await, vec![("b".to_owned(), None)]);
    assert_eq!(
        walk(true).await,
        vec![("b".to_owned(), None), ("c".to_owned(), Some(1))]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_messages_are_skipped_at_the_end_of_a_batch_too() {
    // The lease of a batch ends at its last delivered message: a deleted
    // message after it must not stop the lease from completing.
    let (db, b) = setup().await;
    let queue = unique("deltail");
    push_numbered(&b, &queue, "p", "m", 3).await;
    let client = db.client().await.expect("db client");
    let pid = partition_id(&client, &queue, "p").await;
    let (status, _) = b.delete(&format!("/api/v1/messages/{pid}/m-2")).await;
    assert_eq!(status, StatusCode::OK);

    let body = pop_ok(&b, &pop_path(&queue, Some("p"), "batch=10")).await;
    assert_eq!(txn_ids(&body), vec!["m-0", "m-1"]);
    for m in messages(&body) {
        ack(&b, &m, "completed", None).await;
    }
    assert_eq!(
        cursor(&client, pid, "__QUEUE_MODE__").await,
        Some((2, false))
    );

    // everything left is deleted: the cursor steps over it, nothing is leased
    push_numbered(&b, &queue, "p", "n", 2).await;
    for t in ["n-0", "n-1"] {
        let (status, _) = b.delete(&format!("/api/v1/messages/{pid}/{t}")).await;
        assert_eq!(status, StatusCode::OK);
    }
    pop_empty(&b, &pop_path(&queue, Some("p"), "batch=10")).await;
    assert_eq!(
        cursor(&client, pid, "__QUEUE_MODE__").await,
        Some((5, false))
    );
    push_numbered(&b, &queue, "p", "o", 1).await;
    let body = pop_ok(&b, &pop_path(&queue, Some("p"), "batch=10")).await;
    assert_eq!(txn_ids(&body), vec!["o-0"]);
}

/// `queen_pop_hints_drained_total` of the broker.
async fn hints_drained(b: &TestBroker) -> f64 {
    prometheus_value(b, "queen_pop_hints_drained_total")
        .await
        .expect("queen_pop_hints_drained_total on the metrics page")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drained_hints_leave_the_candidates_until_written_again() {
    // The broker's list of written partitions: a wildcard pop hints the
    // group's candidates, the database reports the drained ones, and they
    // are not hinted (nor reported) again until a push writes to them.
    let (_db, b) = setup().await;
    let queue = unique("cand");
    push_numbered(&b, &queue, "a", "a", 1).await;
    push_numbered(&b, &queue, "b", "b", 1).await;
    let path = pop_path(&queue, None, "consumerGroup=g&batch=1");
    let before = hints_drained(&b).await;
    for _ in 0..2 {
        let body = pop_ok(&b, &path).await;
        ack(&b, &messages(&body)[0], "completed", None).await;
    }
    // one pop per 500 ms per group skips the hints: a few tries find one that uses them
    let mut reported = before;
    for _ in 0..10 {
        pop_empty(&b, &path).await;
        reported = hints_drained(&b).await;
        if reported - before >= 2.0 {
            break;
        }
    }
    assert_eq!(reported - before, 2.0, "a and b reported drained once");
    for _ in 0..5 {
        pop_empty(&b, &path).await;
    }
    assert_eq!(
        hints_drained(&b).await,
        reported,
        "drained hints are not sent again"
    );

    push_numbered(&b, &queue, "a", "a2", 1).await;
    let body = pop_ok(&b, &path).await;
    assert_eq!(txn_ids(&body), vec!["a2-0"]);
    ack(&b, &messages(&body)[0], "completed", None).await;
    let mut again = reported;
    for _ in 0..10 {
        pop_empty(&b, &path).await;
        again = hints_drained(&b).await;
        if again > reported {
            break;
        }
    }
    assert_eq!(
        again - reported,
        1.0,
        "written again, drained again: reported once more"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replays_after_a_seek_or_a_group_deletion_are_served_at_once() {
    // The broker's drained marks and its "walks find nothing" state must not
    // hide messages that a cursor moved back makes pending again.
    let (_db, b) = setup().await;
    let queue = unique("replay");
    let group = unique("g");
    let start = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    sleep_ms(50).await;
    push_numbered(&b, &queue, "p", "m", 3).await;
    let all = vec!["m-0", "m-1", "m-2"];
    assert_eq!(drain_group(&b, &queue, &group).await, all);

    let (status, body) = b
        .post(
            &format!("/api/v1/consumer-groups/{group}/queues/{queue}/seek"),
            &json!({ "timestamp": start }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        drain_group(&b, &queue, &group).await,
        all,
        "replayed after a seek"
    );

    let (status, body) = b
        .delete(&format!(
            "/api/v1/consumer-groups/{group}?deleteMetadata=true"
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        drain_group(&b, &queue, &group).await,
        all,
        "read again after a deletion"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_on_a_leased_partition_takes_no_row_lock() {
    // A pop that loses the race for a partition must not lock the group's
    // cursor row just to find the lease (V9): the lock writes the tuple.
    let (db, b) = setup().await;
    let queue = unique("leased");
    push_numbered(&b, &queue, "a", "a", 2).await;
    let body = pop_ok(&b, &pop_path(&queue, Some("a"), "consumerGroup=g&batch=1")).await;
    assert_eq!(txn_ids(&body), vec!["a-0"]);
    let mut first = db.client().await.expect("db client");
    let pid = partition_id(&first, &queue, "a").await;
    let tx = first.transaction().await.expect("begin");
    let claimed = tx
        .query(
            "SELECT * FROM queen.claim_partition($1, $2, 'a', 'g', 1, gen_random_uuid(), false, 60,
                                                 false, 0, 0, '', 'all', NULL, 'test')",
            &[&pid, &queue],
        )
        .await
        .expect("claim_partition");
    assert!(claimed.is_empty(), "the partition is leased");
    // the failed claim's transaction is still open: the row must be free
    let other = db.client().await.expect("db client");
    other
        .query_one(
            "SELECT 1 FROM queen.log_consumers
             WHERE partition_id = $1 AND consumer_group = 'g' FOR UPDATE NOWAIT",
            &[&pid],
        )
        .await
        .expect("the cursor row is not locked by the failed claim");
    tx.rollback().await.expect("rollback");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_the_list_missed_is_served_from_hints_once_walked() {
    // Broker B never heard of these pushes (no mesh): its first pop walks the
    // queue, and the partition the walk found work in becomes a candidate, so
    // the next pops are served from hints instead of walking every time.
    let (db, a) = setup().await;
    let other = TestBroker::start(&db).await.expect("second broker");
    let queue = unique("backlog");
    const MESSAGES: usize = 30;
    push_numbered(&a, &queue, "p", "p", MESSAGES).await;
    let walks = || async {
        prometheus_value(&other, "queen_pop_walks_total")
            .await
            .expect("queen_pop_walks_total on the metrics page")
    };
    let before = walks().await;
    let path = pop_path(&queue, None, "consumerGroup=g&batch=1");
    let started = std::time::Instant::now();
    let mut got = Vec::new();
    for _ in 0..MESSAGES {
        let body = pop_ok(&other, &path).await;
        ack(&other, &messages(&body)[0], "completed", None).await;
        got.extend(txn_ids(&body));
    }
    let elapsed_ms = started.elapsed().as_millis() as f64;
    let want: Vec<String> = (0..MESSAGES).map(|i| format!("p-{i}")).collect();
    assert_eq!(got, want, "in order, each once");
    let walked = walks().await - before;
    // the first pop walks; after that only the floor walk (one per 500 ms per
    // group) goes to the database walk
    let bound = 2.0 + (elapsed_ms / 500.0).floor();
    assert!(
        walked >= 1.0 && walked <= bound,
        "{walked} walks for {MESSAGES} pops in {elapsed_ms} ms (at most {bound})"
    );
}
