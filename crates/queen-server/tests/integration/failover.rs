//! Losing PostgreSQL without losing anything (issue 16): a database that
//! hangs (the fault proxy's `hang`), and a primary with a synchronous
//! standby (private servers from the machine's binaries) killed or frozen,
//! then the standby promoted, with producers and a consumer group running.

use std::collections::{BTreeMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use queen_testkit::{pg_bin_dir, FaultProxy, PrivatePg, TestBroker, TestDb};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::*;

/// Quick detection for tests: a probe every 200 ms, a hang declared after 1 s.
const FAST_PROBE: [(&str, &str); 3] = [
    ("DB_PROBE_INTERVAL_MS", "200"),
    ("DB_PROBE_TIMEOUT_MS", "1000"),
    ("DB_CONNECTION_TIMEOUT", "1000"),
];

/// Sends `req` and answers status, body and how long it took; `None` when
/// nothing came back within `limit` (the broker stopped answering).
async fn timed(
    req: reqwest::RequestBuilder,
    limit: Duration,
) -> Option<(StatusCode, Value, Duration)> {
    let started = Instant::now();
    let resp = tokio::time::timeout(limit, req.send()).await.ok()?.ok()?;
    let status = resp.status();
    let bytes = tokio::time::timeout(limit, resp.bytes()).await.ok()?.ok()?;
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Some((status, body, started.elapsed()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_database_leaves_the_broker_answering_and_loses_nothing() {
    let db = TestDb::new().await.expect("db");
    let upstream = SocketAddr::new(db.host.parse::<IpAddr>().expect("IP"), db.port);
    let proxy = FaultProxy::start(upstream).await.expect("proxy");
    let port = proxy.addr().port().to_string();
    let mut env = vec![("PG_HOST", "127.0.0.1"), ("PG_PORT", port.as_str())];
    env.extend(FAST_PROBE);
    let b = TestBroker::start_with(&db, &env).await.expect("broker");
    let queue = unique("hang");
    push_one(&b, &queue, "Default", json!("before"), "before").await;

    proxy.hang();
    // every route answers while the database holds every byte: a push is
    // buffered, a pop answers, health says 503, metrics are served
    let limit = Duration::from_secs(20);
    let push = |txn: &str| {
        b.http.post(b.url("/api/v1/push")).json(&json!({ "items": [
            { "queue": queue, "payload": txn, "transactionId": txn } ] }))
    };
    let (status, body, _) = timed(push("during-1"), limit)
        .await
        .expect("a push during the hang is answered");
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body[0]["status"], "buffered", "{body}");
    // once the hang is declared, pushes are buffered without waiting
    let (status, body, _) = timed(push("during-2"), limit).await.expect("answered");
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body[0]["status"], "buffered", "{body}");
    let (status, body, _) = timed(b.http.get(b.url("/health")), limit)
        .await
        .expect("health answers");
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["database"], "disconnected");
    let (status, _, _) = timed(b.http.get(b.url("/metrics/prometheus")), limit)
        .await
        .expect("metrics answer");
    assert_eq!(status, StatusCode::OK);
    let (status, _, _) = timed(b.http.get(b.url("/metrics")), limit)
        .await
        .expect("JSON metrics answer");
    assert_eq!(status, StatusCode::OK);
    let pop = b.http.get(b.url(&pop_path(&queue, None, "")));
    let (status, body, _) = timed(pop, limit).await.expect("a pop answers");
    assert!(
        status == StatusCode::NO_CONTENT
            || status == StatusCode::SERVICE_UNAVAILABLE
            || (status == StatusCode::OK && body["success"] == false),
        "pop during the hang: {status} {body}"
    );

    proxy.restore();
    // everything acknowledged is delivered once, in order
    let want = ["before", "during-1", "during-2"];
    let mut got: Vec<String> = Vec::new();
    let started = Instant::now();
    while got.len() < want.len() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "after the hang: {got:?}"
        );
        let (status, body) = b
            .get(&pop_path(&queue, None, "batch=10&autoAck=true"))
            .await;
        if status == StatusCode::OK && body["success"] == true {
            got.extend(txn_ids(&body));
        } else {
            sleep_ms(100).await;
        }
    }
    assert_eq!(got, want);
    pop_empty(&b, &pop_path(&queue, None, "")).await;
    drop(b);
    drop(proxy);
}

