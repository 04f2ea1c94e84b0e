//! Consumer group commit (issue 19): hinted pops and whole-lease acks that
//! arrive together share one statement (`store/flights.rs`,
//! `store/consume.rs`). Whatever the grouping, every pop gets a partition of
//! its own, every ack is applied once and each member gets its own answer.

use std::collections::{BTreeMap, BTreeSet};

use futures_util::future::join_all;
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::*;

const GROUP: &str = "__QUEUE_MODE__";

async fn members(b: &queen_testkit::TestBroker, op: &str) -> f64 {
    prometheus_value(
        b,
        &format!("queen_consume_flight_members_total{{op=\"{op}\"}}"),
    )
    .await
    .unwrap_or(0.0)
}

/// Pushes `per` messages `<partition>-<i>` into each of `partitions` partitions.
async fn fill(b: &queen_testkit::TestBroker, queue: &str, partitions: usize, per: usize) {
    let items: Vec<Value> = (0..partitions)
        .flat_map(|p| {
            (0..per).map(move |i| {
                json!({ "queue": queue, "partition": format!("p{p}"), "payload": { "i": i },
                        "transactionId": format!("p{p}-{i}") })
            })
        })
        .collect();
    push_items(b, Value::Array(items)).await;
}

/// Acks all of `msgs` as one `/ack/batch` request (`group`: `None` for queue mode).
async fn ack_batch(b: &queen_testkit::TestBroker, group: Option<&str>, msgs: Vec<Value>) -> Value {
    let items: Vec<Value> = msgs
        .iter()
        .map(|m| ack_item(m, "completed", None))
        .collect();
    let mut req = json!({ "acknowledgments": items });
    if let Some(g) = group {
        req["consumerGroup"] = json!(g);
    }
    let (code, body) = b.post("/api/v1/ack/batch", &req).await;
    assert_eq!(code, StatusCode::OK, "ack answered {body}");
    body
}

/// First contact of `group` (`None`: queue mode) with partitions p0..p{n-1}
/// of `queue`: one message popped by the partition route (the function path,
/// which creates the cursor row) and acked, partition by partition.
async fn first_contact(b: &queen_testkit::TestBroker, queue: &str, n: usize, group: Option<&str>) {
    let query = match group {
        Some(g) => format!("consumerGroup={g}&batch=1"),
        None => "batch=1".to_owned(),
    };
    for p in 0..n {
        let body = pop_ok(b, &pop_path(queue, Some(&format!("p{p}")), &query)).await;
        let r = ack_batch(b, group, messages(&body)).await;
        assert_eq!(r[0]["success"], true, "{r}");
    }
}

