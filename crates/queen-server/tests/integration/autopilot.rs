//! Pop autopilot (`autopilot=true`, issue 32): the broker sizes the knobs a
//! pop left unset, keeps the pinned ones, says what it chose, and follows
//! `QUEEN_POP_AUTOPILOT`.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use queen_testkit::TestBroker;
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::*;

/// Pushes `per` messages `<partition>-<i>` into each of `partitions`.
async fn push_spread(b: &TestBroker, queue: &str, partitions: usize, per: usize) {
    for p in 0..partitions {
        push_numbered(b, queue, &format!("p{p:02}"), &format!("p{p:02}"), per).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_autopilot_pop_gets_a_broker_sized_batch_and_says_so() {
    let (_db, b) = setup().await;
    let queue = unique("ap");
    push_numbered(&b, &queue, "only", "m", 250).await;
    let body = pop_ok(
        &b,
        &pop_path(&queue, None, "autopilot=true&consumerGroup=g"),
    )
    .await;
    assert_eq!(
        messages(&body).len(),
        100,
        "the base batch, not the default 1"
    );
    assert_eq!(
        body["autopilot"],
        json!({"partitions": 1, "batch": 100, "waitMs": 100}),
        "{body}"
    );
    // the echo comes after every other key
    let text = serde_json::to_string(&body).unwrap();
    assert!(text.contains("\"messages\":["), "{text}");
    // a waiting pop gets no pacing advice: the client re-polls at once
    ack_all_completed(&b, &body, Some("g")).await;
    let body = pop_ok(
        &b,
        &pop_path(
            &queue,
            None,
            "autopilot=true&consumerGroup=g&wait=true&timeout=1000",
        ),
    )
    .await;
    assert_eq!(body["autopilot"], json!({"partitions": 1, "batch": 100}));
    // and without autopilot the broker's default batch (1) applies, no echo
    let body = pop_ok(&b, &pop_path(&queue, None, "consumerGroup=h")).await;
    assert_eq!(messages(&body).len(), 1);
    assert!(body.get("autopilot").is_none(), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinned_knobs_are_served_as_pinned() {
    let (_db, b) = setup().await;
    let queue = unique("pin");
    push_spread(&b, &queue, 8, 3).await;
    // batch pinned, width chosen: a cold lane sweeps one partition
    let body = pop_ok(
        &b,
        &pop_path(&queue, None, "autopilot=true&batch=2&consumerGroup=a"),
    )
    .await;
    assert_eq!(messages(&body).len(), 2);
    assert_eq!(body["autopilot"]["batch"], 2, "{body}");
    // width pinned to 1, batch chosen: one partition's 3 messages whatever the lane learns
    for _ in 0..3 {
        let body = pop_ok(
            &b,
            &pop_path(&queue, None, "autopilot=true&partitions=1&consumerGroup=b"),
        )
        .await;
        assert_eq!(body["partitionsClaimed"], 1, "{body}");
        assert_eq!(body["autopilot"]["partitions"], 1, "{body}");
        assert_eq!(body["autopilot"]["batch"], 100, "{body}");
        ack_all_completed(&b, &body, Some("b")).await;
    }
    // both pinned: what the client sends then has no autopilot; if one did, it keeps both
    let body = pop_ok(
        &b,
        &pop_path(
            &queue,
            None,
            "autopilot=true&batch=5&partitions=2&consumerGroup=c",
        ),
    )
    .await;
    assert!(messages(&body).len() <= 5, "{body}");
    assert_eq!(
        body["autopilot"],
        json!({"partitions": 2, "batch": 5, "waitMs": 100})
    );
    // a named partition is one partition
    let body = pop_ok(
        &b,
        &pop_path(&queue, Some("p03"), "autopilot=true&consumerGroup=d"),
    )
    .await;
    assert_eq!(txn_ids(&body), vec!["p03-0", "p03-1", "p03-2"]);
    assert_eq!(body["autopilot"]["partitions"], 1, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thin_partitions_widen_the_sweep_and_each_message_comes_once() {
    let (_db, b) = setup().await;
    let queue = unique("thin");
    push_spread(&b, &queue, 40, 1).await;
    let mut seen = Vec::new();
    let mut widest = 0;
    let mut pops = 0;
    while seen.len() < 40 && pops < 40 {
        pops += 1;
        let (status, body) = b
            .get(&pop_path(&queue, None, "autopilot=true&consumerGroup=g"))
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        if messages(&body).is_empty() {
            continue;
        }
        widest = widest.max(body["partitionsClaimed"].as_u64().unwrap());
        seen.extend(txn_ids(&body));
        ack_all_completed(&b, &body, Some("g")).await;
    }
    seen.sort();
    let unique_seen: HashSet<&String> = seen.iter().collect();
    assert_eq!(seen.len(), 40, "{seen:?}");
    assert_eq!(unique_seen.len(), 40);
    assert!(
        widest > 1,
        "a lane of one-message partitions was never widened"
    );
    assert!(pops < 20, "{pops} pops for 40 one-message partitions");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_consumers_over_sixteen_partitions_starve_none() {
    let (_db, b) = setup().await;
    let queue = unique("fair");
    push_spread(&b, &queue, 16, 40).await;
    let b = &b;
    let queue = &queue;
    let consumers = (0..4).map(|_| async move {
        let mut got: Vec<Value> = Vec::new();
        let started = Instant::now();
        let mut empty_in_a_row = 0;
        while empty_in_a_row < 5 && started.elapsed() < Duration::from_secs(60) {
            let (status, body) = b
                .get(&pop_path(queue, None, "autopilot=true&consumerGroup=w"))
                .await;
            assert_eq!(status, StatusCode::OK, "{body}");
            let msgs = messages(&body);
            if msgs.is_empty() {
                empty_in_a_row += 1;
                sleep_ms(50).await;
                continue;
            }
            empty_in_a_row = 0;
            ack_all_completed(b, &body, Some("w")).await;
            got.extend(msgs);
        }
        got
    });
    let all: Vec<Vec<Value>> = join_all(consumers).await;
    // every partition drained, each message once, in order within a partition
    let mut by_partition: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for m in all.iter().flatten() {
        by_partition
            .entry(m["partition"].as_str().unwrap().to_owned())
            .or_default()
            .push(m["data"]["n"].as_i64().unwrap());
    }
    assert_eq!(by_partition.len(), 16, "every partition served");
    for (p, mut ns) in by_partition {
        ns.sort_unstable();
        assert_eq!(ns, (0..40).collect::<Vec<i64>>(), "partition {p}");
    }
    assert!(
        all.iter().filter(|got| !got.is_empty()).count() >= 2,
        "the work was shared"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_autopilot_consumer_is_woken_by_a_push() {
    // re-checks every 10 s: only the wake can deliver sooner
    let (_db, b) = setup_with(&[
        ("POP_WAIT_INITIAL_INTERVAL_MS", "10000"),
        ("POP_WAIT_MAX_INTERVAL_MS", "10000"),
    ])
    .await;
    let queue = unique("wake");
    push_numbered(&b, &queue, "p", "old", 1).await;
    let body = pop_ok(
        &b,
        &pop_path(&queue, None, "autopilot=true&consumerGroup=g"),
    )
    .await;
    ack_all_completed(&b, &body, Some("g")).await;
    let path = pop_path(
        &queue,
        None,
        "autopilot=true&consumerGroup=g&wait=true&timeout=20000",
    );
    let parked = tokio::spawn({
        let url = b.url(&path);
        let http = b.http.clone();
        async move {
            let started = Instant::now();
            let r = http.get(url).send().await.unwrap();
            (
                r.status(),
                r.json::<Value>().await.unwrap(),
                started.elapsed(),
            )
        }
    });
    sleep_ms(500).await;
    push_numbered(&b, &queue, "p", "new", 1).await;
    let (status, body, took) = parked.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(txn_ids(&body), vec!["new-0"]);
    assert!(
        took < Duration::from_secs(8),
        "delivered by the 10 s re-check, not the wake: {took:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_autopilot_pop_answers_200_with_its_advice() {
    let (_db, b) = setup().await;
    let queue = unique("empty");
    push_numbered(&b, &queue, "p", "m", 1).await;
    let body = pop_ok(
        &b,
        &pop_path(&queue, None, "autopilot=true&consumerGroup=g"),
    )
    .await;
    ack_all_completed(&b, &body, Some("g")).await;
    let (status, body) = b
        .get(&pop_path(&queue, None, "autopilot=true&consumerGroup=g"))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        json!({"success": true, "messages": [],
               "autopilot": {"partitions": 1, "batch": 100, "waitMs": 100}})
    );
    // without autopilot an empty pop stays a bodiless 204
    pop_empty(&b, &pop_path(&queue, None, "consumerGroup=g")).await;
}

/// Pops once with autopilot on a broker in `mode`; returns the body and the
/// decisions counted for `mode`.
async fn pop_in_mode(mode: &str) -> (Value, Option<f64>) {
    let (_db, b) = setup_with(&[("QUEEN_POP_AUTOPILOT", mode)]).await;
    let queue = unique("mode");
    push_numbered(&b, &queue, "p", "m", 5).await;
    let body = pop_ok(
        &b,
        &pop_path(&queue, None, "autopilot=true&consumerGroup=g"),
    )
    .await;
    let counted = prometheus_value(
        &b,
        &format!("queen_pop_autopilot_decisions_total{{mode=\"{mode}\"}}"),
    )
    .await;
    (body, counted)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadow_decides_and_counts_but_serves_the_defaults() {
    let (body, counted) = pop_in_mode("shadow").await;
    assert_eq!(messages(&body).len(), 1, "the default batch is served");
    assert!(body.get("autopilot").is_none(), "{body}");
    assert_eq!(counted, Some(1.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn off_ignores_the_parameter() {
    let (body, counted) = pop_in_mode("off").await;
    assert_eq!(messages(&body).len(), 1);
    assert!(body.get("autopilot").is_none(), "{body}");
    assert_eq!(counted, None);
    let (body, counted) = pop_in_mode("on").await;
    assert_eq!(messages(&body).len(), 5);
    assert_eq!(counted, Some(1.0));
}

#[test]
fn an_unknown_mode_stops_the_broker_with_the_variable_named() {
    let out = queen_server()
        .arg("check-config")
        .env("QUEEN_POP_AUTOPILOT", "sometimes")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("QUEEN_POP_AUTOPILOT"), "{text}");
}
