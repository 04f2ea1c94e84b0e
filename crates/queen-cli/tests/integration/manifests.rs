//! `queen apply -f`, `queues configure` with every option, `tx -f` and
//! `lease extend`.

use serde_json::json;

use crate::common::*;

fn file(text: &str) -> tempfile::NamedTempFile {
    let f = tempfile::Builder::new().suffix(".yaml").tempfile().unwrap();
    std::fs::write(f.path(), text).unwrap();
    f
}

async fn exists(b: &queen_testkit::TestBroker, queue: &str) -> bool {
    let (status, _) = b.get(&format!("/api/v1/resources/queues/{queue}")).await;
    status == 200
}

const GOOD: &str = "queue: orders
namespace: billing
task: invoice
options:
  leaseTime: 60
  retryLimit: 5
  retryDelay: 500
  maxSize: 1000
  ttl: 3600
  priority: 7
  deadLetterQueue: true
---
queue: audit
options:
  retentionEnabled: true
  retentionSeconds: 600
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_manifests_are_refused_whole_and_good_ones_applied_idempotently() {
    let (_db, b) = fresh_broker(&[]).await.unwrap();
    // an unknown key in the second document: the first is not applied either
    let bad = file(
        "queue: first\noptions:\n  leaseTime: 60\n---\nqueue: second\noptions:\n  leseTime: 5\n",
    );
    let path = bad.path().to_str().unwrap();
    let err = queen(&b, &["apply", "-f", path])
        .await
        .fails(USER)
        .to_owned();
    assert!(
        err.contains(&format!("{path}, line 7 (leseTime: 5)")),
        "{err}"
    );
    assert!(
        err.contains("unknown field `leseTime`") && err.contains("nothing was applied"),
        "{err}"
    );
    assert!(!exists(&b, "first").await, "nothing written");
    // a value of the wrong type, from standard input
    let input = b"queue: first\noptions:\n  ttl: soon\n";
    let run = queen_at(&b.url(""), &["apply", "-f", "-"], Some(input), &[]).await;
    assert!(
        run.fails(USER)
            .contains("standard input, line 3 (ttl: soon)"),
        "{run:?}"
    );
    assert!(!exists(&b, "first").await);
    assert_eq!(
        queen(&b, &["apply", "-f", "/no/such.yaml"]).await.code,
        USER
    );

    // --dry-run contacts no broker
    let good = file(GOOD);
    let path = good.path().to_str().unwrap();
    let dead = format!("http://127.0.0.1:{}", queen_testkit::free_port().unwrap());
    let plan = queen_at(
        &dead,
        &["apply", "-f", path, "--dry-run", "-o", "json"],
        None,
        &[],
    )
    .await
    .json();
    assert_eq!(plan[0]["options"]["maxSize"], 1000, "{plan}");
    assert_eq!(plan[1]["queue"], "audit");
    assert!(!exists(&b, "orders").await);

    let first = queen(&b, &["apply", "-f", path, "-o", "json"]).await.json();
    let orders = &first[0];
    assert_eq!(orders["namespace"], "billing", "{first}");
    for (k, v) in [
        ("leaseTime", 60),
        ("retryLimit", 5),
        ("retryDelay", 500),
        ("maxSize", 1000),
        ("ttl", 3600),
        ("priority", 7),
    ] {
        assert_eq!(orders["options"][k], v, "{k} in {orders}");
    }
    assert_eq!(orders["options"]["deadLetterQueue"], true);
    assert_eq!(first[1]["options"]["retentionSeconds"], 600);
    // applying again changes nothing, and keeps the messages
    queen(&b, &["push", "orders", "1"]).await.ok();
    let again = queen(&b, &["apply", "-f", path, "-o", "json"]).await.json();
    assert_eq!(again, first);
    assert_eq!(stored(&b, "orders").await, 1);
    let text = queen(&b, &["apply", "-f", path]).await;
    assert!(text.ok().starts_with("configured 2 queue(s)"), "{text:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configure_has_a_flag_for_every_option() {
    let key = "0123456789abcdef".repeat(4);
    let (_db, b) = fresh_broker(&[("QUEEN_ENCRYPTION_KEY", &key)])
        .await
        .unwrap();
    let r = queen(
        &b,
        &[
            "queues",
            "configure",
            "q",
            "--max-size",
            "10",
            "--retry-delay",
            "250",
            "--retry-backoff",
            "2",
            "--retry-delay-max",
            "4000",
            "--dlq-after-max-retries",
            "--delayed-processing",
            "3",
            "--window-buffer",
            "2",
            "--max-wait-time-seconds",
            "90",
            "-o",
            "json",
        ],
    )
    .await
    .json();
    assert_eq!(r["options"]["retryBackoff"], 2.0, "{r}");
    assert_eq!(r["options"]["retryDelayMax"], 4000, "{r}");
    // the broker has an encryption key
    let e = queen(
        &b,
        &["queues", "configure", "e", "--encryption", "-o", "json"],
    )
    .await;
    assert_eq!(e.json()["options"]["encryptionEnabled"], true);
    let o = &r["options"];
    assert_eq!(
        (o["maxSize"].clone(), o["retryDelay"].clone()),
        (json!(10), json!(250)),
        "{r}"
    );
    assert_eq!(o["dlqAfterMaxRetries"], true);
    assert_eq!(
        (o["delayedProcessing"].clone(), o["windowBuffer"].clone()),
        (json!(3), json!(2))
    );
    assert_eq!(o["maxWaitTimeSeconds"], 90);
    let run = queen(&b, &["queues", "configure", "q", "--retry-backoff", "0.5"]).await;
    assert!(run.fails(USER).contains("--retry-backoff"), "{run:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_from_files_and_lease_extension() {
    let (_db, b) = fresh_broker(&[]).await.unwrap();
    queen(&b, &["push", "in", r#"{"n": 1}"#]).await.ok();
    let m = queen(&b, &["pop", "in", "--no-ack", "-o", "json"])
        .await
        .json()[0]
        .clone();
    let (p, t, l) = (
        m["partitionId"].as_str().unwrap(),
        m["transactionId"].as_str().unwrap(),
        m["leaseId"].as_str().unwrap(),
    );
    // the lease is extended, then the message acked with a push in one transaction
    let r = queen(
        &b,
        &["lease", "extend", l, "--seconds", "120", "-o", "json"],
    )
    .await
    .json();
    assert_eq!(r["success"], true, "{r}");
    let text = queen(&b, &["lease", "extend", l]).await;
    assert!(
        text.ok().starts_with(&format!("lease {l} extended")),
        "{text:?}"
    );
    let tx = file(&format!(
        "operations:\n  - type: ack\n    transactionId: {t}\n    partitionId: {p}\n    leaseId: {l}\n  - type: push\n    items:\n      - queue: out\n        partition: p1\n        payload: {{n: 2}}\n"
    ));
    let r = queen(&b, &["tx", "-f", tx.path().to_str().unwrap(), "-o", "json"])
        .await
        .json();
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(queen(&b, &["pop", "in"]).await.code, EMPTY, "acked");
    let out = queen(&b, &["pop", "out", "-o", "json"]).await.json();
    assert_eq!(out[0]["data"], json!({"n": 2}));
    // JSON on standard input, a bare list of operations
    let body = br#"[{"type": "push", "items": [{"queue": "out", "payload": 3}]}]"#;
    let run = queen_at(&b.url(""), &["tx", "-f", "-"], Some(body), &[]).await;
    assert!(run.ok().contains("committed"), "{run:?}");
    assert_eq!(stored(&b, "out").await, 2);
    // refused before sending; refused by the broker (nothing applied)
    let run = queen_at(
        &b.url(""),
        &["tx", "-f", "-"],
        Some(b"operations: [{type: pop}]"),
        &[],
    )
    .await;
    assert!(run.fails(USER).contains("nothing was sent"), "{run:?}");
    // a push of a transaction id already stored aborts the whole transaction
    queen(
        &b,
        &["push", "out", "-p", "p1", "--transaction-id", "dup", "0"],
    )
    .await
    .ok();
    let refused = br#"{"operations": [{"type": "push", "items": [{"queue": "out", "payload": 4}]},
        {"type": "push", "items": [{"queue": "out", "partition": "p1", "payload": 5, "transactionId": "dup"}]}]}"#;
    let run = queen_at(&b.url(""), &["tx", "-f", "-"], Some(refused), &[]).await;
    assert!(run.fails(USER).contains("nothing of it applied"), "{run:?}");
    assert_eq!(
        stored(&b, "out").await,
        3,
        "nothing of a refused transaction applied"
    );
    // a lease that is gone
    let run = queen(&b, &["lease", "extend", l]).await;
    assert!(run.fails(USER).contains("not extended"), "{run:?}");
}
