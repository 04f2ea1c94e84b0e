//! `queen push`: the argument form, JSON lines from stdin and files, bad input.

use serde_json::{json, Value};

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_forms_scripts_use() {
    let (_db, b) = fresh_broker(&[]).await.unwrap();
    let q = unique("orders");
    // queen --url URL push QUEUE --partition P 'JSON'
    let run = queen(&b, &["push", &q, "--partition", "cust-42", r#"{"id": 1}"#]).await;
    assert!(
        run.ok().starts_with(&format!("queued in {q}/cust-42")),
        "{run:?}"
    );
    queen(&b, &["push", &q, "--partition", "cust-42", r#"{"id": 2}"#])
        .await
        .ok();

    // queen --url URL queues --json
    let queues = queen(&b, &["queues", "--json"]).await.json();
    let mine = queues
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == q.as_str())
        .unwrap_or_else(|| panic!("{q} not in {queues}"));
    assert_eq!(mine["messages"]["total"], 2);

    // queen --url URL pop QUEUE --batch N --json: a JSON array, acked
    let popped = queen(&b, &["pop", &q, "--batch", "10", "--json"])
        .await
        .json();
    let popped = popped.as_array().unwrap();
    assert_eq!(popped.len(), 2);
    assert_eq!(popped[0]["data"], json!({"id": 1}));
    assert_eq!(popped[1]["data"], json!({"id": 2}));
    for key in [
        "id",
        "transactionId",
        "partitionId",
        "partition",
        "leaseId",
        "consumerGroup",
        "createdAt",
        "traceId",
        "producerSub",
    ] {
        assert!(
            popped[0].get(key).is_some(),
            "{key} missing in {}",
            popped[0]
        );
    }
    assert_eq!(popped[0]["partition"], "cust-42");
    // acked: nothing left, and an empty pop is status 3 with `[]`
    let empty = queen(&b, &["pop", &q, "--batch", "10", "--json"]).await;
    assert_eq!(empty.code, EMPTY, "{empty:?}");
    assert_eq!(
        serde_json::from_str::<Value>(&empty.stdout).unwrap(),
        json!([])
    );
    let detail = b.get(&format!("/api/v1/resources/queues/{q}")).await.1;
    assert_eq!(detail["totals"]["completed"], 2, "{detail}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_push_reports_its_ids_and_duplicates() {
    let (_db, b) = fresh_broker(&[]).await.unwrap();
    let q = unique("single");
    let first = queen(&b, &["push", &q, "--transaction-id", "tx-1", "7", "--json"])
        .await
        .json();
    assert_eq!(first["queued"], 1);
    assert_eq!(first["results"][0]["status"], "queued");
    assert_eq!(first["results"][0]["transactionId"], "tx-1");
    let message_id = first["results"][0]["messageId"].clone();
    assert!(message_id.is_string(), "{first}");
    let again = queen(&b, &["push", &q, "--transaction-id", "tx-1", "8", "--json"])
        .await
        .json();
    assert_eq!(again["duplicate"], 1);
    assert_eq!(again["results"][0]["messageId"], message_id);
    let text = queen(&b, &["push", &q, "--transaction-id", "tx-1", "9"]).await;
    assert!(
        text.ok().starts_with("duplicate: transaction tx-1"),
        "{text:?}"
    );
    assert_eq!(stored(&b, &q).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_lines_from_stdin_and_files_keep_their_order() {
    let (_db, b) = fresh_broker(&[]).await.unwrap();
    let q = unique("lines");
    let mut input = String::new();
    for n in 0..2500 {
        input.push_str(&format!("{{\"n\": {n}}}\n"));
        if n % 500 == 0 {
            input.push_str("   \n");
        }
    }
    let summary = queen_at(
        &b.url(""),
        &["push", &q, "-p", "p", "--batch", "300", "--json"],
        Some(input.as_bytes()),
        &[],
    )
    .await
    .json();
    assert_eq!(summary["messages"], 2500, "{summary}");
    assert_eq!(summary["queued"], 2500);
    assert!(summary.get("results").is_none());

    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), "\"a\"\n[1]\n{\"b\":null}").unwrap();
    let path = file.path().to_str().unwrap();
    let text = queen(&b, &["push", &q, "-p", "p", "--file", path]).await;
    assert!(text.ok().contains("pushed 3 messages"), "{text:?}");

    // several requests in flight still deliver every line once
    let pipelined = queen_at(
        &b.url(""),
        &[
            "push",
            &q,
            "-p",
            "other",
            "--batch",
            "100",
            "--in-flight",
            "4",
            "--json",
        ],
        Some(input.as_bytes()),
        &[],
    )
    .await
    .json();
    assert_eq!(pipelined["queued"], 2500);

    let popped = queen(&b, &["pop", &q, "-p", "p", "--batch", "5000", "--json"])
        .await
        .json();
    let values: Vec<Value> = popped
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["data"].clone())
        .collect();
    assert_eq!(values.len(), 2503);
    for (n, v) in values.iter().take(2500).enumerate() {
        assert_eq!(v["n"], n, "line order kept");
    }
    assert_eq!(values[2500..], [json!("a"), json!([1]), json!({"b": null})]);
    assert_eq!(stored(&b, &q).await, 5003);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_input_is_refused_whole_with_one_line() {
    let (_db, b) = fresh_broker(&[]).await.unwrap();
    let q = unique("bad");
    let run = queen(&b, &["push", &q, r#"{"id": "#]).await;
    let err = run.fails(USER);
    assert!(err.contains("not valid JSON"), "{err}");
    let run = queen(&b, &["push", &q, "1 2"]).await;
    run.fails(USER);

    // the bad line is the 4th of 5: nothing of the first three is pushed
    let input = b"{\"ok\": 1}\n{\"ok\": 2}\n{\"ok\": 3}\n{\"broken\": \n{\"ok\": 5}\n";
    let run = queen_at(&b.url(""), &["push", &q], Some(input), &[]).await;
    let err = run.fails(USER);
    assert!(err.contains("line 4"), "{err}");
    assert!(err.contains("nothing was pushed"), "{err}");
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), b"1\n\xff\xfe\n").unwrap();
    let run = queen(&b, &["push", &q, "--file", file.path().to_str().unwrap()]).await;
    assert!(run.fails(USER).contains("line 2"), "{run:?}");
    let run = queen(&b, &["push", &q, "--file", "/no/such/file"]).await;
    assert!(run.fails(USER).contains("cannot read"), "{run:?}");
    let run = queen_at(&b.url(""), &["push", &q], Some(b"\n \n"), &[]).await;
    assert!(run.fails(USER).contains("no message"), "{run:?}");
    // a bad queue name is refused before anything is sent
    let run = queen(&b, &["push", "", "1"]).await;
    run.fails(USER);
    assert_eq!(stored(&b, &q).await, 0);
    let (status, _) = b.get(&format!("/api/v1/resources/queues/{q}")).await;
    assert_eq!(status, 404, "the queue was not even created");
}
