//! `queen kv`, `locks`, `timers`, `ephemeral`, `streams` and `analytics`
//! against a broker.

use serde_json::json;

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_value_round_trip() {
    let (_db, b) = fresh_broker(&[]).await.unwrap();
    let r = queen(
        &b,
        &["kv", "put", "app", "cfg/a", r#"{"v": 1}"#, "-o", "json"],
    )
    .await
    .json();
    assert_eq!(r["applied"], true, "{r}");
    let v1 = r["version"].as_u64().unwrap();
    queen(&b, &["kv", "put", "app", "cfg/b", "2", "--ttl", "1h"])
        .await
        .ok();
    queen(&b, &["kv", "put", "app", "other", "3"]).await.ok();
    let got = queen(&b, &["kv", "get", "app", "cfg/a", "-o", "json"])
        .await
        .json();
    assert_eq!(
        (got["found"].clone(), got["value"].clone()),
        (json!(true), json!({"v": 1}))
    );
    assert!(queen(&b, &["kv", "get", "app", "cfg/a"])
        .await
        .ok()
        .contains(r#"{"v":1}"#));
    let list = queen(&b, &["kv", "list", "app", "cfg/", "-o", "ndjson"]).await;
    let keys: Vec<String> = list
        .ok()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["key"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(keys, ["cfg/a", "cfg/b"]);
    let page = queen(&b, &["kv", "list", "app", "cfg/", "--limit", "1"]).await;
    assert!(page.ok().contains("more: --after cfg/a"), "{page:?}");
    // conditional writes that lose are status 1 with the reason
    let run = queen(&b, &["kv", "put", "app", "cfg/a", "9", "--if-absent"]).await;
    assert!(run.fails(USER).contains("exists"), "{run:?}");
    let run = queen(
        &b,
        &[
            "kv",
            "put",
            "app",
            "cfg/a",
            "9",
            "--expect",
            &(v1 + 100).to_string(),
        ],
    )
    .await;
    assert!(run.fails(USER).contains("version"), "{run:?}");
    queen(
        &b,
        &[
            "kv",
            "put",
            "app",
            "cfg/a",
            "9",
            "--expect",
            &v1.to_string(),
        ],
    )
    .await
    .ok();
    queen(&b, &["kv", "delete", "app", "cfg/a"]).await.ok();
    let run = queen(&b, &["kv", "get", "app", "cfg/a"]).await;
    assert_eq!(
        (run.code, run.stderr.trim()),
        (EMPTY, "queen: no key cfg/a in app")
    );
    assert_eq!(
        queen(&b, &["kv", "delete", "app", "cfg/a"]).await.code,
        USER
    );
    assert_eq!(
        queen(&b, &["kv", "put", "app", "k", "{oops"]).await.code,
        USER
    );
    assert_eq!(
        queen(&b, &["kv", "get", "BAD NS", "k"]).await.code,
        USER,
        "400 from the broker"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_round_trip() {
    let (_db, b) = fresh_broker(&[]).await.unwrap();
    let r = queen(
        &b,
        &[
            "locks", "acquire", "job", "--ttl", "30s", "--owner", "me", "-o", "json",
        ],
    )
    .await
    .json();
    assert_eq!(r["acquired"], true, "{r}");
    let token = r["token"].as_u64().unwrap().to_string();
    let run = queen(
        &b,
        &["locks", "acquire", "job", "--ttl", "30", "--owner", "you"],
    )
    .await;
    let err = run.fails(USER);
    assert!(
        err.contains("not acquired") && err.contains("by me"),
        "{err}"
    );
    let show = queen(&b, &["locks", "show", "job", "-o", "json"])
        .await
        .json();
    assert_eq!(show["holders"][0]["owner"], "me", "{show}");
    assert!(queen(&b, &["locks", "show", "job"])
        .await
        .ok()
        .contains("me"));
    queen(&b, &["locks", "release", "job", &token]).await.ok();
    assert_eq!(
        queen(&b, &["locks", "release", "job", &token]).await.code,
        USER
    );
    assert_eq!(
        queen(&b, &["locks", "show", "job"]).await.ok().trim(),
        "job is free"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timers_once_and_recurring() {
    let (_db, b) = fresh_broker(&[]).await.unwrap();
    let r = queen(
        &b,
        &[
            "timers",
            "schedule",
            "q",
            "later",
            r#"{"a": 1}"#,
            "--delay",
            "1h",
            "-o",
            "json",
        ],
    )
    .await
    .json();
    assert_eq!(
        (r["ok"].clone(), r["status"].clone()),
        (json!(true), json!("scheduled")),
        "{r}"
    );
    queen(
        &b,
        &[
            "timers",
            "schedule",
            "q",
            "hourly",
            "1",
            "--interval",
            "1h",
            "--catch-up",
            "none",
        ],
    )
    .await
    .ok();
    queen(
        &b,
        &[
            "timers",
            "schedule",
            "q",
            "morning",
            "2",
            "--cron",
            "30 7 * * MON-FRI",
            "--timezone",
            "Europe/Berlin",
        ],
    )
    .await
    .ok();
    let list = queen(&b, &["timers", "list", "q"]).await;
    let text = list.ok();
    assert!(
        text.contains("every 3600000 ms") && text.contains("cron 30 7 * * MON-FRI (Europe/Berlin)"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("later") && l.contains("once")),
        "{text}"
    );
    let peek = queen(&b, &["timers", "peek", "q", "hourly", "-o", "json"])
        .await
        .json();
    assert_eq!(
        (peek["intervalMs"].clone(), peek["catchUp"].clone()),
        (json!(3_600_000), json!("none")),
        "{peek}"
    );
    queen(&b, &["timers", "cancel", "q", "later"]).await.ok();
    assert_eq!(
        queen(&b, &["timers", "peek", "q", "later"]).await.code,
        EMPTY
    );
    assert_eq!(
        queen(&b, &["timers", "cancel", "q", "later"]).await.code,
        USER
    );
    assert_eq!(
        queen(
            &b,
            &["timers", "schedule", "q", "k", "1", "--cron", "not a cron"]
        )
        .await
        .code,
        USER
    );
    // a timer due now fires into its queue
    queen(
        &b,
        &[
            "timers",
            "schedule",
            "fired",
            "now",
            r#"{"hello": "timer"}"#,
            "--at",
            "now",
            "--txn",
            "t-1",
        ],
    )
    .await
    .ok();
    let got = queen(&b, &["pop", "fired", "--wait", "10", "-o", "json"])
        .await
        .json();
    assert_eq!(got[0]["data"], json!({"hello": "timer"}), "{got}");
    assert_eq!(got[0]["transactionId"], "t-1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ephemeral_streams_and_analytics() {
    let (_db, b) = fresh_broker(&[]).await.unwrap();
    let r = queen(
        &b,
        &[
            "ephemeral",
            "configure",
            "e",
            "--max-length",
            "100",
            "--policy",
            "drop-oldest",
            "-o",
            "json",
        ],
    )
    .await
    .json();
    assert_eq!(r["options"]["policy"], "dropOldest", "{r}");
    queen(
        &b,
        &["ephemeral", "push", "e", r#"{"n": 1}"#, r#"{"n": 2}"#],
    )
    .await
    .ok();
    let depth = queen(&b, &["ephemeral", "depth", "e", "-o", "json"])
        .await
        .json();
    assert_eq!(depth["pending"], 2, "{depth}");
    assert!(queen(&b, &["ephemeral", "list"])
        .await
        .ok()
        .lines()
        .any(|l| l.starts_with("e ")));
    let popped = queen(&b, &["ephemeral", "pop", "e", "-b", "5", "-o", "json"])
        .await
        .json();
    let payloads: Vec<_> = popped["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["payload"].clone())
        .collect();
    assert_eq!(payloads, [json!({"n": 1}), json!({"n": 2})]);
    assert_eq!(
        queen(&b, &["ephemeral", "pop", "e"]).await.code,
        EMPTY,
        "acked"
    );
    queen(&b, &["ephemeral", "reset", "e"]).await.ok();
    assert_eq!(
        queen(&b, &["ephemeral", "delete", "e"]).await.code,
        USER,
        "--yes"
    );
    assert!(queen(&b, &["ephemeral", "delete", "e", "--yes"])
        .await
        .ok()
        .contains("deleted"));

    assert_eq!(
        queen(&b, &["streams", "list"]).await.ok().trim(),
        "no stream query"
    );
    assert!(queen(&b, &["streams", "list", "-o", "json"]).await.json()["queries"].is_array());

    queen(&b, &["push", "orders", "1"]).await.ok();
    assert!(queen(&b, &["analytics", "status", "-o", "json"])
        .await
        .json()
        .is_object());
    for cmd in ["queue-ops", "queue-lag", "workers", "parked", "retention"] {
        let v = queen(
            &b,
            &[
                "analytics",
                cmd,
                "--from",
                "2h ago",
                "--to",
                "now",
                "-o",
                "json",
            ],
        )
        .await
        .json();
        assert!(v.is_object(), "{cmd}: {v}");
        queen(&b, &["analytics", cmd, "--interval", "5m"])
            .await
            .ok();
    }
    let v = queen(
        &b,
        &[
            "analytics",
            "queue-ops",
            "-q",
            "orders",
            "--from",
            "1d ago",
            "-o",
            "json",
        ],
    )
    .await
    .json();
    assert!(v["queues"].is_array(), "{v}");
    assert!(queen(&b, &["analytics", "system"])
        .await
        .ok()
        .contains("METRIC"));
    queen(&b, &["analytics", "postgres", "-o", "yaml"])
        .await
        .ok();
    let run = queen(&b, &["analytics", "queue-ops", "--from", "last tuesday"]).await;
    assert_eq!(run.code, USER, "{run:?}");
    assert!(run.stderr.contains("is not a time"), "{run:?}");
}
