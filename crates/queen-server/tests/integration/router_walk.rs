//! Every route of the router, read from its source, sent hostile input:
//! path segments with NUL, dot segments, numbers past any range and long
//! names; query strings of wrong types; bodies that are not JSON, nest too
//! deep, hold NUL or numbers past a double. No answer may be a 5xx, every
//! 4xx carries a JSON `error` string, and a refused request writes nothing.

use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::common::*;

/// (method, path) of every route in `http/mod.rs`.
fn routes() -> Vec<(Method, String)> {
    let src = include_str!("../../src/http/mod.rs");
    let mut out = Vec::new();
    for chunk in src.split(".route(").skip(1) {
        let Some(start) = chunk.find('"') else {
            continue;
        };
        let rest = &chunk[start + 1..];
        let Some(end) = rest.find('"') else { continue };
        let path = &rest[..end];
        // the handlers of this route, up to the call's closing parenthesis
        let call = &rest[end..];
        let call = &call[..call.find(")\n").map_or(call.len(), |i| i + 1)];
        for (token, method) in [
            ("get(", Method::GET),
            ("post(", Method::POST),
            ("delete(", Method::DELETE),
            ("put(", Method::PUT),
        ] {
            if call.contains(token) {
                out.push((method, path.to_owned()));
            }
        }
    }
    out
}

/// Values put in the place of a path parameter (already percent-encoded).
const PATH_VALUES: &[&str] = &[
    "a%00b",
    "%2e%2e",
    "99999999999999999999999999",
    "%F0%28%8C%28",
];

/// Query strings of wrong types and ranges.
const QUERIES: &[&str] = &[
    "",
    "batch=-1&timeout=99999999999999999999999&wait=maybe&partitions=%00&consumerGroup=a%00b&limit=-5&offset=abc&page=1e999&from=notadate&to=%00&namespace=%00&task=..&group=%00&minLagSeconds=-9",
    "autopilot=true&conflation=true&autoAck=true&batch=0&partitions=99999999999",
];

/// Bodies that must be refused or ignored, never a 5xx.
fn bodies() -> Vec<Vec<u8>> {
    let deep = format!("{}{}", "[".repeat(5_000), "]".repeat(5_000));
    vec![
        b"not json".to_vec(),
        b"{}".to_vec(),
        br#"{"queue":"a\u0000b","items":[{"queue":"q\u0000","payload":"x\u0000"}],"name":"\u0000","ns":"\u0000","key":"\u0000"}"#.to_vec(),
        br#"{"queue":"q","items":[{"queue":"q","payload":1e400}],"delta":1e400,"delayMs":-1e400,"timeout":1e400}"#.to_vec(),
        deep.into_bytes(),
        br#"[{"transactionId":"\u0000","partitionId":"..","leaseId":"%00"}]"#.to_vec(),
    ]
}

/// One query that counts the rows of every table of schema `queen` a
/// request could write (background bookkeeping tables left out).
async fn fingerprint_sql(client: &tokio_postgres::Client) -> String {
    let tables: Vec<String> = texts(
        client,
        "SELECT table_name FROM information_schema.tables
         WHERE table_schema = 'queen' AND table_type = 'BASE TABLE'
           AND table_name NOT IN ('metrics_history', 'replica_stats', 'job_runs',
                                  'schema_history', 'function_history', 'system_state',
                                  'cluster_counters', 'queue_activity',
                                  'replica_presence', 'replica_health')
         ORDER BY 1",
    )
    .await;
    let parts: Vec<String> = tables
        .iter()
        .map(|t| format!("'{t}=' || (SELECT count(*) FROM queen.{t})"))
        .collect();
    format!("SELECT {}", parts.join(" || ' ' || "))
}

async fn fingerprint(client: &tokio_postgres::Client, sql: &str) -> String {
    client.query_one(sql, &[]).await.unwrap().get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_refuses_hostile_input_cleanly() {
    let (db, b) = setup().await;
    let client = db.client().await.unwrap();
    // something to find, so that routes reach past their lookups
    push_numbered(&b, "walk", "p", "w", 3).await;
    let routes = routes();
    assert!(routes.len() >= 70, "the router was not read: {routes:?}");
    let sql = fingerprint_sql(&client).await;
    let mut known = fingerprint(&client, &sql).await;
    let mut failures = Vec::new();
    let mut sent = 0;
    let mut refused = 0;
    for (method, pattern) in &routes {
        // the migration routes start a copy with pg_dump: their refusals are
        // tested in migration.rs; the dashboard serves files
        if pattern.starts_with("/api/v1/migration") || pattern == "/" {
            continue;
        }
        let values: Vec<&str> = if pattern.contains('{') {
            PATH_VALUES.to_vec()
        } else {
            vec![""]
        };
        for value in values {
            let path = fill(pattern, value);
            for query in QUERIES {
                let url = if query.is_empty() {
                    b.url(&path)
                } else {
                    b.url(&format!("{path}?{query}"))
                };
                let bodies = if *method == Method::GET {
                    vec![Vec::new()]
                } else {
                    bodies()
                };
                for body in bodies {
                    let r = b
                        .http
                        .request(method.clone(), &url)
                        .header("content-type", "application/json")
                        .body(body.clone())
                        .send()
                        .await
                        .unwrap();
                    sent += 1;
                    let status = r.status();
                    let text = r.text().await.unwrap_or_default();
                    let what = format!(
                        "{method} {url} body {:?} -> {status} {}",
                        String::from_utf8_lossy(&body[..body.len().min(80)]),
                        &text[..text.len().min(200)]
                    );
                    if status.is_server_error() {
                        failures.push(what);
                        continue;
                    }
                    if status.is_client_error() && status != StatusCode::METHOD_NOT_ALLOWED {
                        refused += 1;
                        let error = serde_json::from_str::<Value>(&text)
                            .ok()
                            .and_then(|v| v["error"].as_str().map(str::to_owned));
                        if error.is_none() {
                            failures.push(format!("{what}: no JSON error"));
                        }
                        let after = fingerprint(&client, &sql).await;
                        if after != known {
                            failures.push(format!("{what}: wrote {known} -> {after}"));
                            known = after;
                        }
                    } else {
                        // an accepted request may write: the new baseline
                        known = fingerprint(&client, &sql).await;
                    }
                }
            }
        }
    }
    println!("{sent} requests, {refused} refused with a 4xx");
    assert!(sent > 400, "{sent} requests");
    // the hostile input reaches the checks, and most of it is refused
    assert!(refused * 2 > sent, "only {refused} of {sent} refused");
    assert!(
        failures.is_empty(),
        "{} of {sent}:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// `pattern` with every `{param}` replaced by `value`.
fn fill(pattern: &str, value: &str) -> String {
    let mut out = String::new();
    let mut rest = pattern;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..].find('}').map_or(rest.len(), |i| open + i + 1);
        out.push_str(value);
        rest = &rest[close..];
    }
    out.push_str(rest);
    out
}

#[test]
fn a_pattern_is_filled_and_the_router_is_read() {
    assert_eq!(fill("/a/{x}/b/{y}", "v"), "/a/v/b/v");
    let r = routes();
    assert!(r.contains(&(Method::GET, "/api/v1/pop/queue/{queue}".to_owned())));
    assert!(r.contains(&(Method::POST, "/api/v1/push".to_owned())));
    assert!(r.contains(&(Method::DELETE, "/api/v1/ephemeral/queue/{queue}".to_owned())));
}
