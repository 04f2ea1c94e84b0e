//! The reference's Prometheus series on `/metrics/prometheus` (issue 36):
//! per-queue figures of the last complete minute and cluster totals, the same
//! on every replica of one database; and the Grafana dashboard and alert rules
//! of `deploy/`, which use only series the broker exports.

use std::collections::{BTreeSet, HashMap};
use std::time::{SystemTime, UNIX_EPOCH};

use prometheus_parse::{Scrape, Value as PromValue};
use queen_testkit::{TestBroker, TestDb};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::*;

/// Seconds since the epoch, on this machine (the brokers' and PostgreSQL's clock).
fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs()
}

/// Waits until the minute after `minute` (epoch minutes) has begun.
async fn wait_for_minute_after(minute: u64) {
    while now_secs() / 60 <= minute {
        sleep_ms(200).await;
    }
}

fn parse(text: &str) -> Scrape {
    Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).expect("valid exposition format")
}

/// The value of `metric` with exactly `labels` in `scrape`, if present.
fn sample(scrape: &Scrape, metric: &str, labels: &[(&str, &str)]) -> Option<f64> {
    scrape
        .samples
        .iter()
        .find(|s| {
            s.metric == metric
                && s.labels.len() == labels.len()
                && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v))
        })
        .map(|s| match s.value {
            PromValue::Counter(v) | PromValue::Gauge(v) | PromValue::Untyped(v) => v,
            _ => f64::NAN,
        })
}

#[track_caller]
fn value(scrape: &Scrape, metric: &str, labels: &[(&str, &str)]) -> f64 {
    sample(scrape, metric, labels).unwrap_or_else(|| panic!("no {metric}{labels:?}"))
}

/// The queues that carry `metric` in `scrape`.
fn queues_of(scrape: &Scrape, metric: &str) -> BTreeSet<String> {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == metric)
        .filter_map(|s| s.labels.get("queue").map(str::to_owned))
        .collect()
}

const PER_QUEUE: [&str; 7] = [
    "queen_queue_push_messages_per_minute",
    "queen_queue_pop_messages_per_minute",
    "queen_queue_ack_per_minute",
    "queen_queue_pop_lag_milliseconds",
    "queen_queue_parked_consumers",
    "queen_queue_pop_empty_per_minute",
    "queen_queue_transactions_per_minute",
];

/// Starts a broker on `db` named `id` that flushes its counts every 200 ms.
async fn replica(db: &TestDb, id: &str, extra: &[(&str, &str)]) -> TestBroker {
    let mut env = vec![("QUEEN_SERVER_ID", id), ("STATS_INTERVAL_MS", "200")];
    env.extend_from_slice(extra);
    TestBroker::start_with(db, &env)
        .await
        .expect("start broker")
}

