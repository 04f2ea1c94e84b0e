//! `consume`: concurrency, ack by outcome, lease renewal, stopping.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use queen_client::{CancellationToken, PushItem, QueueOptions};
use serde_json::json;

use crate::common::*;

async fn push_numbers(c: &queen_client::Client, q: &str, n: u64, partitions: u64) {
    let items = (0..n)
        .map(|i| {
            PushItem::new(&i)
                .unwrap()
                .partition(format!("p{}", i % partitions))
        })
        .collect();
    let results = c.queue(q).push_items(items).await.unwrap();
    assert!(results.iter().all(|r| r.is_accepted()));
}

#[tokio::test]
async fn workers_share_the_queue_and_see_each_message_once() {
    let (_db, b) = setup().await;
    let c = client(&b);
    let q = unique("consume");
    push_numbers(&c, &q, 60, 6).await;
    let seen = Seen::default();
    let stats = {
        let seen = seen.clone();
        c.queue(&q)
            .concurrency(3)
            .batch(4)
            .limit(60)
            .timeout(Duration::from_secs(2))
            .consume(move |m| {
                seen.record(&m);
                async { Ok::<_, String>(()) }
            })
            .await
            .unwrap()
    };
    assert_eq!(stats.processed, 60, "{stats:?}");
    assert_eq!(stats.ack_errors, 0);
    seen.assert_each_once(60);
    assert!(drained(&c, &q, None).await);
}

#[tokio::test]
async fn a_failing_handler_nacks_and_the_message_comes_back() {
    let (_db, b) = setup().await;
    let c = client(&b);
    let q = unique("nack");
    c.queue(&q)
        .configure(&QueueOptions {
            retry_limit: 5,
            ..Default::default()
        })
        .await
        .unwrap();
    c.queue(&q).push(&"flaky").await.unwrap();
    let attempts = Arc::new(Mutex::new(0u32));
    let stats = {
        let attempts = attempts.clone();
        c.queue(&q)
            .group("g")
            .limit(2)
            .timeout(Duration::from_secs(2))
            .consume(move |_m| {
                let attempts = attempts.clone();
                async move {
                    let mut a = attempts.lock().unwrap();
                    *a += 1;
                    if *a == 1 {
                        Err("first try fails".to_owned())
                    } else {
                        Ok(())
                    }
                }
            })
            .await
            .unwrap()
    };
    assert_eq!((stats.processed, stats.failed), (2, 1), "{stats:?}");
    assert_eq!(*attempts.lock().unwrap(), 2);
    assert!(drained(&c, &q, Some("g")).await);
    assert_eq!(c.queue(&q).group("g").dlq().get().await.unwrap().total, 0);
}

#[tokio::test]
async fn batches_are_acked_whole() {
    let (_db, b) = setup().await;
    let c = client(&b);
    let q = unique("batch");
    push_numbers(&c, &q, 30, 1).await;
    let sizes = Arc::new(Mutex::new(Vec::new()));
    let stats = {
        let sizes = sizes.clone();
        c.queue(&q)
            .batch(10)
            .limit(30)
            .timeout(Duration::from_secs(2))
            .consume_batch(move |batch| {
                let sizes = sizes.clone();
                async move {
                    sizes.lock().unwrap().push(batch.len());
                    Ok::<_, String>(())
                }
            })
            .await
            .unwrap()
    };
    assert_eq!(stats.processed, 30);
    assert_eq!(*sizes.lock().unwrap(), [10, 10, 10]);
    assert!(drained(&c, &q, None).await);
}

#[tokio::test]
async fn the_lease_is_renewed_while_the_handler_runs() {
    let (_db, b) = setup().await;
    let c = client(&b);
    let q = unique("renew");
    c.queue(&q)
        .configure(&QueueOptions {
            lease_time: 1,
            ..Default::default()
        })
        .await
        .unwrap();
    c.queue(&q).push(&json!("slow")).await.unwrap();
    let stolen = Arc::new(Mutex::new(Vec::new()));
    let stats = {
        let stolen = stolen.clone();
        let thief = c.clone();
        let q2 = q.clone();
        c.queue(&q)
            .limit(1)
            .renew_lease(Some(Duration::from_millis(300)))
            .timeout(Duration::from_secs(2))
            .consume(move |_m| {
                let stolen = stolen.clone();
                let thief = thief.clone();
                let q2 = q2.clone();
                async move {
                    // three lease times pass while another consumer keeps trying
                    for _ in 0..6 {
                        tokio::time::sleep(Duration::from_millis(500)).await;
                        let got = thief.queue(&q2).wait(false).pop().await.unwrap();
                        stolen.lock().unwrap().extend(got);
                    }
                    Ok::<_, String>(())
                }
            })
            .await
            .unwrap()
    };
    assert_eq!(stats.processed, 1);
    assert_eq!(stats.ack_errors, 0, "the ack found its lease");
    assert!(
        stolen.lock().unwrap().is_empty(),
        "redelivered during the handler"
    );
}

#[tokio::test]
async fn idle_timeout_and_the_stop_token_end_the_consumer() {
    let (_db, b) = setup().await;
    let c = client(&b);
    let q = unique("stop");
    let stats = c
        .queue(&q)
        .idle_timeout(Duration::from_millis(300))
        .timeout(Duration::from_millis(100))
        .consume(|_m| async { Ok::<_, String>(()) })
        .await
        .unwrap();
    assert_eq!(stats.processed, 0);

    let token = CancellationToken::new();
    let run = {
        let c = c.clone();
        let q = q.clone();
        let token = token.clone();
        tokio::spawn(async move {
            c.queue(&q)
                .until(token)
                .concurrency(2)
                .consume(|_m| async { Ok::<_, String>(()) })
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    token.cancel();
    let stats = tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .expect("stopped promptly")
        .unwrap()
        .unwrap();
    assert_eq!(stats.processed, 0);
}

#[tokio::test]
async fn a_refusal_stops_the_consumer_with_the_error() {
    let (_db, b) = setup_with(&[("JWT_ENABLED", "true"), ("JWT_SECRET", "s3cret")]).await;
    let c = client(&b);
    let err = c
        .queue(unique("denied"))
        .concurrency(2)
        .consume(|_m| async { Ok::<_, String>(()) })
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(401), "{err:?}");
}