/// How the primary is lost.
#[derive(Debug, Clone, Copy)]
enum Loss {
    /// `kill -9`: its connections break at once.
    Killed,
    /// `SIGSTOP`: its connections stay open and never answer, until the end.
    Frozen,
}

/// Partitions written at once, one producer each.
const PARTITIONS: usize = 4;
/// Pushes per partition.
const PER_PARTITION: usize = 120;
/// Lease of the test queue: short, so a lease whose pop answer was lost in
/// the failover expires soon, long enough for acks to outlive the outage.
const LEASE_SECS: u64 = 10;

/// What the consumers saw, in the order they received it.
#[derive(Default)]
struct Seen {
    /// `(partition, index)` in delivery order.
    log: Vec<(usize, usize)>,
}

fn parse_payload(m: &Value) -> Option<(usize, usize)> {
    let p = &m["data"];
    Some((p["k"].as_u64()? as usize, p["i"].as_u64()? as usize))
}

/// Acks `msgs` until the broker says yes (or the lease is long gone).
async fn ack_all(b: &TestBroker, group: &str, msgs: &[Value]) {
    let acks: Vec<Value> = msgs
        .iter()
        .map(|m| ack_item(m, "completed", None))
        .collect();
    let body = json!({ "consumerGroup": group, "acknowledgments": acks });
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(LEASE_SECS * 3) {
        let req = b.http.post(b.url("/api/v1/ack/batch")).json(&body);
        if let Some((StatusCode::OK, res, _)) = timed(req, Duration::from_secs(30)).await {
            if res
                .as_array()
                .is_some_and(|a| a.iter().all(|r| r["success"] == true))
            {
                return;
            }
        }
        sleep_ms(100).await;
    }
}