/// The known workload, run on two replicas of one database, queue `a` and
/// queue `b`; see the test below for the figures it must give.
async fn workload(b1: &TestBroker, b2: &TestBroker, a: &str, b: &str) {
    // a's first failed ack dead-letters
    configure(b1, a, json!({ "retryLimit": 0 })).await;
    push_numbered(b1, a, "p", "a", 3).await;
    push_numbered(b2, b, "p", "b", 3).await;

    let body = pop_ok(b1, &pop_path(a, None, "batch=3&wait=false")).await;
    let msgs = messages(&body);
    assert_eq!(msgs.len(), 3);
    let (code, res) = b1
        .post(
            "/api/v1/ack/batch",
            &json!({ "acknowledgments": [ack_item(&msgs[0], "completed", None),
                                         ack_item(&msgs[1], "completed", None)] }),
        )
        .await;
    assert_eq!(code, StatusCode::OK, "{res}");
    let r = ack(b1, &msgs[2], "failed", Some("boom")).await;
    assert_eq!(
        r["dlq"], true,
        "retryLimit 0: the failure dead-letters: {r}"
    );

    // b: a whole lease acked in order (the one-statement ack path), then
    // the last message acked by a transaction
    let body = pop_ok(b2, &pop_path(b, None, "batch=2&wait=false")).await;
    assert_eq!(messages(&body).len(), 2);
    ack_all_completed(b2, &body, None).await;
    let body = pop_ok(b2, &pop_path(b, None, "batch=1&wait=false")).await;
    let msgs = messages(&body);
    assert_eq!(msgs.len(), 1);
    let ack_op = |m: &Value| {
        json!({ "type": "ack", "transactionId": m["transactionId"],
                "partitionId": m["partitionId"], "leaseId": m["leaseId"],
                "status": "completed" })
    };
    let (code, res) = b2
        .post(
            "/api/v1/transaction",
            &json!({ "operations": [ack_op(&msgs[0]),
                { "type": "push", "items": [
                    { "queue": a, "partition": "p", "payload": { "from": "tx" },
                      "transactionId": "tx-push" } ] }] }),
        )
        .await;
    assert_eq!(code, StatusCode::OK, "{res}");
    assert_eq!(res["success"], true, "{res}");
    pop_empty(b2, &pop_path(b, None, "wait=false")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reference_series_count_a_known_workload_per_queue_and_across_replicas() {
    let db = TestDb::new().await.expect("test database");
    let b1 = replica(&db, "prom-1", &[]).await;
    // the second one shows one queue only: the busiest of the minute
    let b2 = replica(&db, "prom-2", &[("METRICS_QUEUE_SERIES_MAX", "1")]).await;
    let (a, b, idle) = (unique("prom-a"), unique("prom-b"), unique("prom-idle"));
    configure(&b1, &idle, json!({})).await;

    // the workload must fit in one minute: start it early in one
    if now_secs() % 60 > 40 {
        wait_for_minute_after(now_secs() / 60).await;
    }
    let minute = now_secs() / 60;
    workload(&b1, &b2, &a, &b).await;
    assert_eq!(
        now_secs() / 60,
        minute,
        "the workload ran over a minute's end"
    );

    // the minute is complete once it ended and both replicas flushed
    wait_for_minute_after(minute).await;
    sleep_ms(1_500).await;
    // a long poll parked on b now, through the first replica
    let parked = {
        let url = b1.url(&pop_path(&b, None, "wait=true&timeout=20000"));
        let http = b1.http.clone();
        tokio::spawn(async move { http.get(url).send().await.map(|r| r.status()) })
    };
    sleep_ms(1_000).await;

    let s1 = parse(&prometheus_text(&b1).await);
    let s2 = parse(&prometheus_text(&b2).await);
    assert_eq!(
        now_secs() / 60,
        minute + 1,
        "the scrape must read the workload's minute"
    );

    let q = |name: &str, queue: &str| value(&s1, name, &[("queue", queue)]);
    // a: 3 pushed on one replica and 1 by the transaction on the other;
    // 3 popped, acked 2 completed and 1 failed into the dead letters
    assert_eq!(q("queen_queue_push_messages_per_minute", &a), 4.0);
    assert_eq!(q("queen_queue_pop_messages_per_minute", &a), 3.0);
    assert_eq!(q("queen_queue_ack_per_minute", &a), 3.0);
    assert_eq!(q("queen_queue_pop_empty_per_minute", &a), 0.0);
    assert_eq!(q("queen_queue_transactions_per_minute", &a), 1.0);
    assert_eq!(q("queen_queue_parked_consumers", &a), 0.0);
    let lag = q("queen_queue_pop_lag_milliseconds", &a);
    assert!((0.0..60_000.0).contains(&lag), "pop lag of a: {lag}");
    // b: 3 pushed and popped, 2 acked in one request and 1 by the
    // transaction; one empty pop; one parked now
    assert_eq!(q("queen_queue_push_messages_per_minute", &b), 3.0);
    assert_eq!(q("queen_queue_pop_messages_per_minute", &b), 3.0);
    assert_eq!(q("queen_queue_ack_per_minute", &b), 3.0);
    assert_eq!(q("queen_queue_pop_empty_per_minute", &b), 1.0);
    assert_eq!(q("queen_queue_transactions_per_minute", &b), 1.0);
    assert_eq!(q("queen_queue_parked_consumers", &b), 1.0);
    // a queue without activity has no series
    for name in PER_QUEUE {
        assert_eq!(
            queues_of(&s1, name),
            BTreeSet::from([a.clone(), b.clone()]),
            "{name}"
        );
    }

    // the cluster totals, the same on both replicas
    let cluster = [("scope", "cluster")];
    for s in [&s1, &s2] {
        assert_eq!(value(s, "queen_cluster_push_messages_total", &cluster), 7.0);
        assert_eq!(value(s, "queen_cluster_push_requests_total", &cluster), 3.0);
        assert_eq!(value(s, "queen_cluster_pop_messages_total", &cluster), 6.0);
        assert_eq!(value(s, "queen_cluster_pop_requests_total", &cluster), 4.0);
        assert_eq!(value(s, "queen_cluster_ack_messages_total", &cluster), 6.0);
        assert_eq!(value(s, "queen_cluster_ack_requests_total", &cluster), 4.0);
        for (result, n) in [
            ("success", 5.0),
            ("failed", 0.0),
            ("dlq", 1.0),
            ("refused", 0.0),
        ] {
            let labels = [("scope", "cluster"), ("result", result)];
            assert_eq!(value(s, "queen_cluster_ack_total", &labels), n, "{result}");
        }
        assert_eq!(value(s, "queen_cluster_dlq_total", &cluster), 1.0);
        assert_eq!(value(s, "queen_cluster_transactions_total", &cluster), 1.0);
        assert!(value(s, "queen_cluster_db_errors_total", &cluster) >= 0.0);
        assert_eq!(value(s, "queen_dlq_depth", &cluster), 1.0);
        assert_eq!(value(s, "queen_servers", &[]), 2.0);
        assert!(value(s, "queen_process_resident_memory_bytes", &[]) > 0.0);
        assert!(value(s, "queen_uptime_seconds", &[]) >= 0.0);
        assert!(value(s, "queen_db_pool_size", &[]) > 0.0);
        assert_eq!(value(s, "queen_maintenance_mode_enabled", &[]), 0.0);
    }
    // METRICS_QUEUE_SERIES_MAX=1: the busiest queue only (b: 3 pushed, 3
    // popped, 3 acked, 1 empty pop, 1 transaction, 1 parked; a: 4, 3, 3, 0, 1, 0)
    for name in PER_QUEUE {
        assert_eq!(queues_of(&s2, name), BTreeSet::from([b.clone()]), "{name}");
    }
    // b's whole lease went through the one-statement ack path, and counted
    assert!(value(&s2, "queen_consume_statement_total", &[("op", "ack")]) >= 1.0);

    // the series the deploy/ files use are all exported
    let exported = exported_names(&s1);
    for (file, names) in deploy_metric_names() {
        let missing: Vec<&String> = names.iter().filter(|n| !exported.contains(*n)).collect();
        assert!(
            missing.is_empty(),
            "{file} uses series the broker does not export: {missing:?}"
        );
    }

    // docs/operations.md lists every series
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let ops = std::fs::read_to_string(root.join("docs/operations.md")).expect("operations.md");
    let undocumented: BTreeSet<&String> = s1
        .samples
        .iter()
        .map(|s| &s.metric)
        .filter(|m| {
            // a histogram's _sum and _count are listed under its name
            let base = ["_sum", "_count", "_bucket"]
                .iter()
                .find_map(|suffix| m.strip_suffix(suffix))
                .unwrap_or(m);
            !ops.contains(&format!("| `{m}` |")) && !ops.contains(&format!("| `{base}` |"))
        })
        .collect();
    assert!(
        undocumented.is_empty(),
        "series missing from the list in docs/operations.md: {undocumented:?}"
    );

    // a broker that stops leaves the count of servers
    drop(b2);
    let mut servers = 2.0;
    for _ in 0..50 {
        servers = value(&parse(&prometheus_text(&b1).await), "queen_servers", &[]);
        if servers == 1.0 {
            break;
        }
        sleep_ms(200).await;
    }
    assert_eq!(servers, 1.0, "the stopped broker deleted its presence row");
    parked.abort();

    // a broker started later (a restarted replica) answers the totals so
    // far, not zero: nothing goes backwards
    let b3 = replica(&db, "prom-3", &[]).await;
    let s3 = parse(&prometheus_text(&b3).await);
    for (name, n) in [
        ("queen_cluster_push_messages_total", 7.0),
        ("queen_cluster_pop_messages_total", 6.0),
        ("queen_cluster_ack_messages_total", 6.0),
        ("queen_cluster_dlq_total", 1.0),
    ] {
        assert_eq!(value(&s3, name, &cluster), n, "{name} on a new broker");
    }
}

/// Every sample name of `scrape`; a histogram gives its `_bucket`, `_sum`
/// and `_count` series.
fn exported_names(scrape: &Scrape) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for s in &scrape.samples {
        if matches!(s.value, PromValue::Histogram(_) | PromValue::Summary(_)) {
            for suffix in ["_bucket", "_sum", "_count"] {
                names.insert(format!("{}{suffix}", s.metric));
            }
        }
        names.insert(s.metric.clone());
    }
    names
}

/// The `queen_*` series named in a PromQL expression.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let bytes = expr.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b':';
    let mut i = 0;
    while i < bytes.len() {
        if ident(bytes[i]) {
            let start = i;
            while i < bytes.len() && ident(bytes[i]) {
                i += 1;
            }
            let word = &expr[start..i];
            let in_label_value = start > 0 && bytes[start - 1] == b'"';
            if word.starts_with("queen_") && !in_label_value {
                names.insert(word.to_owned());
            }
        } else {
            i += 1;
        }
    }
    names
}

