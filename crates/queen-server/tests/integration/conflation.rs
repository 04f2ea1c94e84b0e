//! Last-value consumer groups (`conflation=true`, issue 32): a pop delivers
//! the newest visible message of a partition, its ack commits everything
//! behind it, the group's first pop stores the policy and the stored value
//! wins, every answer says so, and depth and the listings report it.

use std::time::Duration;

use queen_testkit::{TestBroker, TestCluster, TestDb};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::*;

const CONFLATE: &str = "conflation=true&consumerGroup=c&batch=10";

/// Pushes `<partition>-0 … -(n-1)` (payload `{"n": i}`) into each partition.
async fn backlog(b: &TestBroker, queue: &str, partitions: &[&str], n: usize) {
    for p in partitions {
        push_numbered(b, queue, p, p, n).await;
    }
}

fn sorted_txns(body: &Value) -> Vec<String> {
    let mut t = txn_ids(body);
    t.sort();
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflating_pop_delivers_the_newest_and_its_ack_commits_the_rest() {
    let (_db, b) = setup().await;
    let queue = unique("lv");
    backlog(&b, &queue, &["a", "b", "c"], 5).await;

    let body = pop_ok(&b, &pop_path(&queue, None, CONFLATE)).await;
    assert_eq!(body["conflation"], true, "{body}");
    assert_eq!(sorted_txns(&body), vec!["a-4", "b-4", "c-4"]);
    assert_eq!(body["partitionsClaimed"], 3);
    assert!(body.get("conflationConflict").is_none(), "{body}");
    // the leases cover the whole backlog: nothing else is handed out meanwhile
    let (status, empty) = b.get(&pop_path(&queue, None, CONFLATE)).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "an empty conflating pop has a body: {empty}"
    );
    assert_eq!(
        empty,
        json!({"success": true, "messages": [], "conflation": true})
    );
    ack_all_completed(&b, &body, Some("c")).await;

    // nothing older comes afterwards; a new message is the newest again
    let (status, empty) = b.get(&pop_path(&queue, None, CONFLATE)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(messages(&empty).len(), 0, "{empty}");
    push_numbered(&b, &queue, "b", "b-late", 2).await;
    let body = pop_ok(&b, &pop_path(&queue, None, CONFLATE)).await;
    assert_eq!(txn_ids(&body), vec!["b-late-1"]);
    ack_all_completed(&b, &body, Some("c")).await;

    // positions retired without a delivery: 4 + 4 + 4, then 1
    assert_eq!(
        prometheus_value(&b, &format!("queen_conflated_total{{queue=\"{queue}\"}}")).await,
        Some(13.0)
    );

    // another group on the same queue sees everything
    let all = drain_group(&b, &queue, "everyone").await;
    assert_eq!(all.len(), 17, "{all:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stored_policy_wins_and_a_conflict_is_said() {
    let (db, b) = setup().await;
    let queue = unique("pol");
    backlog(&b, &queue, &["p"], 3).await;

    // g is registered by a plain pop: asking for conflation later is a conflict
    let body = pop_ok(&b, &pop_path(&queue, None, "consumerGroup=g")).await;
    assert_eq!(txn_ids(&body), vec!["p-0"]);
    assert!(body.get("conflation").is_none(), "{body}");
    ack_all_completed(&b, &body, Some("g")).await;
    let body = pop_ok(
        &b,
        &pop_path(&queue, None, "conflation=true&consumerGroup=g&batch=10"),
    )
    .await;
    assert_eq!(body["conflationConflict"], true, "{body}");
    assert!(body.get("conflation").is_none(), "{body}");
    assert_eq!(txn_ids(&body), vec!["p-1", "p-2"], "served as the group is");

    // c is registered conflating: a later pop without the flag still conflates
    let body = pop_ok(&b, &pop_path(&queue, None, CONFLATE)).await;
    assert_eq!(txn_ids(&body), vec!["p-2"]);
    let lease_back = ack(&b, &messages(&body)[0], "failed", None).await;
    assert_eq!(lease_back["success"], true, "{lease_back}");
    push_numbered(&b, &queue, "p", "q", 1).await;
    let body = pop_ok(&b, &pop_path(&queue, None, "consumerGroup=c&batch=10")).await;
    assert_eq!(body["conflation"], true, "{body}");
    assert_eq!(
        txn_ids(&body),
        vec!["q-0"],
        "after a failure, the newest again"
    );

    let client = db.client().await.unwrap();
    let stored: Vec<String> = texts(
        &client,
        &format!(
            "SELECT consumer_group || '=' || conflation FROM queen.group_policies
             WHERE queue_name = '{queue}' ORDER BY 1"
        ),
    )
    .await;
    assert_eq!(stored, vec!["c=true", "g=false"]);

    // deleting the group forgets its policy: the next pop registers it anew
    let (status, _) = b
        .delete(&format!("/api/v1/consumer-groups/c/queues/{queue}"))
        .await;
    assert_eq!(status, StatusCode::OK);
    let body = pop_ok(&b, &pop_path(&queue, None, "consumerGroup=c&batch=10")).await;
    assert!(body.get("conflation").is_none(), "{body}");
    assert_eq!(messages(&body).len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_come_first_and_store_nothing() {
    let (db, b) = setup().await;
    let queue = unique("refuse");
    backlog(&b, &queue, &["p"], 2).await;
    for (query, names) in [
        ("conflation=true&batch=5", "consumerGroup"),
        ("conflation=true&consumerGroup=c&autoAck=true", "autoAck"),
        (
            "conflation=true&consumerGroup=c&commitOnDelivery=true",
            "commitOnDelivery",
        ),
    ] {
        for partition in [None, Some("p")] {
            let (status, body) = b.get(&pop_path(&queue, partition, query)).await;
            let error = assert_error(status, &body, StatusCode::BAD_REQUEST);
            assert!(error.contains(names), "{query}: {error}");
            assert!(error.contains("conflation"), "{query}: {error}");
            assert_eq!(body["success"], false);
            assert_eq!(body["messages"], json!([]));
        }
    }
    let (status, body) = b
        .get("/api/v1/pop?namespace=x&conflation=true&autoAck=true&consumerGroup=c")
        .await;
    assert_error(status, &body, StatusCode::BAD_REQUEST);
    let client = db.client().await.unwrap();
    assert_eq!(
        count(&client, "SELECT count(*) FROM queen.group_policies").await,
        0
    );
    assert_eq!(
        count(&client, "SELECT count(*) FROM queen.log_consumers").await,
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn depth_and_listings_report_the_policy() {
    let (_db, b) = setup().await;
    let queue = unique("depth");
    backlog(&b, &queue, &["a", "b"], 3).await;
    pop_ok(
        &b,
        &pop_path(&queue, Some("a"), "conflation=true&consumerGroup=c"),
    )
    .await;
    pop_ok(&b, &pop_path(&queue, Some("a"), "consumerGroup=g")).await;

    let (status, d) = b
        .get(&format!("/api/v1/resources/queues/{queue}/depth?group=c"))
        .await;
    assert_eq!(status, StatusCode::OK, "{d}");
    assert_eq!(d["conflation"], true, "{d}");
    assert_eq!(d["pending"], 6, "{d}");
    assert_eq!(d["partitionsPending"], 2, "{d}");
    assert_eq!(d["effectivePending"], 2, "{d}");
    let (_, d) = b
        .get(&format!("/api/v1/resources/queues/{queue}/depth?group=g"))
        .await;
    assert_eq!(d["conflation"], false, "{d}");
    assert_eq!(d["effectivePending"], 6, "{d}");
    let (_, d) = b
        .get(&format!("/api/v1/resources/queues/{queue}/depth"))
        .await;
    assert_eq!(d["conflation"], false, "never without a group: {d}");

    let (_, list) = b.get("/api/v1/consumer-groups").await;
    let policy = |group: &str| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == group && e["queueName"] == queue.as_str())
            .unwrap_or_else(|| panic!("{group} not listed: {list}"))["conflation"]
            .clone()
    };
    assert_eq!(policy("c"), true);
    assert_eq!(policy("g"), false);
    let (_, detail) = b.get("/api/v1/consumer-groups/c").await;
    assert_eq!(detail[queue.as_str()]["conflation"], true, "{detail}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_delay_hides_the_newest_until_it_is_due() {
    let (_db, b) = setup().await;
    let queue = unique("delay");
    configure(&b, &queue, json!({ "delayedProcessing": 1 })).await;
    push_numbered(&b, &queue, "p", "old", 3).await;
    sleep_ms(1300).await;
    push_numbered(&b, &queue, "p", "new", 2).await;
    let body = pop_ok(&b, &pop_path(&queue, None, CONFLATE)).await;
    assert_eq!(txn_ids(&body), vec!["old-2"], "the newest visible one");
    ack_all_completed(&b, &body, Some("c")).await;
    sleep_ms(1300).await;
    let body = pop_ok(&b, &pop_path(&queue, None, CONFLATE)).await;
    assert_eq!(txn_ids(&body), vec!["new-1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_run_out_into_the_dead_letter_queue_with_the_tail() {
    let (db, b) = setup().await;
    let queue = unique("dlq");
    configure(
        &b,
        &queue,
        json!({ "retryLimit": 1, "deadLetterQueue": true }),
    )
    .await;
    push_numbered(&b, &queue, "p", "m", 4).await;
    for attempt in 0..2 {
        let body = pop_ok(&b, &pop_path(&queue, None, CONFLATE)).await;
        assert_eq!(txn_ids(&body), vec!["m-3"], "attempt {attempt}");
        ack(&b, &messages(&body)[0], "failed", Some("boom")).await;
    }
    let client = db.client().await.unwrap();
    let filed: Vec<String> = texts(
        &client,
        "SELECT transaction_id FROM queen.dead_letters WHERE consumer_group = 'c'",
    )
    .await;
    assert_eq!(filed, vec!["m-3"]);
    let (status, body) = b.get(&pop_path(&queue, None, CONFLATE)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        messages(&body).len(),
        0,
        "the cursor jumped to the tail: {body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_brokers_serve_one_conflating_group() {
    let db = TestDb::new().await.unwrap();
    let c = TestCluster::start(3, &db, &[]).await.unwrap();
    c.wait_mesh_up(Duration::from_secs(10)).await.unwrap();
    let queue = unique("ha");
    // the group registers on node 0 (a pop of a queue that does not exist
    // yet stores nothing: a policy row per name asked for would be unbounded)
    let (status, body) = c.node(0).get(&pop_path(&queue, None, CONFLATE)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["conflation"], true);
    push_one(c.node(2), &queue, "dev", json!("first"), "first").await;
    let body = pop_ok(c.node(0), &pop_path(&queue, None, CONFLATE)).await;
    assert_eq!(txn_ids(&body), vec!["first"]);
    ack_all_completed(c.node(0), &body, Some("c")).await;
    for round in 0..3 {
        for i in 0..4 {
            push_one(
                c.node(2),
                &queue,
                "dev",
                json!({ "round": round, "i": i }),
                &format!("r{round}-{i}"),
            )
            .await;
        }
        // any broker serves the group, the flag or not: the newest only
        let node = c.node(1 + round % 2);
        let body = pop_ok(node, &pop_path(&queue, None, "consumerGroup=c&batch=10")).await;
        assert_eq!(body["conflation"], true, "{body}");
        assert_eq!(txn_ids(&body), vec![format!("r{round}-3")]);
        ack_all_completed(node, &body, Some("c")).await;
    }
    let (status, body) = c.node(0).get(&pop_path(&queue, None, CONFLATE)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(messages(&body).len(), 0, "{body}");
}
