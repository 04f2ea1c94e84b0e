//! Consumer groups and subscription modes (http-api.md §5.1, §5.2).

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_group_gets_every_message() {
    let (db, b) = setup().await;
    let queue = unique("fanout");
    push_numbered(&b, &queue, "Default", "fo", 5).await;
    let want: Vec<String> = (0..5).map(|i| format!("fo-{i}")).collect();

    let a = pop_ok(
        &b,
        &pop_path(&queue, None, "consumerGroup=group-a&batch=10"),
    )
    .await;
    let bb = pop_ok(
        &b,
        &pop_path(&queue, None, "consumerGroup=group-b&batch=10"),
    )
    .await;
    let qm = pop_ok(&b, &pop_path(&queue, None, "batch=10")).await;
    assert_eq!(txn_ids(&a), want);
    assert_eq!(txn_ids(&bb), want);
    assert_eq!(txn_ids(&qm), want);
    assert_eq!(a["consumerGroup"], "group-a");
    assert!(messages(&a).iter().all(|m| m["consumerGroup"] == "group-a"));
    assert_eq!(qm["consumerGroup"], "__QUEUE_MODE__");
    // an empty consumerGroup is queue mode, whose lease is held now
    pop_empty(&b, &pop_path(&queue, None, "consumerGroup=")).await;

    // group-a finishes; group-b's cursor does not move
    ack_all_completed(&b, &a, Some("group-a")).await;
    let client = db.client().await.expect("db client");
    let pid = partition_id(&client, &queue, "Default").await;
    assert_eq!(cursor(&client, pid, "group-a").await, Some((5, false)));
    assert_eq!(cursor(&client, pid, "group-b").await, Some((0, true)));
    assert_eq!(
        cursor(&client, pid, "__QUEUE_MODE__").await,
        Some((0, true))
    );

    pop_empty(&b, &pop_path(&queue, None, "consumerGroup=group-a")).await;
    // a new group still starts from the oldest message
    let c = pop_ok(&b, &pop_path(&queue, None, "consumerGroup=group-c&batch=2")).await;
    assert_eq!(txn_ids(&c), vec!["fo-0", "fo-1"]);
}

