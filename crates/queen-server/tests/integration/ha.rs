//! High availability (high-availability.md §7): three brokers on one database,
//! meshed on loopback.

use std::time::{Duration, Instant};

use queen_proto::mesh::{encode, Frame, MaintenanceKind, MaintenanceModeSet};
use queen_server::mesh::make_hello;
use queen_testkit::{TestBroker, TestCluster, TestDb};
use reqwest::StatusCode;
use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::common::*;
use crate::mesh_security::{closed_within, signed, strict_client};

async fn cluster(n: usize, extra: &[(&str, &str)]) -> (TestDb, TestCluster) {
    let db = TestDb::new().await.expect("create test database");
    let c = TestCluster::start(n, &db, extra)
        .await
        .expect("start cluster");
    (db, c)
}

async fn meshed(n: usize, extra: &[(&str, &str)]) -> (TestDb, TestCluster) {
    let (db, c) = cluster(n, extra).await;
    c.wait_mesh_up(Duration::from_secs(10))
        .await
        .expect("mesh up");
    (db, c)
}

async fn mesh_stream(port: u16) -> TcpStream {
    TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect to mesh port")
}

fn frame_bytes(frame: &Frame) -> Vec<u8> {
    let mut out = Vec::new();
    encode(frame, &mut out);
    out
}

async fn pop_maintenance_on(b: &TestBroker) -> bool {
    let (_, body) = b.get("/api/v1/system/maintenance/pop").await;
    body["popMaintenanceMode"] == true
}