/// `n` wildcard pops at once; each must get messages. Their bodies.
async fn pop_together(b: &queen_testkit::TestBroker, path: &str, n: usize) -> Vec<Value> {
    join_all((0..n).map(|_| pop_ok(b, path))).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_single_pops_get_distinct_partitions_and_are_acked_once() {
    let (db, b) = setup().await;
    let queue = unique("cf1");
    fill(&b, &queue, 32, 3).await;
    first_contact(&b, &queue, 32, None).await;
    let client = db.client().await.expect("db client");
    let (pops_before, acks_before) = (members(&b, "pop").await, members(&b, "ack").await);

    let path = pop_path(&queue, None, "batch=1");
    let mut seen = BTreeSet::new();
    for round in 1..3 {
        let bodies = pop_together(&b, &path, 32).await;
        // one message each, from 32 different partitions, each the next one of its partition
        let mut by_partition = BTreeMap::new();
        for body in &bodies {
            let msgs = messages(body);
            assert_eq!(msgs.len(), 1, "{body}");
            let p = msgs[0]["partition"].as_str().unwrap().to_owned();
            assert_eq!(msgs[0]["transactionId"], format!("{p}-{round}"), "{body}");
            assert!(seen.insert(msgs[0]["transactionId"].to_string()), "{body}");
            assert!(
                by_partition.insert(p, msgs[0].clone()).is_none(),
                "{bodies:?}"
            );
        }
        assert_eq!(by_partition.len(), 32);
        // every partition is leased now: nothing left to pop
        pop_empty(&b, &path).await;

        let answers = join_all(
            bodies
                .iter()
                .map(|body| ack_batch(&b, None, messages(body))),
        )
        .await;
        for r in &answers {
            assert_eq!(r[0]["success"], true, "{r}");
            assert_eq!(r[0]["leaseReleased"], true, "{r}");
        }
        // the same acks again, together: idempotent successes that move nothing
        let again = join_all(
            bodies
                .iter()
                .map(|body| ack_batch(&b, None, messages(body))),
        )
        .await;
        for r in &again {
            assert_eq!(r[0]["success"], true, "{r}");
            assert_eq!(r[0]["leaseReleased"], false, "{r}");
        }
        for (p, m) in &by_partition {
            let pid: uuid::Uuid = m["partitionId"].as_str().unwrap().parse().unwrap();
            assert_eq!(
                cursor(&client, pid, GROUP).await,
                Some((round + 1, false)),
                "{p}"
            );
            let counts = cursor_counts(&client, pid, GROUP).await;
            assert_eq!(counts, (round + 1, round + 1), "{p}: acked once per round");
        }
    }
    assert_eq!(seen.len(), 64);
    // every one of those pops and acks went through the flights
    assert!(members(&b, "pop").await >= pops_before + 64.0);
    assert!(members(&b, "ack").await >= acks_before + 64.0);
    pop_empty(&b, &path).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grouped_acks_answer_each_member_for_itself() {
    let (db, b) = setup().await;
    let queue = unique("cf2");
    fill(&b, &queue, 12, 4).await;
    first_contact(&b, &queue, 12, None).await;
    let client = db.client().await.expect("db client");
    let bodies = pop_together(&b, &pop_path(&queue, None, "batch=3"), 12).await;
    // members 0-3 whole leases in order, 4-7 with a foreign lease id, 8-11
    // the whole lease out of order: all sent together
    let requests: Vec<Vec<Value>> = bodies
        .iter()
        .enumerate()
        .map(|(i, body)| {
            let mut msgs = messages(body);
            assert_eq!(msgs.len(), 3, "{body}");
            match i / 4 {
                1 => msgs
                    .iter_mut()
                    .for_each(|m| m["leaseId"] = json!(uuid::Uuid::now_v7().to_string())),
                2 => msgs.swap(0, 2),
                _ => {}
            }
            msgs
        })
        .collect();
    let answers = join_all(
        requests
            .iter()
            .map(|msgs| ack_batch(&b, None, msgs.clone())),
    )
    .await;
    for (i, (r, msgs)) in answers.iter().zip(&requests).enumerate() {
        let pid: uuid::Uuid = msgs[0]["partitionId"].as_str().unwrap().parse().unwrap();
        let outcomes = r.as_array().unwrap();
        assert_eq!(outcomes.len(), 3, "{r}");
        match i / 4 {
            0 => {
                assert!(outcomes.iter().all(|o| o["success"] == true), "{r}");
                assert_eq!(outcomes[2]["leaseReleased"], true, "{r}");
                assert_eq!(cursor(&client, pid, GROUP).await, Some((4, false)));
            }
            1 => {
                assert!(outcomes.iter().all(|o| o["success"] == false), "{r}");
                assert_eq!(outcomes[0]["error"], "Invalid or expired lease", "{r}");
                assert_eq!(cursor(&client, pid, GROUP).await, Some((1, true)));
            }
            _ => {
                assert!(outcomes.iter().all(|o| o["success"] == true), "{r}");
                assert_eq!(cursor(&client, pid, GROUP).await, Some((4, false)));
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_popping_together_each_get_every_partition_once() {
    let (_db, b) = setup().await;
    let queue = unique("cf3");
    fill(&b, &queue, 8, 2).await;
    let groups = ["ga", "gb"];
    for g in groups {
        first_contact(&b, &queue, 8, Some(g)).await;
    }
    // 8 pops of each group at once: each group gets all 8 partitions once
    let pops = groups.iter().flat_map(|g| {
        let path = pop_path(&queue, None, &format!("consumerGroup={g}&batch=1"));
        (0..8).map(move |_| (g, path.clone()))
    });
    let bodies = join_all(pops.map(|(g, path)| {
        let b = &b;
        async move { (*g, pop_ok(b, &path).await) }
    }))
    .await;
    for g in groups {
        let got: BTreeSet<String> = bodies
            .iter()
            .filter(|(bg, _)| *bg == g)
            .flat_map(|(_, body)| txn_ids(body))
            .collect();
        let want: BTreeSet<String> = (0..8).map(|p| format!("p{p}-1")).collect();
        assert_eq!(got, want, "group {g}");
    }
    let answers = join_all(
        bodies
            .iter()
            .map(|(g, body)| ack_batch(&b, Some(g), messages(body))),
    )
    .await;
    for r in &answers {
        assert_eq!(r[0]["success"], true, "{r}");
        assert_eq!(r[0]["leaseReleased"], true, "{r}");
    }
    for g in groups {
        pop_empty(
            &b,
            &pop_path(&queue, None, &format!("consumerGroup={g}&batch=1")),
        )
        .await;
    }
}

async fn counter(b: &queen_testkit::TestBroker, name: &str) -> f64 {
    prometheus_value(b, name).await.unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_and_pops_waiting_together_share_one_statement() {
    let (db, b) = setup().await;
    let queue = unique("cf4");
    let rounds = 6;
    fill(&b, &queue, 32, rounds + 1).await;
    first_contact(&b, &queue, 32, None).await;
    let client = db.client().await.expect("db client");
    let path = pop_path(&queue, None, "batch=1");
    // 16 partitions leased; then their 16 acks and 16 more pops at once
    let mut held = pop_together(&b, &path, 16).await;
    let mut shared = false;
    let mut delivered = BTreeSet::new();
    for body in &held {
        assert!(delivered.insert(txn_ids(body)[0].clone()), "{body}");
    }
    for _ in 0..rounds {
        let statements = counter(&b, "queen_db_op_duration_seconds_count{op=\"consume\"}").await;
        let pop_flights = counter(&b, "queen_consume_flights_total{op=\"pop\"}").await;
        let ack_flights = counter(&b, "queen_consume_flights_total{op=\"ack\"}").await;
        let acks = join_all(held.iter().map(|body| ack_batch(&b, None, messages(body))));
        let pops = join_all((0..16).map(|_| pop_ok(&b, &path)));
        let (answers, bodies) = futures_util::join!(acks, pops);
        for (r, body) in answers.iter().zip(&held) {
            assert_eq!(r[0]["success"], true, "{r}");
            assert_eq!(r[0]["leaseReleased"], true, "{r}");
            let pid: uuid::Uuid = messages(body)[0]["partitionId"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap();
            let offset = cursor(&client, pid, GROUP).await.expect("cursor").0;
            assert!(offset >= 2, "acked cursor moved: {body}");
        }
        // every pop got one message no other pop got, one partition each
        let mut partitions = BTreeSet::new();
        for body in &bodies {
            let msgs = messages(body);
            assert_eq!(msgs.len(), 1, "{body}");
            assert!(
                partitions.insert(msgs[0]["partition"].to_string()),
                "{bodies:?}"
            );
            assert!(delivered.insert(txn_ids(body)[0].clone()), "twice: {body}");
        }
        let statements =
            counter(&b, "queen_db_op_duration_seconds_count{op=\"consume\"}").await - statements;
        let flights = counter(&b, "queen_consume_flights_total{op=\"pop\"}").await - pop_flights
            + counter(&b, "queen_consume_flights_total{op=\"ack\"}").await
            - ack_flights;
        // a statement that carried pops and acks counts under both
        shared |= statements > 0.0 && statements < flights;
        held = bodies;
    }
    assert!(shared, "no statement carried both pops and acks");
    // nothing was lost or doubled: the rest drains exactly
    let acks = join_all(held.iter().map(|body| ack_batch(&b, None, messages(body)))).await;
    assert!(acks.iter().all(|r| r[0]["success"] == true), "{acks:?}");
    let rest = drain_group(&b, &queue, GROUP).await;
    for t in rest {
        assert!(delivered.insert(t.clone()), "twice: {t}");
    }
    assert_eq!(delivered.len(), 32 * rounds);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pop_flying_with_the_ack_that_frees_its_partition_gets_it_in_the_next_flight() {
    let (db, b) = setup().await;
    let (queue, other) = (unique("cf5"), unique("cf5o"));
    fill(&b, &queue, 1, 3).await;
    fill(&b, &other, 1, 3).await;
    for q in [&queue, &other] {
        first_contact(&b, q, 1, None).await;
    }
    let wildcard = pop_path(&queue, None, "batch=1");
    let held = pop_ok(&b, &pop_path(&queue, Some("p0"), "batch=1")).await;
    let held_other = pop_ok(&b, &pop_path(&other, Some("p0"), "batch=1")).await;

    // a flight in the air: the other queue's ack waits on a row lock held here
    let mut locker = db.client().await.expect("db client");
    let tx = locker.transaction().await.unwrap();
    let other_pid: uuid::Uuid = messages(&held_other)[0]["partitionId"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    tx.execute(
        "SELECT 1 FROM queen.log_consumers WHERE partition_id = $1 FOR UPDATE",
        &[&other_pid],
    )
    .await
    .unwrap();
    let blocked = ack_batch(&b, None, messages(&held_other));
    let rest = async {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        // the ack that frees p0 waits behind it (fewer than 8 waiting)
        let ack = ack_batch(&b, None, messages(&held));
        let pop = async {
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            // a wildcard pop takes no hints once per 500 ms (the database
            // walk's turn, queen.pop_queue, which finds p0 leased: 204); a
            // hinted one leaves at once (no flight of its queue in the air)
            // and takes the ack along
            for _ in 0..3 {
                let statement_pops = counter(&b, "queen_consume_statement_total{op=\"pop\"}").await;
                let function_pops =
                    counter(&b, "queen_db_op_duration_seconds_count{op=\"pop\"}").await;
                let (code, body) = b.get(&wildcard).await;
                if code == StatusCode::OK {
                    return (body, statement_pops, function_pops);
                }
            }
            panic!("three pops found nothing while the ack was in a flight");
        };
        let (r, (body, statement_pops, function_pops)) = futures_util::join!(ack, pop);
        assert_eq!(txn_ids(&body), vec!["p0-2".to_owned()], "{body}");
        assert_eq!(r[0]["leaseReleased"], true, "{r}");
        // by the statement, in a second flight, without queen.pop_queue
        assert_eq!(
            counter(&b, "queen_consume_statement_total{op=\"pop\"}").await,
            statement_pops + 1.0
        );
        assert_eq!(
            counter(&b, "queen_db_op_duration_seconds_count{op=\"pop\"}").await,
            function_pops
        );
        tx.rollback().await.unwrap();
    };
    let (r, ()) = futures_util::join!(blocked, rest);
    assert_eq!(r[0]["success"], true, "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_contacts_flying_together_each_get_a_new_partition_from_the_statement() {
    let (db, b) = setup().await;
    let queue = unique("cf6");
    // eight partitions nobody has popped yet
    fill(&b, &queue, 8, 3).await;
    let client = db.client().await.expect("db client");
    let p0 = partition_id(&client, &queue, "p0").await;
    // long polls: the pop whose turn it is to walk the queue in the database
    // (once per 500 ms) may find the others' partitions locked and waits
    let path = pop_path(&queue, None, "batch=3&wait=true&timeout=5000");
    let statement_pops = counter(&b, "queen_consume_statement_total{op=\"pop\"}").await;

    // a flight in the air: its first contact with p0 waits for a cursor row
    // another transaction is inserting
    let mut locker = db.client().await.expect("db client");
    let tx = locker.transaction().await.unwrap();
    tx.execute(
        "INSERT INTO queen.log_consumers (partition_id, consumer_group, committed_offset)
         VALUES ($1, $2, 0)",
        &[&p0, &GROUP],
    )
    .await
    .unwrap();
    let held = b.get(&path);
    let rest = async {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        // six pops of the same queue wait for it, then fly together
        let together = async {
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            join_all((0..6).map(|_| b.get(&path))).await
        };
        let rollback = async {
            tokio::time::sleep(std::time::Duration::from_millis(600)).await;
            tx.rollback().await.unwrap();
        };
        futures_util::join!(together, rollback).0
    };
    let ((code, first), bodies) = futures_util::join!(held, rest);
    assert_eq!(code, StatusCode::OK, "{first}");
    let mut partitions = BTreeSet::new();
    let mut delivered = 0;
    for (code, body) in std::iter::once((code, first)).chain(bodies) {
        assert_eq!(code, StatusCode::OK, "{body}");
        let msgs = messages(&body);
        assert_eq!(msgs.len(), 3, "{body}");
        assert!(
            partitions.insert(msgs[0]["partition"].to_string()),
            "twice: {body}"
        );
        delivered += msgs.len();
    }
    assert_eq!(delivered, 21);
    // the statement made their cursor rows (a pop may take the walk's turn)
    let by_statement =
        counter(&b, "queen_consume_statement_total{op=\"pop\"}").await - statement_pops;
    assert!(
        by_statement >= 6.0,
        "{by_statement} of 7 pops by the statement"
    );
}