async fn failover(loss: Loss) {
    if pg_bin_dir().is_none() {
        panic!("no PostgreSQL binaries on this machine: set QUEEN_PG_BIN");
    }
    let primary = PrivatePg::primary().await.expect("private primary");
    let standby = primary.sync_standby().await.expect("synchronous standby");
    let url = format!(
        "postgresql://postgres@127.0.0.1:{},127.0.0.1:{}/postgres?target_session_attrs=read-write",
        primary.port, standby.port
    );
    let spool = tempfile::tempdir().expect("spool dir");
    let mut env: std::collections::HashMap<String, String> = [
        ("DATABASE_URL", url.as_str()),
        ("DB_POOL_SIZE", "8"),
        ("HOST", "127.0.0.1"),
        ("LOG_LEVEL", "warn"),
        ("FILE_BUFFER_DIR", spool.path().to_str().unwrap()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    for (k, v) in FAST_PROBE {
        env.insert(k.to_owned(), v.to_owned());
    }
    let b = Arc::new(TestBroker::start_env(env).await.expect("broker"));
    b.wait_healthy(Duration::from_secs(60))
        .await
        .expect("healthy");
    let queue = unique("failover");
    configure(&b, &queue, json!({ "leaseTime": LEASE_SECS })).await;
    let group = "g";

    let answered = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let fault_at: Arc<Mutex<Option<Instant>>> = Arc::default();

    // producers: one per partition, each push waits for its answer
    let mut producers = Vec::new();
    for k in 0..PARTITIONS {
        let (b, queue, answered, fault_at) =
            (b.clone(), queue.clone(), answered.clone(), fault_at.clone());
        producers.push(tokio::spawn(async move {
            let mut buffered = 0usize;
            let mut slowest = Duration::ZERO;
            let mut first_queued_after_fault: Option<Duration> = None;
            for i in 0..PER_PARTITION {
                let item = json!({ "items": [ { "queue": queue, "partition": format!("p{k}"),
                    "payload": { "k": k, "i": i }, "transactionId": format!("t{k}-{i}") } ] });
                let req = b.http.post(b.url("/api/v1/push")).json(&item);
                let (status, body, took) = timed(req, Duration::from_secs(60))
                    .await
                    .unwrap_or_else(|| panic!("push t{k}-{i} got no answer"));
                assert_eq!(status, StatusCode::CREATED, "push t{k}-{i}: {body}");
                let s = body[0]["status"].as_str().unwrap_or_default().to_owned();
                assert!(
                    s == "queued" || s == "buffered" || s == "duplicate",
                    "push t{k}-{i}: {body}"
                );
                if s == "buffered" {
                    buffered += 1;
                }
                let fault = *fault_at.lock().unwrap();
                if let (Some(f), "queued", None) = (fault, s.as_str(), first_queued_after_fault) {
                    if buffered > 0 {
                        first_queued_after_fault = Some(f.elapsed());
                    }
                }
                slowest = slowest.max(took);
                answered.fetch_add(1, Ordering::SeqCst);
                sleep_ms(15).await;
            }
            (buffered, slowest, first_queued_after_fault)
        }));
    }

    // a consumer group of two
    let mut consumers = Vec::new();
    for _ in 0..2 {
        let (b, queue, stop, seen) = (b.clone(), queue.clone(), stop.clone(), seen.clone());
        consumers.push(tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let path = pop_path(
                    &queue,
                    None,
                    &format!("consumerGroup={group}&batch=20&wait=true&timeout=500"),
                );
                let req = b.http.get(b.url(&path));
                let Some((status, body, _)) = timed(req, Duration::from_secs(30)).await else {
                    continue;
                };
                if status != StatusCode::OK || body["success"] != true {
                    sleep_ms(100).await;
                    continue;
                }
                let msgs = messages(&body);
                {
                    let mut seen = seen.lock().unwrap();
                    for m in &msgs {
                        seen.log
                            .push(parse_payload(m).unwrap_or_else(|| panic!("payload {m}")));
                    }
                }
                ack_all(&b, group, &msgs).await;
            }
        }));
    }

    // lose the primary a third of the way, promote the standby a second later
    let total = PARTITIONS * PER_PARTITION;
    while answered.load(Ordering::SeqCst) < total / 3 {
        sleep_ms(20).await;
    }
    match loss {
        Loss::Killed => primary.kill().expect("kill -9 the primary"),
        Loss::Frozen => primary.freeze().expect("SIGSTOP the primary"),
    }
    *fault_at.lock().unwrap() = Some(Instant::now());
    sleep_ms(1_000).await;
    standby.promote().await.expect("promote the standby");
    let promoted = Instant::now();

    let mut buffered = 0;
    let mut slowest = Duration::ZERO;
    let mut back: Option<Duration> = None;
    for p in producers {
        let (n, s, q) = p.await.expect("producer");
        buffered += n;
        slowest = slowest.max(s);
        back = match (back, q) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }
    // every push was answered; now every one is delivered once, in order
    let started = Instant::now();
    loop {
        let delivered: HashSet<(usize, usize)> = seen.lock().unwrap().log.iter().copied().collect();
        if delivered.len() == total {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "{} of {total} delivered; spool {}",
            delivered.len(),
            b.get("/api/v1/status/buffers").await.1,
        );
        sleep_ms(200).await;
    }
    let all_delivered = promoted.elapsed();
    // a little longer: a duplicate delivery would show up now
    sleep_ms(1_500).await;
    stop.store(true, Ordering::SeqCst);
    for c in consumers {
        c.await.expect("consumer");
    }
    let log = seen.lock().unwrap().log.clone();
    let mut by_partition: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (k, i) in &log {
        by_partition.entry(*k).or_default().push(*i);
    }
    for (k, seq) in &by_partition {
        let want: Vec<usize> = (0..PER_PARTITION).collect();
        assert_eq!(seq, &want, "partition p{k}: delivered once each, in order");
    }
    assert_eq!(log.len(), total, "no duplicate deliveries");
    eprintln!(
        "failover ({loss:?}): {total} pushes, {buffered} buffered, slowest push answer {slowest:?}, \
         first direct push {back:?} after the loss, all delivered {all_delivered:?} after the promotion"
    );
    drop(b);
    drop(standby);
    drop(primary);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_primary_fails_over_to_its_standby_with_nothing_lost() {
    failover(Loss::Killed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_frozen_primary_fails_over_to_its_standby_with_nothing_lost() {
    failover(Loss::Frozen).await;
}
