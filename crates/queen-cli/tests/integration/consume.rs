//! `queen pop`, `tail` and `ack`.

use std::time::Duration;

use serde_json::{json, Value};

use crate::common::*;

async fn push_n(b: &queen_testkit::TestBroker, q: &str, n: usize) {
    let input: String = (0..n).map(|i| format!("{i}\n")).collect();
    queen_at(&b.url(""), &["push", q], Some(input.as_bytes()), &[])
        .await
        .ok();
}

fn datas(lines: &str) -> Vec<Value> {
    lines
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["data"].clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pop_without_ack_leaves_the_lease_and_ack_by_ids_releases_it() {
    let (_db, b) = fresh_broker(&[]).await.unwrap();
    let q = unique("noack");
    push_n(&b, &q, 2).await;
    let popped = queen(&b, &["pop", &q, "--batch", "2", "--no-ack", "--json"])
        .await
        .json();
    assert_eq!(popped.as_array().unwrap().len(), 2);
    // still leased: nothing to pop, and the queue counts them as processing
    assert_eq!(queen(&b, &["pop", &q]).await.code, EMPTY);
    let detail = b.get(&format!("/api/v1/resources/queues/{q}")).await.1;
    assert_eq!(detail["totals"]["processing"], 2, "{detail}");

    let m = &popped[0];
    let (p, t, l) = (
        m["partitionId"].as_str().unwrap(),
        m["transactionId"].as_str().unwrap(),
        m["leaseId"].as_str().unwrap(),
    );
    let acked = queen(&b, &["ack", p, t, "--lease-id", l, "--json"])
        .await
        .json();
    assert_eq!(acked["success"], true, "{acked}");
    let m = &popped[1];
    let run = queen(
        &b,
        &[
            "ack",
            m["partitionId"].as_str().unwrap(),
            m["transactionId"].as_str().unwrap(),
        ],
    )
    .await;
    assert!(run.ok().starts_with("acknowledged"), "{run:?}");
    let run = queen(&b, &["ack", p, "no-such-transaction"]).await;
    assert!(run.fails(USER).contains("refused the ack"), "{run:?}");
    let detail = b.get(&format!("/api/v1/resources/queues/{q}")).await.1;
    assert_eq!(detail["totals"]["completed"], 2, "{detail}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pop_with_auto_ack_commits_on_delivery_and_waits_when_asked() {
    let (_db, b) = fresh_broker(&[]).await.unwrap();
    let q = unique("auto");
    push_n(&b, &q, 1).await;
    let popped = queen(&b, &["pop", &q, "--auto-ack", "--json"]).await.json();
    assert_eq!(popped[0]["leaseId"], "");
    assert_eq!(queen(&b, &["pop", &q]).await.code, EMPTY);
    // a waiting pop returns the message pushed while it waits
    let url = b.url("");
    let q2 = q.clone();
    let waiter = tokio::spawn(async move {
        queen_at(&url, &["pop", &q2, "--wait", "10", "--json"], None, &[]).await
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    push_n(&b, &q, 1).await;
    let got = waiter.await.unwrap().json();
    assert_eq!(got[0]["data"], 0);
    let human = queen(&b, &["pop", &q, "--wait", "0.2"]).await;
    assert_eq!(human.code, EMPTY);
    assert_eq!(human.stderr.trim(), "queen: no message");
    assert!(queen(&b, &["pop", &q, "--wait=700"])
        .await
        .fails(USER)
        .contains("--wait"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_drains_or_follows_with_or_without_a_group() {
    let (_db, b) = fresh_broker(&[]).await.unwrap();
    let q = unique("tail");
    push_n(&b, &q, 5).await;
    // without --follow: what is there, then exit 0
    let run = queen(&b, &["tail", &q, "--batch", "2", "--json"]).await;
    assert_eq!(
        datas(run.ok()),
        [json!(0), json!(1), json!(2), json!(3), json!(4)]
    );
    let run = queen(&b, &["tail", &q]).await;
    assert_eq!(run.ok(), "", "acked, so nothing is left");

    // a group reads everything again, on its own cursor; --no-ack leaves it leased
    let run = queen(
        &b,
        &[
            "tail", &q, "--group", "audit", "--batch", "10", "--no-ack", "--json",
        ],
    )
    .await;
    assert_eq!(datas(run.ok()).len(), 5);
    let run = queen(&b, &["tail", &q, "--group", "audit"]).await;
    assert_eq!(run.ok(), "", "still leased");

    // --follow waits for new messages; --limit ends it
    let url = b.url("");
    let q2 = q.clone();
    let follower = tokio::spawn(async move {
        queen_at(
            &url,
            &[
                "tail",
                &q2,
                "--group",
                "live",
                "--subscription",
                "new",
                "--follow",
                "--limit",
                "3",
                "--json",
            ],
            None,
            &[],
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(800)).await;
    let input = "\"x\"\n\"y\"\n\"z\"\n\"beyond the limit\"\n";
    queen_at(&b.url(""), &["push", &q], Some(input.as_bytes()), &[])
        .await
        .ok();
    let run = tokio::time::timeout(Duration::from_secs(20), follower)
        .await
        .expect("follower ended")
        .unwrap();
    assert_eq!(datas(run.ok()), [json!("x"), json!("y"), json!("z")]);
    // human lines carry the payload
    let run = queen(&b, &["tail", &q, "--group", "human", "--batch", "20"]).await;
    assert!(
        run.ok()
            .lines()
            .any(|l| l.ends_with("\"beyond the limit\"")),
        "{run:?}"
    );
}
