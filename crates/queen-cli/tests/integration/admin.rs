//! `queen status`, `queues`, `dlq`, `groups`, `maintenance`, `messages`,
//! `traces`, `metrics`, `completion`.

use serde_json::json;

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_reports_every_url() {
    let (_db, b) = fresh_broker(&[]).await.unwrap();
    let s = queen(&b, &["status", "--json"]).await.json();
    assert_eq!(s["brokers"][0]["status"], "healthy", "{s}");
    assert_eq!(s["maintenance"]["maintenanceMode"], false);
    assert!(s["overview"]["queues"].is_number());
    let dead = format!("http://127.0.0.1:{}", queen_testkit::free_port().unwrap());
    let both = format!("{},{dead}", b.url(""));
    let run = queen_at(&both, &["status"], None, &[]).await;
    let text = run.ok();
    assert!(
        text.contains("healthy") && text.contains("unreachable"),
        "{text}"
    );
    let run = queen_at(&dead, &["status"], None, &[]).await;
    assert!(run.stdout.contains("unreachable"), "{run:?}");
    assert_eq!(run.code, UNREACHABLE);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queues_are_configured_described_listed_and_deleted() {
    let (_db, b) = fresh_broker(&[]).await.unwrap();
    let q = unique("cfg");
    let r = queen(
        &b,
        &[
            "queues",
            "configure",
            &q,
            "--lease-time",
            "45",
            "--retry-limit",
            "2",
            "--ttl",
            "600",
            "--dead-letter-queue",
            "--options",
            r#"{"priority": 3, "retryLimit": 9}"#,
            "--json",
        ],
    )
    .await
    .json();
    assert_eq!(r["options"]["leaseTime"], 45, "{r}");
    assert_eq!(r["options"]["retryLimit"], 2, "flags win over --options");
    assert_eq!(r["options"]["priority"], 3);
    assert_eq!(r["options"]["ttl"], 600);
    assert_eq!(r["options"]["deadLetterQueue"], true);
    let run = queen(&b, &["queues", "configure", &q, "--options", "[1]"]).await;
    assert!(run.fails(USER).contains("JSON object"));
    let run = queen(&b, &["queues", "configure", &q, "--options", "{"]).await;
    run.fails(USER);
    let text = queen(
        &b,
        &[
            "queues",
            "configure",
            &q,
            "--retention",
            "--retention-seconds",
            "60",
        ],
    )
    .await;
    assert!(
        text.ok()
            .lines()
            .any(|l| l.split_whitespace().eq(["retentionEnabled", "true"])),
        "{text:?}"
    );

    queen(&b, &["push", &q, "-p", "a", "1"]).await.ok();
    let d = queen(&b, &["queues", "describe", &q, "--json"])
        .await
        .json();
    assert!(
        d["partitions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "a" && p["stats"]["total"] == 1),
        "{d}"
    );
    let text = queen(&b, &["queues", "describe", &q]).await;
    assert!(text.ok().lines().any(|l| l.starts_with("a ")), "{text:?}");
    let list = queen(&b, &["queues"]).await;
    assert!(list.ok().lines().any(|l| l.starts_with(&q)), "{list:?}");
    let run = queen(&b, &["queues", "describe", &unique("none")]).await;
    assert!(run.fails(USER).contains("404"), "{run:?}");

    let run = queen(&b, &["queues", "delete", &q]).await;
    assert!(run.fails(USER).contains("--yes"));
    assert_eq!(stored(&b, &q).await, 1);
    let run = queen(&b, &["queues", "delete", &q, "--yes"]).await;
    assert_eq!(run.ok().trim(), format!("deleted queue {q}"));
    assert_eq!(stored(&b, &q).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_are_listed_retried_and_deleted() {
    let (_db, b) = fresh_broker(&[]).await.unwrap();
    let q = unique("dlq");
    queen(&b, &["push", &q, r#"{"bad": true}"#]).await.ok();
    let m = queen(&b, &["pop", &q, "--no-ack", "--json"]).await.json()[0].clone();
    let (p, t) = (
        m["partitionId"].as_str().unwrap(),
        m["transactionId"].as_str().unwrap(),
    );
    let r = queen(
        &b,
        &[
            "ack",
            p,
            t,
            "--status",
            "dlq",
            "--error",
            "cannot parse",
            "--json",
        ],
    )
    .await
    .json();
    assert_eq!(r["dlq"], true, "{r}");

    let page = queen(&b, &["dlq", "list", "--queue", &q, "--json"])
        .await
        .json();
    assert_eq!(page["total"], 1, "{page}");
    assert_eq!(page["messages"][0]["errorMessage"], "cannot parse");
    assert_eq!(page["messages"][0]["data"], json!({"bad": true}));
    let text = queen(&b, &["dlq", "list", "-q", &q]).await;
    assert!(text.ok().contains("cannot parse"), "{text:?}");
    let none = queen(&b, &["dlq", "list", "-q", &q, "--group", "other"]).await;
    assert_eq!(none.ok().trim(), "no dead letter");

    // retry: the dead letter goes back to the tail of its partition
    let run = queen(&b, &["dlq", "retry", p, t]).await;
    assert!(run.ok().contains("moved"), "{run:?}");
    let page = queen(&b, &["dlq", "list", "--queue", &q, "--json"])
        .await
        .json();
    assert_eq!(page["total"], 0, "{page}");
    let again = queen(&b, &["pop", &q, "--no-ack", "--json"]).await.json()[0].clone();
    assert_eq!(again["data"], json!({"bad": true}), "{again}");
    let (p2, t2) = (
        again["partitionId"].as_str().unwrap(),
        again["transactionId"].as_str().unwrap(),
    );
    assert_ne!(t2, t, "a retried letter is a new message");

    // delete: the dead letter goes, nothing else
    let r = queen(&b, &["ack", p2, t2, "--status", "dlq", "--json"])
        .await
        .json();
    assert_eq!(r["dlq"], true, "{r}");
    let run = queen(&b, &["dlq", "delete", p2, t2]).await;
    assert!(run.ok().contains("deleted 1 dead letter(s)"), "{run:?}");
    let page = queen(&b, &["dlq", "list", "--queue", &q, "--json"])
        .await
        .json();
    assert_eq!(page["total"], 0, "{page}");
    let run = queen(&b, &["dlq", "delete", p2, t2]).await;
    assert!(run.fails(USER).contains("404"), "{run:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_are_listed_lagged_shown_seeked_and_deleted() {
    let (_db, b) = fresh_broker(&[]).await.unwrap();
    let q = unique("grp");
    let input = "1\n2\n3\n";
    queen_at(&b.url(""), &["push", &q], Some(input.as_bytes()), &[])
        .await
        .ok();
    queen(&b, &["pop", &q, "--group", "g", "--json"])
        .await
        .json();
    let list = queen(&b, &["groups", "list", "--json"]).await.json();
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .any(|g| g["name"] == "g" && g["queueName"] == q.as_str()),
        "{list}"
    );
    assert!(queen(&b, &["groups", "list"])
        .await
        .ok()
        .lines()
        .any(|l| l.starts_with("g ")));
    assert!(queen(&b, &["groups", "lag", "--json"])
        .await
        .json()
        .is_array());
    queen(&b, &["groups", "lag", "--min-lag", "0"]).await.ok();
    let show = queen(&b, &["groups", "show", "g", "--json"]).await.json();
    assert!(show[q.as_str()]["partitions"].is_array(), "{show}");
    assert!(queen(&b, &["groups", "show", "g"]).await.ok().contains(&q));

    let r = queen(&b, &["groups", "seek", "g", &q, "--to-end", "--json"])
        .await
        .json();
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(queen(&b, &["pop", &q, "--group", "g"]).await.code, EMPTY);
    let run = queen(
        &b,
        &["groups", "seek", "g", &q, "--to", "2000-01-01T00:00:00Z"],
    )
    .await;
    assert!(run.ok().starts_with("moved group g"), "{run:?}");
    let popped = queen(&b, &["pop", &q, "--group", "g", "--batch", "10", "--json"])
        .await
        .json();
    assert_eq!(popped.as_array().unwrap().len(), 3);
    queen(
        &b,
        &[
            "groups",
            "seek",
            "g",
            &q,
            "--to-end",
            "--partition",
            "Default",
        ],
    )
    .await
    .ok();
    assert_eq!(
        queen(&b, &["groups", "seek", "g", &q]).await.code,
        USER,
        "--to-end or --to is required"
    );

    let run = queen(&b, &["groups", "delete", "g", "--queue", &q]).await;
    assert!(run.ok().starts_with("deleted group g"), "{run:?}");
    queen(&b, &["groups", "delete", "g", "--keep-metadata", "--json"])
        .await
        .json();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintenance_switches_on_and_off() {
    let (_db, b) = fresh_broker(&[]).await.unwrap();
    let m = queen(&b, &["maintenance", "--json"]).await.json();
    assert_eq!(m["maintenanceMode"], false);
    let m = queen(&b, &["maintenance", "on", "--pop", "--json"])
        .await
        .json();
    assert_eq!(m["popMaintenanceMode"], true, "{m}");
    let q = unique("maint");
    queen(&b, &["push", &q, "1"]).await.ok();
    assert_eq!(queen(&b, &["pop", &q]).await.code, EMPTY, "pops paused");
    let text = queen(&b, &["maintenance", "off", "--pop"]).await;
    assert!(text.ok().contains("pop maintenance off"), "{text:?}");
    queen(&b, &["pop", &q]).await.ok();

    let m = queen(&b, &["maintenance", "on", "--json"]).await.json();
    assert_eq!(m["maintenanceMode"], true);
    let pushed = queen(&b, &["push", &q, "2"]).await;
    let m = queen(&b, &["maintenance", "off", "--json"]).await.json();
    assert_eq!(m["maintenanceMode"], false);
    // while on, pushes are spooled (this broker has the disk spool) and the CLI says so
    assert!(pushed.ok().starts_with("buffered:"), "{pushed:?}");
    assert_eq!(queen(&b, &["maintenance", "sideways"]).await.code, USER);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_traces_metrics_and_completion() {
    let (_db, b) = fresh_broker(&[]).await.unwrap();
    let q = unique("msg");
    queen(
        &b,
        &["push", &q, "--transaction-id", "t-1", r#"{"k": "v"}"#],
    )
    .await
    .ok();
    let list = queen(&b, &["messages", "list", "--queue", &q, "--json"])
        .await
        .json();
    let m = &list["messages"][0];
    assert_eq!(m["transactionId"], "t-1", "{list}");
    let p = m["partitionId"].as_str().unwrap().to_owned();
    assert!(queen(&b, &["messages", "list", "-q", &q])
        .await
        .ok()
        .contains("t-1"));
    let one = queen(&b, &["messages", "show", &p, "t-1", "--json"])
        .await
        .json();
    assert_eq!(one["payload"], json!({"k": "v"}));
    assert!(queen(&b, &["messages", "show", &p, "t-1"])
        .await
        .ok()
        .contains(r#"{"k":"v"}"#));

    // a trace recorded through the API shows up by message and by name
    let name = unique("trace");
    let (status, _) = b
        .post("/api/v1/traces", &json!({"transactionId": "t-1", "partitionId": p, "traceNames": [name], "data": {"step": 1}}))
        .await;
    assert_eq!(status, 201);
    let t = queen(&b, &["traces", "show", &p, "t-1", "--json"])
        .await
        .json();
    assert_eq!(t["traces"][0]["data"], json!({"step": 1}));
    assert!(queen(&b, &["traces", "show", &p, "t-1"])
        .await
        .ok()
        .contains("info"));
    let t = queen(&b, &["traces", "name", &name, "--json"]).await.json();
    assert_eq!(t["total"], 1, "{t}");
    assert!(queen(&b, &["traces", "names"]).await.ok().contains(&name));

    let run = queen(&b, &["messages", "retry", &p, "t-1"]).await;
    assert_ne!(run.code, 0, "not a dead letter: {run:?}");
    run.fails(USER);
    let run = queen(&b, &["messages", "delete", &p, "t-1"]).await;
    assert!(run.ok().contains("deleted message t-1"));
    assert!(queen(&b, &["messages", "show", &p, "t-1"])
        .await
        .fails(USER)
        .contains("404"));

    let m = queen(&b, &["metrics", "--json"]).await.json();
    assert!(m["database"].is_object(), "{m}");
    assert!(queen(&b, &["metrics"])
        .await
        .ok()
        .lines()
        .any(|l| l.starts_with("database.")));
    assert!(queen(&b, &["metrics", "--prometheus"])
        .await
        .ok()
        .contains("queen_uptime_seconds"));
    let bash = queen(&b, &["completion", "bash"]).await;
    assert!(
        bash.ok().contains("_queen"),
        "{}",
        &bash.stdout[..bash.stdout.len().min(200)]
    );
}