/// Polls `cond` every 25 ms until it holds or `limit` passes.
async fn eventually<F, Fut>(limit: Duration, mut cond: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    loop {
        if cond().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        sleep_ms(25).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pop_on_a_extend_on_b_ack_on_c() {
    let (_db, c) = meshed(3, &[]).await;
    let (a, b, cc) = (c.node(0), c.node(1), c.node(2));
    let q = unique("ha");
    configure(a, &q, json!({"leaseTime": 30})).await;
    push_numbered(a, &q, "p", "m", 2).await;
    let body = pop_ok(a, &pop_path(&q, None, "batch=2")).await;
    let lease = body["leaseId"].as_str().unwrap();

    let (status, ext) = b
        .post(
            &format!("/api/v1/lease/{lease}/extend"),
            &json!({"seconds": 120}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(ext["success"], true, "{ext}");
    // the lease holds on every replica
    pop_empty(cc, &pop_path(&q, None, "")).await;

    let acked = ack_all_completed(cc, &body, None).await;
    assert_eq!(acked[1]["leaseReleased"], true);
    push_numbered(b, &q, "p", "n", 1).await;
    let body = pop_ok(b, &pop_path(&q, None, "")).await;
    assert_eq!(txn_ids(&body), vec!["n-0"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dedup_is_exact_across_replicas_under_concurrency() {
    let (_db, c) = meshed(3, &[]).await;
    let q = unique("dedup");
    let mut tasks = Vec::new();
    for i in 0..30 {
        let url = c.node(i % 3).url("/api/v1/push");
        let http = c.node(i % 3).http.clone();
        let body = json!({"items": [{"queue": q, "partition": "p", "payload": {"i": i}, "transactionId": "same-key"}]});
        tasks.push(tokio::spawn(async move {
            let r = http.post(url).json(&body).send().await.unwrap();
            assert_eq!(r.status(), StatusCode::CREATED);
            r.json::<serde_json::Value>().await.unwrap()[0].clone()
        }));
    }
    let mut queued = 0;
    let mut ids = std::collections::HashSet::new();
    for t in tasks {
        let r = t.await.unwrap();
        if r["status"] == "queued" {
            queued += 1;
        } else {
            assert_eq!(r["status"], "duplicate", "{r}");
        }
        ids.insert(r["message_id"].as_str().unwrap().to_owned());
    }
    assert_eq!(queued, 1);
    assert_eq!(ids.len(), 1, "every duplicate names the original message");
}

/// Parks a long poll on `waiter`, pushes on `pusher`, and returns how long the
/// pop took to return after the push was answered.
async fn wake_latency(pusher: &TestBroker, waiter: &TestBroker, q: &str) -> Duration {
    let path = pop_path(q, None, "wait=true&timeout=10000");
    let url = waiter.url(&path);
    let http = waiter.http.clone();
    let parked = tokio::spawn(async move {
        let r = http.get(url).send().await.unwrap();
        (
            r.status(),
            r.json::<serde_json::Value>().await.ok(),
            Instant::now(),
        )
    });
    // let the pop park and its re-check interval grow to the ceiling
    sleep_ms(1500).await;
    push_numbered(pusher, q, "p", "w", 1).await;
    let pushed_at = Instant::now();
    let (status, body, returned_at) = parked.await.unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(txn_ids(&body.unwrap()), vec!["w-0"]);
    returned_at.saturating_duration_since(pushed_at)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_on_a_wakes_a_long_poll_parked_on_b() {
    let (_db, c) = meshed(2, &[]).await;
    let q = unique("wake");
    configure(c.node(0), &q, json!({})).await;
    let with_mesh = wake_latency(c.node(0), c.node(1), &q).await;
    drop(c);

    let (_db2, c2) = cluster(2, &[("QUEEN_SYNC_ENABLED", "false")]).await;
    configure(c2.node(0), &q, json!({})).await;
    let without_mesh = wake_latency(c2.node(0), c2.node(1), &q).await;
    println!("cross-replica long-poll wake: mesh up {with_mesh:?}, mesh down {without_mesh:?} (fallback re-check)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_oversized_and_unauthenticated_frames_close_the_connection() {
    let (_db, c) = meshed(2, &[("QUEEN_SYNC_SECRET", "s3cret")]).await;
    let port = c.mesh_ports[0];

    let mut s = mesh_stream(port).await;
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    assert!(
        closed_within(&mut s, Duration::from_secs(3)).await,
        "garbage"
    );

    let mut s = mesh_stream(port).await;
    s.write_all(&(16 * 1024 * 1024 + 1u32).to_be_bytes())
        .await
        .unwrap();
    assert!(
        closed_within(&mut s, Duration::from_secs(3)).await,
        "oversized length"
    );

    let mut s = mesh_stream(port).await;
    let hint = Frame::MaintenanceModeSet(MaintenanceModeSet {
        mode: MaintenanceKind::Pop,
        enabled: true,
    });
    s.write_all(&frame_bytes(&hint)).await.unwrap();
    assert!(
        closed_within(&mut s, Duration::from_secs(3)).await,
        "frame before HELLO"
    );

    let mut s = mesh_stream(port).await;
    let hello = make_hello("intruder", "wrong-secret");
    s.write_all(&frame_bytes(&Frame::Hello(hello)))
        .await
        .unwrap();
    s.write_all(&frame_bytes(&hint)).await.unwrap();
    assert!(
        closed_within(&mut s, Duration::from_secs(3)).await,
        "wrong MAC"
    );

    let mut s = mesh_stream(port).await;
    let hello = make_hello("x", "s3cret");
    let mut bytes = frame_bytes(&Frame::Hello(hello));
    bytes.truncate(bytes.len() - 3);
    s.write_all(&bytes).await.unwrap();
    s.shutdown().await.unwrap();
    assert!(
        closed_within(&mut s, Duration::from_secs(3)).await,
        "truncated HELLO"
    );

    // none of it was applied, and the broker serves as before
    assert!(!pop_maintenance_on(c.node(0)).await);
    let (status, _) = c.node(0).get("/health").await;
    assert_eq!(status, StatusCode::OK);
    let (_, state) = c.node(0).get("/api/v1/system/shared-state").await;
    assert!(
        state["inbound"]["rejected"].as_u64().unwrap() >= 4,
        "{state}"
    );
    c.wait_mesh_up(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_peer_is_reconnected_and_drops_are_counted() {
    let (_db, mut c) = meshed(2, &[]).await;
    let q = unique("kill");
    c.stop(1).await;
    let peer_down = eventually(Duration::from_secs(5), || async {
        let (_, s) = c.node(0).get("/api/v1/system/shared-state").await;
        s["peers"][0]["connected"] == false
    })
    .await;
    assert!(peer_down, "node-0 notices node-1 is gone");
    // hints for a down peer are dropped and counted, never queued
    push_numbered(c.node(0), &q, "p", "m", 3).await;
    let (_, s) = c.node(0).get("/api/v1/system/shared-state").await;
    assert!(s["peers"][0]["dropped"].as_u64().unwrap() >= 1, "{s}");

    let restarted = Instant::now();
    c.start_node(1).await.unwrap();
    let back = eventually(Duration::from_secs(8), || async {
        let (_, s) = c.node(0).get("/api/v1/system/shared-state").await;
        s["peers"][0]["connected"] == true && s["peers"][0]["reconnects"].as_u64() >= Some(1)
    })
    .await;
    assert!(
        back,
        "node-0 reconnects to node-1 within the backoff ceiling"
    );
    println!("peer reconnected {:?} after restart", restarted.elapsed());
    // the prometheus surface shows the same counters
    let text = prometheus_text(c.node(0)).await;
    assert!(
        text.contains("queen_mesh_peer{peer=") && text.contains("stat=\"reconnects\""),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_retention_cycle_runs_on_exactly_one_replica() {
    let (db, c) = meshed(3, &[("RETENTION_INTERVAL", "300")]).await;
    let q = unique("ret");
    configure(
        c.node(0),
        &q,
        json!({"retentionEnabled": true, "retentionSeconds": 1}),
    )
    .await;
    push_numbered(c.node(1), &q, "p", "old", 5).await;
    let client = db.client().await.unwrap();
    let gone = eventually(Duration::from_secs(8), || async {
        count(&client, "SELECT count(*) FROM queen.segments").await == 0
    })
    .await;
    assert!(gone, "retention deleted the expired segment");
    assert_eq!(
        count(&client, "SELECT count(*) FROM queen.message_keys").await,
        0
    );
    sleep_ms(1000).await;
    let rows = client
        .query(
            "SELECT cycle, server_id, started_at, finished_at FROM queen.job_runs
             WHERE job = 'retention' AND finished_at IS NOT NULL ORDER BY started_at",
            &[],
        )
        .await
        .unwrap();
    assert!(rows.len() >= 3, "several cycles ran: {}", rows.len());
    let mut servers = std::collections::HashSet::new();
    for w in rows.windows(2) {
        let (end, next): (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>) =
            (w[0].get(3), w[1].get(2));
        assert!(end <= next, "two retention runs overlapped");
        let (c0, c1): (i64, i64) = (w[0].get(0), w[1].get(0));
        assert!(c0 < c1, "a cycle ran twice");
    }
    for r in &rows {
        servers.insert(r.get::<_, String>(1));
    }
    println!(
        "retention cycles: {} runs over replicas {servers:?}",
        rows.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintenance_reaches_other_replicas_by_hint() {
    // reconcile far away: only the hint can carry the flag in time
    let (_db, c) = meshed(3, &[("QUEEN_RECONCILE_INTERVAL_MS", "600000")]).await;
    let (status, _) = c
        .node(0)
        .post("/api/v1/system/maintenance/pop", &json!({"enabled": true}))
        .await;
    assert_eq!(status, StatusCode::OK);
    for i in [1, 2] {
        let on = eventually(Duration::from_secs(2), || {
            pop_maintenance_on_cached(c.node(i))
        })
        .await;
        assert!(on, "node-{i} got the hint");
    }
}

/// Reads the flag as this replica applies it right now (its Prometheus gauge),
/// without making it re-read PostgreSQL.
async fn pop_maintenance_on_cached(b: &TestBroker) -> bool {
    prometheus_value(b, "queen_pop_maintenance_mode_enabled").await == Some(1.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintenance_reaches_other_replicas_by_reconcile_when_the_hint_is_lost() {
    // no mesh at all: every hint is lost
    let (_db, c) = cluster(
        3,
        &[
            ("QUEEN_SYNC_ENABLED", "false"),
            ("QUEEN_RECONCILE_INTERVAL_MS", "300"),
        ],
    )
    .await;
    let (status, _) = c
        .node(0)
        .post("/api/v1/system/maintenance/pop", &json!({"enabled": true}))
        .await;
    assert_eq!(status, StatusCode::OK);
    for i in [1, 2] {
        let on = eventually(Duration::from_secs(3), || {
            pop_maintenance_on_cached(c.node(i))
        })
        .await;
        assert!(on, "node-{i} picked the flag up from PostgreSQL");
    }
}

/// Sends an unsigned MAINTENANCE_MODE_SET on a genuine connection, then
/// replays its captured handshake to the listener it was captured on.
/// Returns (replay accepted, forged frame applied).
async fn replay_and_forge(auth: &str) -> (bool, bool) {
    let mut extra = vec![("QUEEN_SYNC_SECRET", "s3cret")];
    if auth == "strict" {
        extra.push(("QUEEN_MESH_AUTH", "strict"));
    }
    let (_db, c) = meshed(2, &extra).await;
    let port = c.mesh_ports[0];
    // a handshake an attacker captured from the wire (node-1 dialling node-0)
    let (mut first, captured) = if auth == "strict" {
        let (s, _, sent) = strict_client(port, "node-1", "node-0", "s3cret").await;
        (s, sent)
    } else {
        let captured = frame_bytes(&Frame::Hello(make_hello("node-1", "s3cret")));
        let mut s = mesh_stream(port).await;
        s.write_all(&captured).await.unwrap();
        (s, captured)
    };
    assert!(
        !closed_within(&mut first, Duration::from_millis(300)).await,
        "the genuine handshake is accepted"
    );

    // an unsigned hint on the genuinely opened connection (sent before the
    // replay: a second connection of the same peer may take the first's place)
    let forged = Frame::MaintenanceModeSet(MaintenanceModeSet {
        mode: MaintenanceKind::Pop,
        enabled: true,
    });
    first.write_all(&frame_bytes(&forged)).await.unwrap();
    let applied = eventually(Duration::from_secs(3), || {
        pop_maintenance_on_cached(c.node(0))
    })
    .await;

    // a window long enough for a loaded machine to refuse the replay, and
    // shorter than the silence (3 s at least) after which the listener
    // closes any connection
    let mut replay = mesh_stream(port).await;
    replay.write_all(&captured).await.unwrap();
    let replay_accepted = !closed_within(&mut replay, Duration::from_secs(2)).await;
    (replay_accepted, applied)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn base_mode_accepts_replays_and_forged_frames_as_documented() {
    let (replay, forged) = replay_and_forge("hmac").await;
    assert!(replay, "base mode: a replayed HELLO opens a connection");
    assert!(
        forged,
        "base mode: post-handshake frames are unauthenticated"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_mode_refuses_replays_and_forged_frames() {
    let (replay, forged) = replay_and_forge("strict").await;
    assert!(!replay, "strict mode: a replayed handshake is refused");
    assert!(!forged, "strict mode: an unsigned frame is refused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_mode_applies_correctly_signed_frames() {
    let (_db, c) = meshed(
        2,
        &[
            ("QUEEN_SYNC_SECRET", "s3cret"),
            ("QUEEN_MESH_AUTH", "strict"),
        ],
    )
    .await;
    let (mut s, mut signer, _) = strict_client(c.mesh_ports[0], "node-1", "node-0", "s3cret").await;
    let hint = Frame::MaintenanceModeSet(MaintenanceModeSet {
        mode: MaintenanceKind::Pop,
        enabled: true,
    });
    s.write_all(&signed(&hint, &mut signer)).await.unwrap();
    assert!(
        eventually(Duration::from_secs(2), || pop_maintenance_on_cached(
            c.node(0)
        ))
        .await
    );
    // and the replicas' own strict connections work: the mesh is up
    let (_, state) = c.node(1).get("/api/v1/system/shared-state").await;
    assert_eq!(state["auth"], "hmac-strict");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_mesh_port_leaves_the_broker_serving() {
    let taken = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let (_db, b) = setup_with(&[
        ("QUEEN_MESH_PORT", &port),
        ("QUEEN_MESH_PEERS", "127.0.0.1:1"),
    ])
    .await;
    let (_, state) = b.get("/api/v1/system/shared-state").await;
    assert_eq!(state["enabled"], true);
    assert_eq!(state["listening"], false);
    let q = unique("bind");
    push_numbered(&b, &q, "p", "m", 1).await;
    pop_ok(&b, &pop_path(&q, None, "")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_stock_broker_runs_no_mesh() {
    let (_db, b) = setup().await;
    let (_, state) = b.get("/api/v1/system/shared-state").await;
    assert_eq!(state["enabled"], false);
    assert_eq!(state["auth"], "off");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seek_through_another_replica_is_served_by_a_long_poll() {
    // Broker B has marked the group's partitions drained; the seek happens on
    // A. B's floor walk finds work in a partition it had marked drained and
    // starts the group's view over, so the pops right after it find the rest
    // without waiting for more floor walks.
    let (_db, c) = cluster(2, &[]).await;
    let (a, b) = (c.node(0), c.node(1));
    let queue = unique("xseek");
    let group = unique("g");
    let start = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    sleep_ms(50).await;
    let mut want: Vec<String> = Vec::new();
    for p in 0..6 {
        push_numbered(b, &queue, &format!("p{p}"), &format!("p{p}"), 1).await;
        want.push(format!("p{p}-0"));
    }
    let mut seen = drain_group(b, &queue, &group).await;
    seen.sort();
    assert_eq!(seen, want);
    let (status, body) = a
        .post(
            &format!("/api/v1/consumer-groups/{group}/queues/{queue}/seek"),
            &json!({ "timestamp": start }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let waiting = pop_path(
        &queue,
        None,
        &format!("consumerGroup={group}&batch=10&wait=true&timeout=5000"),
    );
    let mut seen = txn_ids(&pop_ok(b, &waiting).await);
    let now = pop_path(&queue, None, &format!("consumerGroup={group}&batch=10"));
    for _ in 0..5 {
        seen.extend(txn_ids(&pop_ok(b, &now).await));
    }
    seen.sort();
    assert_eq!(seen, want, "every partition served again");
}

/// Streams: a query's cycles alternate between two brokers on one database,
/// each reading the state the other wrote, and the end result is exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_cycles_alternate_between_brokers() {
    let (_db, c) = meshed(2, &[]).await;
    let (a, b) = (c.node(0), c.node(1));
    let name = unique("q");
    let source = unique("src");
    let sink = unique("sink");
    let group = format!("streams.{name}");
    let register = json!({ "name": name, "source_queue": source, "sink_queue": sink,
                           "config_hash": "h" });
    let (status, reg) = a.post("/streams/v1/queries", &register).await;
    assert_eq!(status, StatusCode::OK, "{reg}");
    let (status, again) = b.post("/streams/v1/queries", &register).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(
        again["query_id"], reg["query_id"],
        "one query, whichever broker"
    );
    assert_eq!(again["fresh"], false);
    let qid = reg["query_id"].clone();
    push_numbered(a, &source, "p1", "m", 6).await;

    for i in 0..6usize {
        // pop on one broker, read state and commit on the other
        let (popper, committer) = if i % 2 == 0 { (a, b) } else { (b, a) };
        let body = pop_ok(
            popper,
            &pop_path(
                &source,
                None,
                &format!("consumerGroup={group}&wait=true&timeout=5000"),
            ),
        )
        .await;
        let msg = messages(&body)[0].clone();
        assert_eq!(
            msg["data"]["n"], i,
            "in order, none skipped or repeated (round {i})"
        );
        let (_, st) = committer
            .post(
                "/streams/v1/state/get",
                &json!({ "query_id": qid, "partition_id": msg["partitionId"], "keys": ["count"] }),
            )
            .await;
        let count = st["rows"][0]["value"]["n"].as_i64().unwrap_or(0);
        assert_eq!(count, i as i64, "the state the other broker wrote: {st}");
        let (status, res) = committer
            .post(
                "/streams/v1/cycle",
                &json!({ "query_id": qid, "partition_id": msg["partitionId"],
                         "consumer_group": group,
                         "state_ops": [{ "type": "upsert", "key": "count", "value": { "n": count + 1 } }],
                         "push_items": [{ "queue": sink, "partition": "p1",
                                          "payload": { "seen": msg["data"]["n"] } }],
                         "ack": { "transactionId": msg["transactionId"], "leaseId": msg["leaseId"],
                                  "status": "completed", "count": 1 },
                         "release_lease": true }),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{res}");
        // the same cycle sent to the first broker is refused: it is already in
        let (status, res) = popper
            .post(
                "/streams/v1/cycle",
                &json!({ "query_id": qid, "partition_id": msg["partitionId"],
                         "consumer_group": group, "state_ops": [],
                         "push_items": [{ "queue": sink, "payload": {} }],
                         "ack": { "transactionId": msg["transactionId"], "leaseId": msg["leaseId"] } }),
            )
            .await;
        assert_eq!(status, StatusCode::CONFLICT, "{res}");
    }
    let out = pop_ok(a, &pop_path(&sink, None, "batch=100")).await;
    let seen: Vec<i64> = messages(&out)
        .iter()
        .map(|m| m["data"]["seen"].as_i64().unwrap())
        .collect();
    assert_eq!(seen, vec![0, 1, 2, 3, 4, 5]);
}
