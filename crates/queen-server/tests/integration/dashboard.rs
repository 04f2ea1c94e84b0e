//! The dashboard (feature `dashboard`): its files are served, public even
//! with JWT on, and every API route its script reads answers with the
//! fields the script uses.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::*;

/// `GET path` as text: status, content type, body.
async fn fetch(b: &queen_testkit::TestBroker, path: &str) -> (StatusCode, String, String) {
    let resp = b.http.get(b.url(path)).send().await.unwrap();
    let status = resp.status();
    let kind = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, kind, resp.text().await.unwrap())
}

/// The scripts of the page that call the API.
const SCRIPTS: &[&str] = &[
    "/assets/lib.js",
    "/assets/views.js",
    "/assets/actions.js",
    "/assets/system.js",
    "/assets/stores.js",
    "/assets/app.js",
];

/// The API paths the scripts read with `api("…")` (their static part;
/// calls that name a `method` act instead of reading, and are left out).
fn api_paths(script: &str) -> Vec<String> {
    script
        .split("api(\"")
        .skip(1)
        .filter(|rest| !rest.lines().next().unwrap_or("").contains("method:"))
        .filter_map(|rest| rest.split('"').next())
        .filter(|p| p.starts_with("/api/v1/"))
        .map(str::to_owned)
        .collect()
}

