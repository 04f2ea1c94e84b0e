//! Long polling: `wait=true&timeout=T` (§5.10).

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::*;

async fn parked_pop_gets_the_push(configure_first: bool) {
    let (_db, b) = setup().await;
    let queue = unique("lp");
    if configure_first {
        configure(&b, &queue, json!({})).await;
    }
    let b = Arc::new(b);
    let waiter = {
        let b = b.clone();
        let path = pop_path(&queue, None, "wait=true&timeout=5000&consumerGroup=lp-g");
        tokio::spawn(async move {
            let started = Instant::now();
            let (status, body) = b.get(&path).await;
            (status, body, started.elapsed())
        })
    };
    sleep_ms(300).await;
    let pushed = push_one(&b, &queue, "p", json!({ "hello": "world" }), "lp-1").await;
    let (status, body, elapsed) = waiter.await.expect("waiter");
    assert_eq!(status, StatusCode::OK, "{body}");
    let msgs = messages(&body);
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0]["id"], pushed["message_id"]);
    assert_eq!(msgs[0]["data"], json!({ "hello": "world" }));
    assert!(
        elapsed < Duration::from_millis(5000),
        "answered at the push, not at the timeout ({elapsed:?})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_pop_returns_a_message_pushed_while_it_waits() {
    parked_pop_gets_the_push(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pop_parked_on_an_unknown_queue_gets_its_first_push() {
    parked_pop_gets_the_push(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_pop_gets_a_partition_when_its_lease_is_released() {
    let (_db, b) = setup().await;
    let queue = unique("lp-release");
    push_numbered(&b, &queue, "Default", "rel", 2).await;
    let held = pop_ok(&b, &pop_path(&queue, None, "")).await;
    let b = Arc::new(b);
    let waiter = {
        let b = b.clone();
        let path = pop_path(&queue, None, "wait=true&timeout=5000");
        tokio::spawn(async move {
            let started = Instant::now();
            let (status, body) = b.get(&path).await;
            (status, body, started.elapsed())
        })
    };
    sleep_ms(300).await;
    let r = ack(&b, &messages(&held)[0], "completed", None).await;
    assert_eq!(r["leaseReleased"], true, "{r}");
    let (status, body, elapsed) = waiter.await.expect("waiter");
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(txn_ids(&body), vec!["rel-1"]);
    assert!(elapsed < Duration::from_millis(5000), "{elapsed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_pop_with_nothing_answers_204_after_the_timeout() {
    let (_db, b) = setup().await;
    let queue = unique("lp-empty");
    configure(&b, &queue, json!({})).await;
    let started = Instant::now();
    let (status, body) = b
        .get(&pop_path(&queue, None, "wait=true&timeout=1500"))
        .await;
    let elapsed = started.elapsed();
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    assert_eq!(body, Value::Null);
    assert!(
        elapsed >= Duration::from_millis(1400),
        "answered before the timeout ({elapsed:?})"
    );
    assert!(
        elapsed < Duration::from_millis(1500 + 5000),
        "clients give up at timeout + 5 s ({elapsed:?})"
    );

    // wait=false answers at once even with a timeout given
    let started = Instant::now();
    pop_empty(&b, &pop_path(&queue, None, "wait=false&timeout=5000")).await;
    assert!(started.elapsed() < Duration::from_millis(5000));
}

/// A client that gives up on a parked pop must not have a lease claimed for it:
/// the message pushed afterwards goes to the next consumer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_long_poll_claims_nothing() {
    let (_db, b) = setup().await;
    let queue = unique("lp-gone");
    configure(&b, &queue, json!({})).await;
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .expect("client");
    let url = b.url(&pop_path(&queue, None, "wait=true&timeout=5000"));
    let gave_up = impatient.get(url).send().await;
    assert!(gave_up.is_err(), "the client timed out: {gave_up:?}");
    drop(impatient);
    sleep_ms(300).await;

    push_one(&b, &queue, "Default", json!("for the next one"), "gone-1").await;
    sleep_ms(200).await;
    let body = pop_ok(&b, &pop_path(&queue, None, "")).await;
    assert_eq!(txn_ids(&body), vec!["gone-1"]);
}
