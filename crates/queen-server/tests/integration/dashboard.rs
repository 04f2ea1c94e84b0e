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

/// The API paths the script reads with `api("…")` (their static part).
fn api_paths(script: &str) -> Vec<String> {
    script
        .split("api(\"")
        .skip(1)
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
        ("/assets/app.js", "text/javascript", "function refresh"),
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
    let (_db, b) = setup().await;
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

    let (_, _, script) = fetch(&b, "/assets/app.js").await;
    let paths = api_paths(&script);
    assert!(paths.len() >= 5, "{paths:?}");
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
                "throughput.ingestedPerSecond",
                "throughput.processedPerSecond",
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
            "/api/v1/dlq?limit=20",
            &[
                "messages.[0].failedAt",
                "messages.[0].queue",
                "messages.[0].partition",
                "messages.[0].consumerGroup",
                "messages.[0].retryCount",
                "messages.[0].errorMessage",
            ],
        ),
    ];
    for (path, _) in fields {
        assert!(
            paths.iter().any(|p| p == path),
            "script no longer reads {path}"
        );
    }
    for path in &paths {
        let path = if path.ends_with('/') {
            format!("{path}{q}") // the queue detail: "/api/v1/resources/queues/" + name
        } else {
            path.clone()
        };
        let (status, body) = b.get(&path).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        let keys = fields
            .iter()
            .find(|(p, _)| *p == path)
            .map(|(_, k)| *k)
            .unwrap_or(&["name", "partitions.[0].name", "partitions.[0].stats.total"]);
        for key in keys {
            assert!(dig(&body, key).is_some(), "{path}: no {key} in {body}");
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
