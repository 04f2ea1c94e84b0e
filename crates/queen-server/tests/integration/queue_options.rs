//! Queue options that do what they say (issue 38): `ttl`.

use serde_json::json;

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_past_its_ttl_is_never_delivered_and_what_follows_is() {
    let (db, b) = setup().await;
    let queue = unique("ttl");
    configure(&b, &queue, json!({ "ttl": 1 })).await;
    push_numbered(&b, &queue, "p", "old", 3).await;
    sleep_ms(1300).await;
    push_numbered(&b, &queue, "p", "new", 2).await;
    // each group passes over the expired prefix on its own, in order
    for group in ["g", "h"] {
        let path = pop_path(&queue, None, &format!("consumerGroup={group}&batch=10"));
        let body = pop_ok(&b, &path).await;
        assert_eq!(txn_ids(&body), vec!["new-0", "new-1"], "{group}");
        ack_all_completed(&b, &body, Some(group)).await;
    }
    // queue mode too, on the partition route
    let body = pop_ok(&b, &pop_path(&queue, Some("p"), "batch=10")).await;
    assert_eq!(txn_ids(&body), vec!["new-0", "new-1"]);

    let (_, res) = b.get(&format!("/api/v1/resources/queues/{queue}")).await;
    assert_eq!(res["totals"]["expired"], 3, "{res}");
    assert_eq!(res["totals"]["deadLetter"], 0, "{res}");
    let client = db.client().await.unwrap();
    assert_eq!(
        count(&client, "SELECT count(*) FROM queen.dead_letters").await,
        0
    );
    assert_eq!(
        prometheus_value(&b, &format!("queen_messages_expired{{queue=\"{queue}\"}}")).await,
        Some(3.0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_messages_go_to_the_dead_letter_queue_when_it_is_on() {
    let (db, b) = setup().await;
    let queue = unique("ttl-dlq");
    configure(&b, &queue, json!({ "ttl": 1, "deadLetterQueue": true })).await;
    push_numbered(&b, &queue, "p", "old", 2).await;
    sleep_ms(1300).await;
    pop_empty(&b, &pop_path(&queue, None, "consumerGroup=g&batch=10")).await;
    let client = db.client().await.unwrap();
    let filed: Vec<String> = texts(
        &client,
        "SELECT transaction_id || ' ' || error_message FROM queen.dead_letters
         WHERE consumer_group = 'g' ORDER BY msg_offset",
    )
    .await;
    assert_eq!(
        filed,
        vec![
            "old-0 Expired: older than the queue's ttl of 1 s",
            "old-1 Expired: older than the queue's ttl of 1 s"
        ]
    );
    let (_, res) = b.get(&format!("/api/v1/resources/queues/{queue}")).await;
    assert_eq!(res["totals"]["deadLetter"], 2, "{res}");
    assert_eq!(
        res["totals"]["expired"], 0,
        "counted once, as dead letters: {res}"
    );
    assert_eq!(res["totals"]["pending"], 0, "{res}");
    assert_eq!(res["totals"]["completed"], 0, "{res}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_young_message_is_delivered_and_the_defaults_enforce_nothing() {
    let (_db, b) = setup().await;
    let queue = unique("ttl-young");
    configure(&b, &queue, json!({ "ttl": 60 })).await;
    push_numbered(&b, &queue, "p", "m", 2).await;
    let body = pop_ok(&b, &pop_path(&queue, None, "consumerGroup=g&batch=10")).await;
    assert_eq!(txn_ids(&body), vec!["m-0", "m-1"]);
    // a queue made by a push has ttl 0 and retryDelay 0: nothing expires
    let other = unique("ttl-default");
    push_numbered(&b, &other, "p", "d", 1).await;
    let (_, res) = b
        .post("/api/v1/configure", &json!({ "queue": other }))
        .await;
    assert_eq!(res["options"]["ttl"], 0, "{res}");
    assert_eq!(res["options"]["retryDelay"], 0, "{res}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_pop_serves_higher_priority_first_and_starves_none() {
    let (_db, b) = setup().await;
    let ns = unique("prio").replace('-', "");
    let (high, low) = (format!("{ns}.high"), format!("{ns}.low"));
    for (queue, priority) in [(&high, 9), (&low, 0)] {
        let (status, body) = b
            .post(
                "/api/v1/configure",
                &json!({ "queue": queue, "namespace": ns, "options": { "priority": priority } }),
            )
            .await;
        assert_eq!(status, reqwest::StatusCode::OK, "{body}");
    }
    push_numbered(&b, &high, "p", "h", 40).await;
    push_numbered(&b, &low, "p", "l", 40).await;
    let mut served = Vec::new();
    for _ in 0..16 {
        let body = pop_ok(
            &b,
            &format!("/api/v1/pop?namespace={ns}&batch=1&autoAck=true"),
        )
        .await;
        served.push(messages(&body)[0]["queue"].as_str().unwrap().to_owned());
    }
    let from_high = served.iter().filter(|q| **q == high).count();
    assert!(from_high >= 12, "{served:?}");
    assert!(
        served.contains(&low),
        "the low-priority queue was starved: {served:?}"
    );
}