/// Follows a dotted path (`a.b`, `[0]` for a first element) into `v`.
fn dig<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(v, |v, key| match key {
        "[0]" => v.as_array()?.first(),
        k => v.get(k),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_and_its_files_are_served() {
    let (_db, b) = setup().await;
    for (path, kind, needle) in [
        ("/", "text/html", "/assets/app.js"),
        ("/dashboard", "text/html", "/assets/style.css"),
        ("/assets/app.js", "text/javascript", "async function render"),
        (
            "/assets/lib.js",
            "text/javascript",
            "function confirmAction",
        ),
        ("/assets/views.js", "text/javascript", "views.queue ="),
        (
            "/assets/actions.js",
            "text/javascript",
            "function deleteQueue",
        ),
        ("/assets/system.js", "text/javascript", "views.system ="),
        ("/assets/stores.js", "text/javascript", "views.kv ="),
        ("/assets/chart.js", "text/javascript", "function lineChart"),
        ("/assets/style.css", "text/css", "table"),
    ] {
        let (status, got, body) = fetch(&b, path).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        assert!(got.starts_with(kind), "{path}: {got}");
        assert!(body.contains(needle), "{path}");
    }
    // other unknown paths still answer JSON 404
    let (status, body) = b.get("/assets/nope.js").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body, json!({"error": "Not found"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_the_script_reads_answers_with_the_fields_it_uses() {
    let (_db, b) = setup_with(&[("STATS_INTERVAL_MS", "200")]).await;
    // a queue with a message, a consumer group and a dead letter
    let q = unique("dash");
    push_numbered(&b, &q, "p", "m", 2).await;
    let body = pop_ok(&b, &pop_path(&q, None, "batch=1&consumerGroup=g")).await;
    let r = ack(&b, &messages(&body)[0], "dlq", Some("boom")).await;
    assert_eq!(r["dlq"], true, "{r}");
    // and a stream query
    let (status, body) = b
        .post(
            "/streams/v1/queries",
            &json!({ "name": unique("dash-q"), "source_queue": q, "sink_queue": "out",
                     "config_hash": "h" }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _) = b.post("/api/v1/stats/refresh", &json!({})).await;
    assert_eq!(status, StatusCode::OK);
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;

    // a key and a timer for the Key/value and Timers views
    let (status, body) = b
        .post(
            "/api/v1/kv",
            &json!({"operations": [{"op": "put", "ns": "dash", "key": "k", "value": 1, "forever": true}]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = b
        .post(
            "/api/v1/timers",
            &json!({"operations": [{"op": "schedule", "queue": q, "timerKey": "t",
                                    "payload": "e30=", "delayMs": 3_600_000}]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let mut paths = Vec::new();
    for script in SCRIPTS {
        let (status, _, text) = fetch(&b, script).await;
        assert_eq!(status, StatusCode::OK, "{script}");
        paths.extend(api_paths(&text));
    }
    assert!(paths.len() >= 18, "{paths:?}");
    // the fields each answer must carry, as the script reads them
    let fields: &[(&str, &[&str])] = &[
        (
            "/api/v1/resources/overview",
            &[
                "queues",
                "partitions",
                "messages.total",
                "messages.pending",
                "messages.processing",
                "messages.completed",
                "messages.deadLetter",
            ],
        ),
        (
            "/api/v1/resources/queues",
            &[
                "queues.[0].name",
                "queues.[0].namespace",
                "queues.[0].task",
                "queues.[0].partitions",
                "queues.[0].messages.total",
                "queues.[0].messages.pending",
                "queues.[0].messages.processing",
            ],
        ),
        (
            "/api/v1/consumer-groups",
            &[
                "[0].name",
                "[0].queueName",
                "[0].members",
                "[0].partitionsWithLag",
                "[0].maxTimeLag",
                "[0].state",
                "[0].subscriptionMode",
            ],
        ),
        (
            "/api/v1/streams/queries",
            &[
                "queries.[0].name",
                "queries.[0].sourceQueue",
                "queries.[0].sinkQueue",
                "queries.[0].stateRows",
                "queries.[0].lag",
            ],
        ),
        (
            "/api/v1/dlq?limit=100",
            &[
                "total",
                "messages.[0].failedAt",
                "messages.[0].queue",
                "messages.[0].partition",
                "messages.[0].partitionId",
                "messages.[0].transactionId",
                "messages.[0].consumerGroup",
                "messages.[0].retryCount",
                "messages.[0].errorMessage",
                "messages.[0].data",
            ],
        ),
        (
            "/api/v1/analytics/queue-ops?interval=1m&from=",
            &[
                "totals.pushed",
                "totals.acked",
                "queues.[0].points.[0].timestamp",
                "queues.[0].points.[0].pushedPerSecond",
                "queues.[0].points.[0].poppedPerSecond",
                "queues.[0].points.[0].ackedPerSecond",
            ],
        ),
        (
            "/api/v1/analytics/queue-lag?interval=1m&from=",
            &[
                "queues.[0].points.[0].timestamp",
                "queues.[0].points.[0].lagSeconds",
            ],
        ),
        (
            "/api/v1/analytics/worker-metrics?interval=1h&from=",
            &[
                "workers.[0].workerId",
                "workers.[0].lastSeen",
                "workers.[0].totals.pushed",
                "workers.[0].totals.popped",
                "workers.[0].totals.acked",
            ],
        ),
        (
            "/api/v1/system/maintenance",
            &["maintenanceMode", "bufferedMessages", "bufferHealthy"],
        ),
        ("/api/v1/system/maintenance/pop", &["popMaintenanceMode"]),
        ("/api/v1/system/shared-state", &["enabled"]),
        (
            "/api/v1/resources/queues/",
            &["name", "partitions.[0].name", "partitions.[0].stats.total"],
        ),
        (
            "/api/v1/status/queues/",
            &["queue.config", "queue.options.leaseTime"],
        ),
        (
            "/api/v1/analytics/postgres-stats",
            &[
                "database.version",
                "database.name",
                "database.sizeBytes",
                "database.connections.total",
                "database.connections.serverTotal",
                "database.connections.max",
                "database.cacheHitRatio",
                "database.longestTransaction",
                "database.replication",
            ],
        ),
        (
            "/api/v1/analytics/system-metrics",
            &[
                "points.[0].workerId",
                "points.[0].dbPool.open",
                "process.rssBytes",
                "process.cpuPercent",
                "process.threads",
                "spool.pending",
                "spool.bytes",
            ],
        ),
        (
            "/api/v1/analytics/worker-metrics?interval=1m&from=",
            &[
                "timeSeries.[0].workerId",
                "timeSeries.[0].maxEventLoopLagMs",
                "timeSeries.[0].avgCpuPercent",
                "timeSeries.[0].dbPoolActive",
                "timeSeries.[0].maxRssBytes",
            ],
        ),
        (
            "/api/v1/kv/namespaces",
            &["namespaces.[0].ns", "namespaces.[0].keys"],
        ),
        (
            "/api/v1/timers",
            &[
                "queues.[0].queue",
                "queues.[0].timers",
                "queues.[0].nextDeliverAt",
            ],
        ),
    ];
    for (path, _) in fields {
        assert!(
            paths.iter().any(|p| p == path),
            "script no longer reads {path}"
        );
    }
    let from = (chrono::Utc::now() - chrono::Duration::hours(1))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    for path in &paths {
        // complete the dynamic part as the script does
        let url = if path.ends_with("from=") {
            format!("{path}{}", from.replace('+', "%2B"))
        } else if path.ends_with('/') {
            format!("{path}{q}")
        } else if path.ends_with('?') {
            format!("{path}queue={q}")
        } else if path.ends_with('=') {
            format!("{path}{q}")
        } else {
            path.clone()
        };
        let (status, body) = b.get(&url).await;
        assert_eq!(status, StatusCode::OK, "{url}: {body}");
        if let Some((_, keys)) = fields.iter().find(|(p, _)| p == path) {
            for key in *keys {
                assert!(dig(&body, key).is_some(), "{url}: no {key} in {body}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_jwt_on_the_page_is_public_and_the_data_needs_a_token() {
    let (_db, b) = setup_with(&[("JWT_ENABLED", "true"), ("JWT_SECRET", "s")]).await;
    let (status, _, _) = fetch(&b, "/").await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, _) = fetch(&b, "/assets/app.js").await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = b.get("/api/v1/resources/overview").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_stats_and_system_metrics_report_the_database_and_the_process() {
    let (db, b) = setup().await;
    // a transaction left open on another connection
    let open = db.client().await.unwrap();
    open.batch_execute("BEGIN; SELECT 1").await.unwrap();
    let pid: i32 = open
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;

    let (status, pg) = b.get("/api/v1/analytics/postgres-stats").await;
    assert_eq!(status, StatusCode::OK, "{pg}");
    assert_keys(&pg, &["pool", "messages", "partitions", "database"]);
    let d = &pg["database"];
    assert_keys(
        d,
        &[
            "version",
            "name",
            "sizeBytes",
            "inRecovery",
            "connections",
            "cacheHitRatio",
            "longestTransaction",
            "replication",
        ],
    );
    assert_eq!(d["name"], db.name.as_str(), "{d}");
    assert!(d["sizeBytes"].as_i64().unwrap() > 1_000_000, "{d}");
    assert_eq!(d["inRecovery"], false);
    let c = &d["connections"];
    let total = c["total"].as_i64().unwrap();
    assert!(total >= 2, "the broker's and the open one: {c}");
    assert!(c["serverTotal"].as_i64().unwrap() >= total, "{c}");
    assert!(
        c["max"].as_i64().unwrap() >= c["serverTotal"].as_i64().unwrap(),
        "{c}"
    );
    assert!(c["idleInTransaction"].as_i64().unwrap() >= 1, "{c}");
    // null until the server has flushed this database's first statistics
    if let Some(ratio) = d["cacheHitRatio"].as_f64() {
        assert!(ratio > 0.0 && ratio <= 1.0, "{d}");
    } else {
        assert_eq!(d["cacheHitRatio"], Value::Null, "{d}");
    }
    // the open transaction is the oldest (or an older one of another test is)
    let lt = &d["longestTransaction"];
    assert!(lt["seconds"].as_f64().unwrap() >= 1.0, "{lt}");
    let (_, again) = b.get("/api/v1/analytics/postgres-stats").await;
    let mine = again["database"]["longestTransaction"]["pid"].as_i64() == Some(i64::from(pid));
    let older = again["database"]["longestTransaction"]["seconds"]
        .as_f64()
        .unwrap()
        >= 1.1;
    assert!(mine || older, "{again}");
    // no standby streams from the test server
    assert_eq!(d["replication"], json!([]));
    open.batch_execute("ROLLBACK").await.unwrap();

    let (status, sys) = b.get("/api/v1/analytics/system-metrics").await;
    assert_eq!(status, StatusCode::OK, "{sys}");
    assert_keys(&sys, &["points", "process", "spool"]);
    let p = &sys["process"];
    // the broker runs inside this test process
    assert_eq!(p["pid"], std::process::id(), "{p}");
    assert!(p["rssBytes"].as_u64().unwrap() > 1_000_000, "{p}");
    assert!(p["threads"].as_u64().unwrap() >= 2, "{p}");
    let cpu = p["cpuUserSeconds"].as_f64().unwrap() + p["cpuSystemSeconds"].as_f64().unwrap();
    assert!(cpu > 0.0, "{p}");
    assert!(p["cpuPercent"].as_f64().unwrap() >= 0.0, "{p}");
    assert_eq!(sys["spool"]["pending"], 0, "{sys}");
    assert_eq!(sys["spool"]["writable"], true, "{sys}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_metrics_carry_each_replicas_health_rows() {
    let (db, b) = setup_with(&[
        ("STATS_INTERVAL_MS", "200"),
        ("QUEEN_SERVER_ID", "health-replica"),
    ])
    .await;
    let q = unique("health");
    push_numbered(&b, &q, "p", "m", 9).await;
    let body = pop_ok(&b, &pop_path(&q, None, "batch=4&consumerGroup=g")).await;
    ack_all_completed(&b, &body, Some("g")).await;
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;

    let client = db.client().await.unwrap();
    let rows = count(
        &client,
        "SELECT count(*) FROM queen.replica_health WHERE server_id = 'health-replica'",
    )
    .await;
    assert!(rows >= 3, "{rows} health rows");

    let (status, wm) = b.get("/api/v1/analytics/worker-metrics?interval=7d").await;
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
    let rows = wm["timeSeries"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "one replica, one week bucket: {wm}");
    let r = &rows[0];
    assert_keys(
        r,
        &[
            "timestamp",
            "hostname",
            "workerId",
            "avgEventLoopLagMs",
            "maxEventLoopLagMs",
            "avgCpuPercent",
            "maxCpuPercent",
            "maxRssBytes",
            "dbPoolSize",
            "dbPoolActive",
            "dbConnections",
            "dbPoolWaiting",
            "spoolPending",
            "pushMessageCount",
            "popMessageCount",
            "ackMessageCount",
            "samples",
        ],
    );
    assert_eq!(r["workerId"], "health-replica");
    assert_eq!(r["hostname"], "health-replica");
    // a timer of 100 ms never fires early, and the runtime's timer wheel
    // has a granularity of a millisecond: the lag is never zero
    assert!(r["maxEventLoopLagMs"].as_f64().unwrap() > 0.0, "{r}");
    assert!(r["avgEventLoopLagMs"].as_f64().unwrap() > 0.0, "{r}");
    assert!(
        r["maxEventLoopLagMs"].as_f64().unwrap() >= r["avgEventLoopLagMs"].as_f64().unwrap(),
        "{r}"
    );
    assert!(r["avgCpuPercent"].as_f64().unwrap() > 0.0, "{r}");
    assert!(r["maxCpuPercent"].as_f64().unwrap() >= r["avgCpuPercent"].as_f64().unwrap());
    assert!(r["maxRssBytes"].as_i64().unwrap() > 1_000_000, "{r}");
    assert!(r["dbPoolSize"].as_i64().unwrap() > 0, "{r}");
    assert!(r["dbConnections"].as_i64().unwrap() > 0, "{r}");
    assert_eq!(r["pushMessageCount"], 9, "{r}");
    assert_eq!(r["popMessageCount"], 4, "{r}");
    assert_eq!(r["ackMessageCount"], 4, "{r}");
    assert!(r["samples"].as_i64().unwrap() >= 3, "{r}");
    // the replica filter applies to the health rows too
    let (_, other) = b
        .get("/api/v1/analytics/worker-metrics?workerId=someone-else")
        .await;
    assert_eq!(other["timeSeries"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn analytics_and_status_filter_by_namespace_and_task() {
    let (_db, b) = setup_with(&[("STATS_INTERVAL_MS", "3600000")]).await;
    let (ns_a, ns_b) = (unique("nsa"), unique("nsb"));
    let (qa, qb, qc) = (unique("qa"), unique("qb"), unique("qc"));
    for (queue, ns, task) in [
        (&qa, &ns_a, "mail"),
        (&qb, &ns_a, "sms"),
        (&qc, &ns_b, "mail"),
    ] {
        let (status, body) = b
            .post(
                "/api/v1/configure",
                &json!({"queue": queue, "namespace": ns, "task": task, "options": {}}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    push_numbered(&b, &qa, "p", "a", 3).await;
    push_numbered(&b, &qb, "p", "b", 5).await;
    push_numbered(&b, &qc, "p", "c", 7).await;
    let (status, _) = b.post("/api/v1/stats/refresh", &json!({})).await;
    assert_eq!(status, StatusCode::OK);

    let queues_of = |v: &Value| -> Vec<String> {
        let mut names: Vec<String> = v["queues"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["queue"].as_str().unwrap().to_owned())
            .collect();
        names.sort();
        names
    };
    let (_, ops) = b
        .get(&format!("/api/v1/analytics/queue-ops?namespace={ns_a}"))
        .await;
    let mut want = vec![qa.clone(), qb.clone()];
    want.sort();
    assert_eq!(queues_of(&ops), want, "{ops}");
    assert_eq!(ops["totals"]["pushed"], 8, "{ops}");
    let (_, ops) = b
        .get(&format!(
            "/api/v1/analytics/queue-ops?namespace={ns_a}&task=mail"
        ))
        .await;
    assert_eq!(queues_of(&ops), vec![qa.clone()], "{ops}");
    let (_, lag) = b.get("/api/v1/analytics/queue-lag?task=sms").await;
    assert_eq!(queues_of(&lag), vec![qb.clone()], "{lag}");

    let (status, an) = b
        .get(&format!(
            "/api/v1/status/analytics?interval=minute&namespace={ns_a}"
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{an}");
    assert_eq!(sum(&an["dataPoints"], "messages"), 8, "{an}");
    let (_, an) = b
        .get(&format!(
            "/api/v1/status/analytics?interval=hour&namespace={ns_b}&task=mail"
        ))
        .await;
    assert_eq!(sum(&an["dataPoints"], "messages"), 7, "{an}");
    let (_, st) = b.get(&format!("/api/v1/status?namespace={ns_b}")).await;
    assert_eq!(st["messages"]["total"], 7, "{st}");
    assert_eq!(sum(&st["throughput"], "ingested"), 7, "{st}");
    // a namespace no queue has: nothing
    let (_, none) = b.get("/api/v1/analytics/queue-ops?namespace=nobody").await;
    assert_eq!(none["queues"], json!([]));
}

fn sum(points: &Value, key: &str) -> i64 {
    points
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[key].as_i64().unwrap())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kv_namespaces_keys_and_timer_queues_are_listed() {
    let (_db, b) = setup().await;
    let ns = format!("dash-{}", unique("kv").to_lowercase().replace('_', "-"));
    let ns = &ns[..ns.len().min(60)];
    let (status, body) = b
        .post(
            "/api/v1/kv",
            &json!({"operations": [
                {"op": "put", "ns": ns, "key": "b", "value": {"x": 1}, "forever": true},
                {"op": "put", "ns": ns, "key": "a", "value": "first", "ttlSeconds": 600},
                {"op": "put", "ns": ns, "key": "c", "value": [1, 2], "forever": true},
            ]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");

    let (status, list) = b.get("/api/v1/kv/namespaces").await;
    assert_eq!(status, StatusCode::OK, "{list}");
    let mine = list["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["ns"] == ns)
        .unwrap_or_else(|| panic!("{ns} not in {list}"));
    assert_eq!(mine["keys"], 3, "{mine}");
    assert!(mine["nextExpiry"].is_string(), "{mine}");

    let (status, page) = b.get(&format!("/api/v1/kv/keys?ns={ns}&limit=2")).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_keys(&page, &["ns", "rows", "truncated", "nextAfter"]);
    let rows = page["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["key"], "a");
    assert_eq!(rows[0]["value"], "first");
    assert!(rows[0]["expiresAt"].is_string());
    assert_eq!(rows[1]["key"], "b");
    assert_eq!(rows[1]["value"], json!({"x": 1}));
    assert_eq!(rows[1]["expiresAt"], Value::Null);
    assert!(rows[1]["version"].as_i64().unwrap() > 0);
    assert_eq!(page["truncated"], true);
    assert_eq!(page["nextAfter"], "b");
    let (_, rest) = b
        .get(&format!("/api/v1/kv/keys?ns={ns}&limit=2&after=b"))
        .await;
    assert_eq!(rest["rows"][0]["key"], "c");
    assert_eq!(rest["rows"][0]["value"], json!([1, 2]));
    assert_eq!(rest["truncated"], false);
    assert_eq!(rest["nextAfter"], Value::Null);
    // a deleted key is gone from the listing
    let (status, _) = b
        .post(
            "/api/v1/kv",
            &json!({"operations": [{"op": "delete", "ns": ns, "key": "c"}]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (_, rest) = b.get(&format!("/api/v1/kv/keys?ns={ns}&after=b")).await;
    assert_eq!(rest["rows"], json!([]));

    for bad in [
        "/api/v1/kv/keys",
        "/api/v1/kv/keys?ns=",
        "/api/v1/kv/keys?ns=Upper",
        "/api/v1/kv/keys?ns=ok&limit=ten",
    ] {
        let (status, body) = b.get(bad).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
        assert_eq!(body["error"], "kv_bad_request", "{bad}: {body}");
    }

    let tq = unique("timers");
    let (status, body) = b
        .post(
            "/api/v1/timers",
            &json!({"operations": [
                {"op": "schedule", "queue": tq, "timerKey": "once", "payload": "e30=", "delayMs": 3_600_000},
                {"op": "schedule", "queue": tq, "timerKey": "tick", "payload": "e30=", "intervalMs": 60_000},
            ]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, timers) = b.get("/api/v1/timers").await;
    assert_eq!(status, StatusCode::OK, "{timers}");
    let row = timers["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["queue"] == tq.as_str())
        .unwrap_or_else(|| panic!("{tq} not in {timers}"));
    assert_eq!(row["timers"], 2, "{row}");
    assert_eq!(row["recurring"], 1, "{row}");
    assert!(
        is_utc_timestamp(row["nextDeliverAt"].as_str().unwrap(), 6),
        "{row}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_status_carries_every_option() {
    let (_db, b) = setup().await;
    let q = unique("opts");
    let echoed = configure(
        &b,
        &q,
        json!({"leaseTime": 120, "retryLimit": 7, "deadLetterQueue": true}),
    )
    .await;
    let (status, body) = b.get(&format!("/api/v1/status/queues/{q}")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["queue"]["options"], echoed["options"], "{body}");
    assert_eq!(body["queue"]["options"]["leaseTime"], 120);
    assert_eq!(body["queue"]["options"]["deadLetterQueue"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_stats_list_a_streaming_standby_with_its_lag() {
    assert!(
        queen_testkit::pg_bin_dir().is_some(),
        "no PostgreSQL binaries on this machine: set QUEEN_PG_BIN"
    );
    let primary = queen_testkit::PrivatePg::primary()
        .await
        .expect("private primary");
    let standby = primary.sync_standby().await.expect("synchronous standby");
    let url = format!("postgresql://postgres@127.0.0.1:{}/postgres", primary.port);
    let env = [
        ("DATABASE_URL", url.as_str()),
        ("HOST", "127.0.0.1"),
        ("LOG_LEVEL", "warn"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let b = queen_testkit::TestBroker::start_env(env)
        .await
        .expect("broker");
    b.wait_healthy(std::time::Duration::from_secs(60))
        .await
        .expect("healthy");
    // writes that the standby replays
    push_numbered(&b, &unique("standby"), "p", "m", 5).await;

    let (status, pg) = b.get("/api/v1/analytics/postgres-stats").await;
    assert_eq!(status, StatusCode::OK, "{pg}");
    let d = &pg["database"];
    assert_eq!(d["inRecovery"], false, "{d}");
    let standbys = d["replication"].as_array().unwrap();
    assert_eq!(standbys.len(), 1, "{d}");
    let s = &standbys[0];
    assert_keys(
        s,
        &[
            "application",
            "clientAddr",
            "state",
            "syncState",
            "replayLagSeconds",
            "lagBytes",
        ],
    );
    assert_eq!(s["state"], "streaming", "{s}");
    assert_eq!(s["syncState"], "sync", "{s}");
    assert_eq!(s["clientAddr"], "127.0.0.1", "{s}");
    assert!(s["lagBytes"].as_i64().unwrap() >= 0, "{s}");
    // null while the standby is idle and caught up, else a duration
    assert!(
        s["replayLagSeconds"].is_null() || s["replayLagSeconds"].as_f64().unwrap() >= 0.0,
        "{s}"
    );
    drop(standby);
}
