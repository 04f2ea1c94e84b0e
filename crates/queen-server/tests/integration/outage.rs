//! Database outages: the broker reports them and recovers on its own.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use queen_testkit::{FaultProxy, TestBroker, TestDb};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::*;

/// Polls `/health` until it answers `want`, for at most `limit`.
async fn wait_health(b: &TestBroker, want: StatusCode, limit: Duration) -> Value {
    let started = Instant::now();
    loop {
        let (status, body) = b.get("/health").await;
        if status == want {
            return body;
        }
        assert!(
            started.elapsed() < limit,
            "health still {status} after {limit:?}: {body}"
        );
        sleep_ms(100).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_database_link_is_reported_and_recovered() {
    let db = TestDb::new().await.expect("db");
    let upstream = SocketAddr::new(
        db.host.parse::<IpAddr>().expect("PG host is an IP"),
        db.port,
    );
    let proxy = FaultProxy::start(upstream).await.expect("proxy");
    let port = proxy.addr().port().to_string();
    let b = TestBroker::start_with(&db, &[("PG_HOST", "127.0.0.1"), ("PG_PORT", &port)])
        .await
        .expect("broker");
    let queue = unique("outage");
    push_one(&b, &queue, "Default", json!("before"), "before").await;

    proxy.cut();
    // with the disk spool (§6.4) the push is accepted as `buffered`; without a
    // usable spool it must be a 503/500 with a JSON error
    let (status, body) = b
        .post(
            "/api/v1/push",
            &json!({ "items": [ { "queue": queue, "payload": "during", "transactionId": "during" } ] }),
        )
        .await;
    let spooled = status == StatusCode::CREATED;
    if spooled {
        assert_eq!(body[0]["status"], "buffered", "{body}");
        assert_eq!(body[0]["queue"], queue.as_str(), "{body}");
        assert_eq!(body[0]["partition"], "Default", "{body}");
        assert_eq!(body[0]["transactionId"], "during", "{body}");
    } else {
        assert!(
            status == StatusCode::SERVICE_UNAVAILABLE
                || status == StatusCode::INTERNAL_SERVER_ERROR,
            "push during the outage answered {status} {body}"
        );
        assert!(
            body["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{body}"
        );
    }

    let health = wait_health(&b, StatusCode::SERVICE_UNAVAILABLE, Duration::from_secs(5)).await;
    assert_eq!(health["status"], "unhealthy");
    assert_eq!(health["database"], "disconnected");

    // a pop on a storage error: 200 {"success": false, "error"} (clients read it as empty)
    let (status, body) = b.get(&pop_path(&queue, None, "")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["success"], false, "{body}");
    assert!(body["error"].is_string(), "{body}");
    assert!(body.get("messages").is_none(), "{body}");

    proxy.restore();
    let health = wait_health(&b, StatusCode::OK, Duration::from_secs(10)).await;
    assert_eq!(health["status"], "healthy");
    assert_eq!(health["database"], "connected");

    // pushes reach the database again without a restart
    let started = Instant::now();
    loop {
        let (status, body) = b
            .post(
                "/api/v1/push",
                &json!({ "items": [ { "queue": queue, "payload": "after", "transactionId": "after" } ] }),
            )
            .await;
        // `buffered` right after recovery is fine (the spool drains first); once
        // the answer is `queued`, or `duplicate` of the replayed copy, it is stored
        if status == StatusCode::CREATED
            && (body[0]["status"] == "queued" || body[0]["status"] == "duplicate")
        {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "push after restore: {status} {body}"
        );
        sleep_ms(200).await;
    }

    // everything accepted is stored once ("during" is replayed from the spool)
    let mut want = vec!["after".to_owned(), "before".to_owned()];
    if spooled {
        want.push("during".to_owned());
    }
    want.sort();
    let mut got: Vec<String> = Vec::new();
    let started = Instant::now();
    loop {
        let (status, body) = b
            .get(&pop_path(&queue, None, "batch=10&autoAck=true"))
            .await;
        if status == StatusCode::OK {
            got.extend(txn_ids(&body));
        }
        let mut sorted = got.clone();
        sorted.sort();
        if sorted == want {
            break;
        }
        assert!(
            got.len() <= want.len() && started.elapsed() < Duration::from_secs(10),
            "stored after the outage: {got:?}, want {want:?}"
        );
        sleep_ms(100).await;
    }
    assert_eq!(got[0], "before", "{got:?}");
    pop_empty(&b, &pop_path(&queue, None, "")).await;
    drop(b);
    drop(proxy);
}
