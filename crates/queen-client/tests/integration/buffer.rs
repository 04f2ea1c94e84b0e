//! Buffered pushes: flushed on size, on the timer, on request and on drop.

use std::time::Duration;

use queen_client::BufferOptions;

use crate::common::*;

fn options(max_messages: usize, max_delay_ms: u64) -> BufferOptions {
    BufferOptions {
        max_messages,
        max_delay: Duration::from_millis(max_delay_ms),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_full_buffer_is_sent_at_once() {
    let (_db, b) = setup().await;
    let c = client(&b);
    let q = unique("buf-size");
    // a delay far beyond the test: only the size can send it
    let producer = c.queue(&q).buffer(options(10, 600_000));
    for n in 0..25 {
        producer.push(&n).await.unwrap();
    }
    let mut waited = 0;
    while producer.stats().stored < 20 && waited < 100 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited += 1;
    }
    let stats = producer.stats();
    assert_eq!(stats.stored, 20, "{stats:?}");
    assert_eq!(stats.batches, 2);
    assert_eq!(stored(&c, &q).await, 20);
    producer.flush().await;
    assert_eq!(producer.stats().stored, 25);
    let stats = producer.close().await;
    assert_eq!((stats.stored, stats.failed, stats.batches), (25, 0, 3));
}

#[tokio::test]
async fn the_timer_sends_a_partial_batch() {
    let (_db, b) = setup().await;
    let c = client(&b);
    let q = unique("buf-time");
    let producer = c.queue(&q).partition("p").buffer(options(1000, 100));
    for n in 0..3 {
        producer.push(&n).await.unwrap();
    }
    let mut waited = 0;
    while producer.stats().stored < 3 && waited < 100 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited += 1;
    }
    assert_eq!(producer.stats().stored, 3);
    let got = drain(&c, &q).await;
    let values: Vec<i64> = got.iter().map(|m| m.data.as_i64().unwrap()).collect();
    assert_eq!(values, [0, 1, 2]);
    assert!(got.iter().all(|m| m.partition == "p"));
}

#[tokio::test]
async fn dropping_the_producer_sends_what_it_held() {
    let (_db, b) = setup().await;
    let c = client(&b);
    let q = unique("buf-drop");
    let producer = c.queue(&q).buffer(options(1000, 600_000));
    for n in 0..42 {
        producer.push(&n).await.unwrap();
    }
    assert_eq!(producer.stats().stored, 0);
    drop(producer);
    c.wait_for_buffers().await;
    assert_eq!(stored(&c, &q).await, 42);
    // the client is usable for new producers afterwards
    let again = c.queue(&q).buffer(options(1000, 600_000));
    again.push(&"one more").await.unwrap();
    drop(again);
    c.wait_for_buffers().await;
    assert_eq!(stored(&c, &q).await, 43);
}

#[tokio::test]
async fn a_batch_that_cannot_be_sent_is_counted_as_failed() {
    let port = queen_testkit::free_port().unwrap();
    let c = queen_client::Client::builder()
        .url(format!("http://127.0.0.1:{port}"))
        .retry(quick_retries())
        .build()
        .unwrap();
    let producer = c.queue("nowhere").buffer(BufferOptions {
        flush_attempts: 2,
        retry_delay: Duration::from_millis(10),
        ..options(5, 600_000)
    });
    for n in 0..5 {
        producer.push(&n).await.unwrap();
    }
    let stats = producer.close().await;
    assert_eq!(stats.failed, 5, "{stats:?}");
    assert_eq!(stats.batches, 2);
    assert!(stats.last_error.unwrap().contains("cannot connect"));
}
