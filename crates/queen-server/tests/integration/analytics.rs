//! `/api/v1/analytics/*` over the metrics history: shapes, and the numbers of
//! a known workload (samples written on demand by `POST /api/v1/stats/refresh`,
//! the stats job itself slowed down so it adds none).

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::*;

/// A stats interval long enough that the job never samples during a test.
const NO_JOB: (&str, &str) = ("STATS_INTERVAL_MS", "3600000");

fn sum(points: &Value, key: &str) -> i64 {
    points
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[key].as_i64().unwrap())
        .sum()
}

async fn refresh(b: &queen_testkit::TestBroker) {
    let (status, body) = b.post("/api/v1/stats/refresh", &json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_ops_and_lag_count_a_known_workload() {
    let (_db, b) = setup_with(&[NO_JOB]).await;
    let q = unique("ops");
    let other = unique("ops-other");
    push_numbered(&b, &q, "p1", "m", 10).await;
    push_numbered(&b, &other, "p1", "o", 3).await;
    refresh(&b).await;

    // 6 popped and acked, then 2 popped and left in flight
    let body = pop_ok(&b, &pop_path(&q, None, "batch=6&consumerGroup=g")).await;
    assert_eq!(messages(&body).len(), 6);
    for m in messages(&body) {
        ack(&b, &m, "completed", None).await;
    }
    let body = pop_ok(&b, &pop_path(&q, None, "batch=2&consumerGroup=g")).await;
    assert_eq!(messages(&body).len(), 2);
    refresh(&b).await;

    let (status, ops) = b
        .get(&format!(
            "/api/v1/analytics/queue-ops?queue={q}&interval=10s"
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{ops}");
    assert_keys(
        &ops,
        &["timeRange", "interval", "bucketSeconds", "queues", "totals"],
    );
    assert_eq!(ops["bucketSeconds"], 10);
    assert_eq!(ops["interval"], "10s");
    let queues = ops["queues"].as_array().unwrap();
    assert_eq!(queues.len(), 1, "the queue filter holds: {ops}");
    let series = &queues[0];
    assert_eq!(series["queue"], q.as_str());
    assert_eq!(
        series["totals"],
        json!({"pushed": 10, "popped": 8, "acked": 6, "deadLettered": 0})
    );
    assert_eq!(ops["totals"], series["totals"]);
    let points = &series["points"];
    assert_eq!(sum(points, "pushed"), 10);
    assert_eq!(sum(points, "popped"), 8);
    assert_eq!(sum(points, "acked"), 6);
    let p0 = &points[0];
    assert_keys(
        p0,
        &[
            "timestamp",
            "pushed",
            "popped",
            "acked",
            "deadLettered",
            "pushedPerSecond",
            "poppedPerSecond",
            "ackedPerSecond",
        ],
    );
    assert!(
        is_utc_timestamp(p0["timestamp"].as_str().unwrap(), 3),
        "{p0}"
    );
    let rate = p0["pushedPerSecond"].as_f64().unwrap();
    assert!(
        (rate - p0["pushed"].as_f64().unwrap() / 10.0).abs() < 1e-9,
        "{p0}"
    );

    // without a filter both queues are there
    let (_, all) = b.get("/api/v1/analytics/queue-ops?interval=hour").await;
    let names: Vec<&str> = all["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["queue"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&q.as_str()) && names.contains(&other.as_str()),
        "{all}"
    );
    assert_eq!(all["totals"]["pushed"], 13);

    let (status, lag) = b
        .get(&format!(
            "/api/v1/analytics/queue-lag?queue={q}&interval=minute"
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{lag}");
    assert_keys(&lag, &["timeRange", "interval", "bucketSeconds", "queues"]);
    let current = &lag["queues"][0]["current"];
    assert_eq!(current["pending"], 2, "{lag}");
    assert_eq!(current["processing"], 2, "{lag}");
    assert_eq!(current["offsetLag"], 4, "{lag}");
    assert!(current["lagSeconds"].as_f64().unwrap() >= 0.0, "{lag}");
    assert_keys(
        current,
        &[
            "timestamp",
            "lagSeconds",
            "avgLagSeconds",
            "offsetLag",
            "pending",
            "processing",
        ],
    );

    // a window before anything happened is empty, not an error
    let (status, empty) = b
        .get("/api/v1/analytics/queue-ops?from=2020-01-01T00:00:00Z&to=2020-01-01T01:00:00Z")
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(empty["queues"], json!([]));
    assert_eq!(empty["timeRange"]["from"], "2020-01-01T00:00:00.000Z");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_count_in_the_history() {
    let (_db, b) = setup_with(&[NO_JOB]).await;
    let q = unique("ops-dlq");
    push_numbered(&b, &q, "p", "m", 2).await;
    let body = pop_ok(&b, &pop_path(&q, None, "batch=1&consumerGroup=g")).await;
    let r = ack(&b, &messages(&body)[0], "dlq", Some("boom")).await;
    assert_eq!(r["dlq"], true, "{r}");
    refresh(&b).await;
    let (_, ops) = b
        .get(&format!("/api/v1/analytics/queue-ops?queue={q}"))
        .await;
    assert_eq!(ops["totals"]["deadLettered"], 1, "{ops}");
    assert_eq!(ops["totals"]["pushed"], 2, "{ops}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_windows_and_intervals_are_refused() {
    let (_db, b) = setup_with(&[NO_JOB]).await;
    for route in [
        "queue-ops",
        "queue-lag",
        "worker-metrics",
        "queue-parked-replicas",
    ] {
        for query in [
            "interval=5x",
            "interval=0",
            "interval=week",
            "from=2025-02-01T00:00:00Z&to=2025-01-01T00:00:00Z",
            "from=not-a-date",
            "interval=1s&from=2020-01-01T00:00:00Z&to=2021-01-01T00:00:00Z",
        ] {
            let (status, body) = b.get(&format!("/api/v1/analytics/{route}?{query}")).await;
            assert_error(status, &body, StatusCode::BAD_REQUEST);
        }
    }
    let (status, body) = b
        .get("/api/v1/analytics/retention?from=2025-02-01&to=2025-01-01")
        .await;
    assert_error(status, &body, StatusCode::BAD_REQUEST);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_metrics_and_parked_replicas_come_from_the_stats_job() {
    let (_db, b) = setup_with(&[
        ("STATS_INTERVAL_MS", "200"),
        ("QUEEN_SERVER_ID", "analytics-replica"),
    ])
    .await;
    let q = unique("wm");
    let parked = unique("parked");
    push_numbered(&b, &q, "p", "m", 7).await;
    // a long poll parked on an empty queue while the job samples
    let poller = {
        let http = b.http.clone();
        let url = b.url(&pop_path(&parked, None, "wait=true&timeout=3000"));
        tokio::spawn(async move { http.get(url).send().await.map(|r| r.status()) })
    };
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let (status, wm) = b.get("/api/v1/analytics/worker-metrics?interval=1h").await;
    assert_eq!(status, StatusCode::OK, "{wm}");
    assert_keys(
        &wm,
        &[
            "timeRange",
            "interval",
            "bucketSeconds",
            "workers",
            "timeSeries",
        ],
    );
    let workers = wm["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 1, "{wm}");
    let w = &workers[0];
    assert_eq!(w["workerId"], "analytics-replica");
    assert_eq!(w["totals"]["pushed"], 7, "{wm}");
    assert!(w["points"][0]["samples"].as_i64().unwrap() >= 2, "{wm}");
    let (_, filtered) = b
        .get("/api/v1/analytics/worker-metrics?workerId=someone-else")
        .await;
    assert_eq!(filtered["workers"], json!([]));

    let (status, pr) = b
        .get(&format!(
            "/api/v1/analytics/queue-parked-replicas?queue={parked}&interval=10s"
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{pr}");
    assert_keys(&pr, &["timeRange", "interval", "bucketSeconds", "queues"]);
    let series = &pr["queues"][0];
    assert_eq!(series["queue"], parked.as_str(), "{pr}");
    assert_eq!(series["maxReplicas"], 1, "{pr}");
    assert_eq!(
        series["points"][0]["replicas"],
        json!(["analytics-replica"])
    );
    assert_eq!(poller.await.unwrap().unwrap(), StatusCode::NO_CONTENT);

    // the gated history writer ran too (the job, not a refresh)
    let (_, ops) = b
        .get(&format!("/api/v1/analytics/queue-ops?queue={q}"))
        .await;
    assert_eq!(ops["totals"]["pushed"], 7, "{ops}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_lists_policies_and_job_runs() {
    let (db, b) = setup_with(&[NO_JOB]).await;
    let q = unique("ret");
    configure(
        &b,
        &q,
        json!({"retentionEnabled": true, "retentionSeconds": 600, "completedRetentionSeconds": 60}),
    )
    .await;
    push_numbered(&b, &q, "p", "m", 4).await;
    let client = db.client().await.unwrap();
    client
        .execute(
            "INSERT INTO queen.job_runs (job, cycle, server_id, finished_at, affected)
             VALUES ('retention', 1, 'r1', now(), 5), ('eviction', 2, 'r1', now(), 3),
                    ('planner', 3, 'r1', now(), 9)",
            &[],
        )
        .await
        .unwrap();
    let (status, r) = b
        .get(&format!("/api/v1/analytics/retention?queue={q}"))
        .await;
    assert_eq!(status, StatusCode::OK, "{r}");
    assert_keys(
        &r,
        &[
            "timeRange",
            "metricsRetentionDays",
            "policies",
            "runs",
            "totals",
        ],
    );
    assert_eq!(
        r["policies"],
        json!([{"queue": q, "retentionEnabled": true, "retentionSeconds": 600,
                "completedRetentionSeconds": 60, "ttl": 0, "storedMessages": 4}])
    );
    assert_eq!(
        r["totals"],
        json!({"runs": 2, "retentionDeleted": 5, "evicted": 3})
    );
    assert_eq!(r["metricsRetentionDays"], 90);
}