/// The PromQL of `deploy/grafana/queen-dashboard.json` (every panel's
/// targets) and of `deploy/prometheus/alerts.yml` (every rule), parsed, with
/// the `queen_*` series each file names.
fn deploy_metric_names() -> HashMap<&'static str, BTreeSet<String>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("deploy/grafana/queen-dashboard.json"))
            .expect("dashboard file"),
    )
    .expect("the dashboard is JSON");
    let panels = dashboard["panels"].as_array().expect("panels");
    assert!(!panels.is_empty());
    let mut in_dashboard = BTreeSet::new();
    for p in panels.iter().filter(|p| p["type"] != "row") {
        let targets = p["targets"]
            .as_array()
            .unwrap_or_else(|| panic!("targets of {p}"));
        assert!(!targets.is_empty(), "panel without queries: {p}");
        for t in targets {
            let expr = t["expr"].as_str().unwrap_or_else(|| panic!("expr of {t}"));
            let names = metric_names(expr);
            assert!(!names.is_empty(), "a query on no queen series: {expr}");
            in_dashboard.extend(names);
        }
    }
    let alerts: serde_yaml_ng::Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(root.join("deploy/prometheus/alerts.yml")).expect("alerts file"),
    )
    .expect("the alert rules are YAML");
    let mut in_alerts = BTreeSet::new();
    let groups = alerts["groups"].as_sequence().expect("groups");
    assert!(!groups.is_empty());
    for g in groups {
        for rule in g["rules"].as_sequence().expect("rules") {
            assert!(
                rule["alert"].as_str().is_some(),
                "a rule without a name: {rule:?}"
            );
            let expr = rule["expr"].as_str().expect("expr");
            let names = metric_names(expr);
            assert!(!names.is_empty(), "a rule on no queen series: {expr}");
            in_alerts.extend(names);
        }
    }
    HashMap::from([
        ("deploy/grafana/queen-dashboard.json", in_dashboard),
        ("deploy/prometheus/alerts.yml", in_alerts),
    ])
}
