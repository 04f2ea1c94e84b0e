//! Retries: a broker answering 503, an answer lost after the broker applied
//! the request, a URL with nothing behind it. Nothing is stored twice.

use queen_client::{Client, Error, PushStatus};
use serde_json::json;

use crate::common::*;

fn client_of(urls: &[String]) -> Client {
    Client::builder()
        .urls(urls.iter().cloned())
        .retry(quick_retries())
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_push_answered_503_is_retried_and_stored_once() {
    let (_db, b) = setup().await;
    let front = Front::start(b.url(""), |n, _| {
        if n < 2 {
            Act::Unavailable
        } else {
            Act::Forward
        }
    })
    .await;
    let c = client_of(&[front.url()]);
    let q = unique("r503");
    let r = c.queue(&q).push(&json!({"n": 1})).await.unwrap();
    assert!(matches!(r.status, PushStatus::Queued { .. }), "{r:?}");
    assert_eq!(front.requests.load(std::sync::atomic::Ordering::SeqCst), 3);
    assert_eq!(stored(&client(&b), &q).await, 1);
}

#[tokio::test]
async fn a_push_whose_answer_is_lost_is_retried_as_a_duplicate() {
    let (_db, b) = setup().await;
    // the first push reaches the broker, but its answer never comes back
    let front = Front::start(b.url(""), |n, _| {
        if n == 0 {
            Act::LoseAnswer
        } else {
            Act::Forward
        }
    })
    .await;
    let c = client_of(&[front.url()]);
    let q = unique("lost");
    let r = c.queue(&q).push(&json!({"n": 1})).await.unwrap();
    assert!(matches!(r.status, PushStatus::Duplicate { .. }), "{r:?}");
    assert_eq!(stored(&client(&b), &q).await, 1);
    let popped = drain(&client(&b), &q).await;
    assert_eq!(popped.len(), 1);
    assert_eq!(popped[0].transaction_id, r.transaction_id);
}

#[tokio::test]
async fn a_transaction_whose_answer_is_lost_is_not_sent_again() {
    let (_db, b) = setup().await;
    let front = Front::start(b.url(""), |_, path| {
        if path.starts_with("/api/v1/transaction") {
            Act::LoseAnswer
        } else {
            Act::Forward
        }
    })
    .await;
    let c = client_of(&[front.url()]);
    let q = unique("txlost");
    let err = c
        .transaction()
        .push(&q, "p", &"once")
        .unwrap()
        .commit()
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Transport { .. } | Error::Timeout { .. }),
        "{err:?}"
    );
    assert_eq!(front.requests.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(stored(&client(&b), &q).await, 1);

    // refused before it reached the broker: retried
    let front = Front::start(b.url(""), |n, _| {
        if n == 0 {
            Act::Unavailable
        } else {
            Act::Forward
        }
    })
    .await;
    let c = client_of(&[front.url()]);
    let r = c
        .transaction()
        .push(&q, "p", &"twice asked, once stored")
        .unwrap()
        .commit()
        .await
        .unwrap();
    assert!(r.success);
    assert_eq!(stored(&client(&b), &q).await, 2);
}

#[tokio::test]
async fn a_dead_url_is_skipped_for_a_live_one() {
    let (_db, b) = setup().await;
    let dead = format!("http://127.0.0.1:{}", queen_testkit::free_port().unwrap());
    let c = client_of(&[dead, b.url("")]);
    let q = unique("skip");
    for n in 0..10 {
        let r = c.queue(&q).push(&n).await.unwrap();
        assert!(matches!(r.status, PushStatus::Queued { .. }), "{r:?}");
    }
    assert_eq!(stored(&c, &q).await, 10);
}

#[tokio::test]
async fn retries_are_bounded() {
    let (_db, b) = setup().await;
    let front = Front::start(b.url(""), |_, _| Act::Unavailable).await;
    let c = client_of(&[front.url()]);
    let err = c.queue(unique("never")).push(&1).await.unwrap_err();
    assert_eq!(err.status(), Some(503), "{err:?}");
    assert!(err.is_retryable());
    assert_eq!(
        front.requests.load(std::sync::atomic::Ordering::SeqCst),
        quick_retries().attempts as usize
    );
}
