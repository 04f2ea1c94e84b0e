//! A consumer and a producer on three replicas while one of them is stopped.

use std::time::Duration;

use queen_client::{Client, PushItem, QueueOptions};
use queen_testkit::{TestCluster, TestDb};

use crate::common::*;

/// Messages pushed in the test; the replica stops once a third are consumed.
const TOTAL: u64 = 600;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_carries_on_through_another_replica_without_loss_or_doubles() {
    let db = TestDb::new().await.unwrap();
    let mut cluster = TestCluster::start(3, &db, &[]).await.unwrap();
    let urls: Vec<String> = (0..3).map(|i| cluster.node(i).url("")).collect();
    let c = Client::builder()
        .urls(urls)
        .retry(quick_retries())
        .build()
        .unwrap();
    let q = unique("ha");
    // a lease lost with a broken answer comes back soon instead of in 5 minutes
    c.queue(&q)
        .configure(&QueueOptions {
            lease_time: 3,
            ..Default::default()
        })
        .await
        .unwrap();

    let seen = Seen::default();
    let consumer = {
        let seen = seen.clone();
        let c = c.clone();
        let q = q.clone();
        tokio::spawn(async move {
            c.queue(&q)
                .group("workers")
                .concurrency(2)
                .batch(5)
                .partitions(4)
                .limit(TOTAL)
                .timeout(Duration::from_millis(500))
                .renew_lease(Some(Duration::from_secs(1)))
                .consume(move |m| {
                    seen.record(&m);
                    async {
                        tokio::time::sleep(Duration::from_millis(2)).await;
                        Ok::<_, String>(())
                    }
                })
                .await
        })
    };
    let producer = {
        let c = c.clone();
        let q = q.clone();
        tokio::spawn(async move {
            for chunk in 0..TOTAL / 10 {
                let items = (chunk * 10..chunk * 10 + 10)
                    .map(|i| PushItem::new(&i).unwrap().partition(format!("p{}", i % 8)))
                    .collect();
                let results = c
                    .queue(&q)
                    .push_items(items)
                    .await
                    .expect("push during failover");
                assert!(results.iter().all(|r| r.is_accepted()), "{results:?}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };

    // stop a replica while both are running
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while (seen.len() as u64) < TOTAL / 3 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "consumer stalled before the stop"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cluster.stop(1).await;

    producer.await.unwrap();
    let stats = tokio::time::timeout(Duration::from_secs(90), consumer)
        .await
        .expect("consumer finished after the failover")
        .unwrap()
        .unwrap();
    assert_eq!(stats.processed, TOTAL, "{stats:?}");
    seen.assert_each_once(TOTAL);
    // and the broker holds exactly what was pushed
    let survivor = Client::new(cluster.node(0).url("")).unwrap();
    assert_eq!(stored(&survivor, &q).await, TOTAL);
}