/// 6 consumers of one group pop and ack concurrently over 10 partitions: every
/// message is delivered exactly once (leases never expire here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn competing_consumers_never_share_a_message() {
    let (_db, b) = setup().await;
    let queue = unique("compete");
    const PARTITIONS: usize = 10;
    const PER_PARTITION: usize = 10;
    const TOTAL: usize = PARTITIONS * PER_PARTITION;
    let items: Vec<Value> = (0..PARTITIONS)
        .flat_map(|p| {
            let queue = queue.clone();
            (0..PER_PARTITION).map(move |i| {
                json!({ "queue": queue, "partition": format!("part-{p}"), "payload": i,
                        "transactionId": format!("c-{p}-{i}") })
            })
        })
        .collect();
    push_items(&b, Value::Array(items)).await;

    let b = Arc::new(b);
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let acked = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for w in 0..6 {
        let (b, seen, acked, queue) = (b.clone(), seen.clone(), acked.clone(), queue.clone());
        workers.push(tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(12);
            let partitions = 1 + w % 3;
            while acked.load(Ordering::SeqCst) < TOTAL && tokio::time::Instant::now() < deadline {
                let path = pop_path(
                    &queue,
                    None,
                    &format!("consumerGroup=workers&batch=3&partitions={partitions}"),
                );
                let (status, body) = b.get(&path).await;
                if status == StatusCode::NO_CONTENT {
                    sleep_ms(10).await;
                    continue;
                }
                assert_eq!(status, StatusCode::OK, "{body}");
                let msgs = messages(&body);
                seen.lock().expect("lock").extend(
                    msgs.iter()
                        .map(|m| m["transactionId"].as_str().expect("t").to_owned()),
                );
                ack_all_completed(&b, &body, Some("workers")).await;
                acked.fetch_add(msgs.len(), Ordering::SeqCst);
            }
        }));
    }
    for w in workers {
        w.await.expect("worker");
    }
    let seen = seen.lock().expect("lock").clone();
    let distinct: HashSet<&String> = seen.iter().collect();
    assert_eq!(distinct.len(), seen.len(), "a message was delivered twice");
    assert_eq!(seen.len(), TOTAL, "every message delivered");
    pop_empty(
        &b,
        &pop_path(&queue, None, "consumerGroup=workers&partitions=10"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscription_mode_new_skips_existing_messages() {
    let (db, b) = setup().await;
    let queue = unique("sub-new");
    push_numbered(&b, &queue, "a", "old-a", 2).await;
    push_numbered(&b, &queue, "b", "old-b", 2).await;

    pop_empty(
        &b,
        &pop_path(
            &queue,
            None,
            "consumerGroup=fresh&subscriptionMode=new&partitions=5",
        ),
    )
    .await;
    // once stored, a later parameter does not bring the backlog back
    pop_empty(
        &b,
        &pop_path(
            &queue,
            None,
            "consumerGroup=fresh&subscriptionMode=all&partitions=5",
        ),
    )
    .await;
    pop_empty(&b, &pop_path(&queue, Some("b"), "consumerGroup=fresh")).await;

    sleep_ms(20).await;
    push_numbered(&b, &queue, "a", "new-a", 2).await;
    push_numbered(&b, &queue, "c", "new-c", 1).await; // a partition created later
    let mut got: Vec<String> = Vec::new();
    for _ in 0..2 {
        let body = pop_ok(
            &b,
            &pop_path(&queue, None, "consumerGroup=fresh&batch=10&autoAck=true"),
        )
        .await;
        got.extend(txn_ids(&body));
    }
    got.sort();
    assert_eq!(got, vec!["new-a-0", "new-a-1", "new-c-0"]);
    pop_empty(
        &b,
        &pop_path(&queue, None, "consumerGroup=fresh&partitions=5"),
    )
    .await;

    let client = db.client().await.expect("db client");
    assert_eq!(
        count(
            &client,
            "SELECT count(*) FROM queen.consumer_subscriptions WHERE consumer_group = 'fresh'"
        )
        .await,
        1,
        "one stored subscription"
    );

    // new-only is new
    push_numbered(&b, &queue, "d", "old-d", 1).await;
    pop_empty(
        &b,
        &pop_path(
            &queue,
            Some("d"),
            "consumerGroup=fresh2&subscriptionMode=new-only",
        ),
    )
    .await;

    // the default (no parameter) is all
    let mut all: Vec<String> = Vec::new();
    loop {
        let (status, body) = b
            .get(&pop_path(
                &queue,
                None,
                "consumerGroup=everything&batch=100&partitions=10&autoAck=true",
            ))
            .await;
        if status == StatusCode::NO_CONTENT {
            break;
        }
        all.extend(txn_ids(&body));
    }
    assert_eq!(all.len(), 8, "{all:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscription_from_a_timestamp_starts_there() {
    let (db, b) = setup().await;
    let client = db.client().await.expect("db client");
    let queue = unique("sub-from");
    push_numbered(&b, &queue, "Default", "before", 3).await;
    sleep_ms(20).await;
    let t: DateTime<Utc> = client
        .query_one("SELECT clock_timestamp()", &[])
        .await
        .expect("clock")
        .get(0);
    sleep_ms(20).await;
    push_numbered(&b, &queue, "Default", "after", 2).await;

    let from = t.to_rfc3339_opts(SecondsFormat::Micros, true);
    let body = pop_ok(
        &b,
        &pop_path(
            &queue,
            None,
            &format!("consumerGroup=from-t&batch=10&subscriptionFrom={from}"),
        ),
    )
    .await;
    assert_eq!(txn_ids(&body), vec!["after-0", "after-1"]);

    let stored: DateTime<Utc> = client
        .query_one(
            "SELECT subscription_timestamp FROM queen.consumer_subscriptions
             WHERE consumer_group = 'from-t' AND queue_name = $1 AND partition_name = ''",
            &[&queue],
        )
        .await
        .expect("stored subscription")
        .get(0);
    assert_eq!(stored, t);

    // subscriptionFrom wins over subscriptionMode
    let body = pop_ok(
        &b,
        &pop_path(
            &queue,
            Some("Default"),
            &format!("consumerGroup=from-t2&batch=10&subscriptionMode=new&subscriptionFrom={from}"),
        ),
    )
    .await;
    assert_eq!(txn_ids(&body), vec!["after-0", "after-1"]);

    // a date-only timestamp in the past starts from the oldest message
    let body = pop_ok(
        &b,
        &pop_path(
            &queue,
            None,
            "consumerGroup=from-2000&batch=10&subscriptionFrom=2000-01-31",
        ),
    )
    .await;
    assert_eq!(txn_ids(&body).len(), 5);

    // no parameter: everything
    let body = pop_ok(
        &b,
        &pop_path(&queue, None, "consumerGroup=all-of-it&batch=10"),
    )
    .await;
    assert_eq!(
        txn_ids(&body),
        vec!["before-0", "before-1", "before-2", "after-0", "after-1"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_subscription_mode_env_applies_without_parameter() {
    let (_db, b) = setup_with(&[("DEFAULT_SUBSCRIPTION_MODE", "new")]).await;
    let queue = unique("sub-env");
    push_numbered(&b, &queue, "Default", "old", 2).await;

    pop_empty(&b, &pop_path(&queue, None, "consumerGroup=g-env&batch=10")).await;
    // an explicit parameter still wins for a group's first contact
    let body = pop_ok(
        &b,
        &pop_path(
            &queue,
            None,
            "consumerGroup=g-all&subscriptionMode=all&batch=10",
        ),
    )
    .await;
    assert_eq!(txn_ids(&body), vec!["old-0", "old-1"]);
    // queue mode always starts from the oldest message
    let body = pop_ok(&b, &pop_path(&queue, None, "batch=10")).await;
    assert_eq!(txn_ids(&body), vec!["old-0", "old-1"]);

    sleep_ms(20).await;
    push_numbered(&b, &queue, "Default", "new", 1).await;
    let body = pop_ok(&b, &pop_path(&queue, None, "consumerGroup=g-env&batch=10")).await;
    assert_eq!(txn_ids(&body), vec!["new-0"]);
}
