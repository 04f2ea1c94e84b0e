//! The mesh as an attacker on loopback sees it: one who can capture mesh
//! traffic and connect to mesh ports but does not know `QUEEN_SYNC_SECRET`
//! (docs/operations/high-availability.md, "Mesh security").
//!
//! Three brokers; node-0 reaches node-1 through a recording proxy, so the
//! test holds a real capture of node-0's HELLO (and AUTH) and signed frames,
//! including a genuine `MAINTENANCE_MODE_SET {push on}`. The capture is then
//! replayed verbatim to node-2 and reflected to node-0's own mesh port. The
//! base mode is expected to be open (the seed's documented hole); strict mode
//! must refuse both.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use queen_proto::mesh::{decode_raw, encode_raw, kind, Challenge, Frame};
use queen_proto::mesh_auth::{self, FrameSigner};
use queen_testkit::{base_env, free_port, RecordingProxy, TestBroker, TestDb};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::*;

const SECRET: &str = "s3cret";

/// Three meshed brokers, node-0 -> node-1 through a recorder.
struct Tapped {
    _db: TestDb,
    nodes: Vec<TestBroker>,
    ports: Vec<u16>,
    tap: RecordingProxy,
}

async fn tapped_cluster(auth: &str) -> Tapped {
    let db = TestDb::new().await.expect("create test database");
    let ports: Vec<u16> = (0..3).map(|_| free_port().unwrap()).collect();
    let tap = RecordingProxy::start(([127, 0, 0, 1], ports[1]).into())
        .await
        .unwrap();
    let mut nodes = Vec::new();
    for i in 0..3 {
        let mut env: HashMap<String, String> = base_env(&db);
        let peers: Vec<String> = (0..3)
            .filter(|j| *j != i)
            .map(|j| {
                let addr = if i == 0 && j == 1 {
                    tap.addr().to_string()
                } else {
                    format!("127.0.0.1:{}", ports[j])
                };
                format!("node-{j}@{addr}")
            })
            .collect();
        for (k, v) in [
            ("QUEEN_SERVER_ID", format!("node-{i}")),
            ("QUEEN_MESH_PORT", ports[i].to_string()),
            ("QUEEN_MESH_PEERS", peers.join(",")),
            ("QUEEN_SYNC_HEARTBEAT_MS", "200".into()),
            ("QUEEN_SYNC_SECRET", SECRET.into()),
            ("QUEEN_MESH_AUTH", auth.into()),
            // only the mesh can move a flag within the test
            ("QUEEN_RECONCILE_INTERVAL_MS", "600000".into()),
        ] {
            env.insert(k.into(), v);
        }
        let b = TestBroker::start_env(env).await.unwrap();
        b.wait_healthy(Duration::from_secs(20)).await.unwrap();
        nodes.push(b);
    }
    let t = Tapped {
        _db: db,
        nodes,
        ports,
        tap,
    };
    assert!(
        eventually(Duration::from_secs(10), || async {
            let mut up = true;
            for b in &t.nodes {
                let (_, s) = b.get("/api/v1/system/shared-state").await;
                up &= s["peersConnected"] == 2;
            }
            up
        })
        .await,
        "mesh up"
    );
    t
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

async fn maintenance(b: &TestBroker) -> Value {
    let (status, body) = b.get("/api/v1/system/maintenance").await;
    assert_eq!(status, 200, "{body}");
    body
}

async fn refused(b: &TestBroker, reason: &str) -> u64 {
    let (_, m) = b.get("/metrics").await;
    m["mesh"]["refused"][reason].as_u64().unwrap_or(0)
}

/// The refusal count once it reached `want` (the count follows the close by
/// a moment), or what it is after 2 s.
async fn refused_reaching(b: &TestBroker, reason: &str, want: u64) -> u64 {
    eventually(Duration::from_secs(2), || async {
        refused(b, reason).await >= want
    })
    .await;
    refused(b, reason).await
}

/// The captured bytes of the node-0 -> node-1 connection, cut right after the
/// first frame that carries `{"mode":"push","enabled":true}`.
fn capture_through_push_on(t: &Tapped) -> Vec<u8> {
    let needle = br#"{"mode":"push","enabled":true}"#;
    for bytes in t.tap.captured() {
        let mut at = 0;
        while let Ok(Some((raw, used))) = decode_raw(&bytes[at..]) {
            at += used;
            if raw.kind == kind::MAINTENANCE_MODE_SET && raw.payload.ends_with(needle) {
                return bytes[..at].to_vec();
            }
        }
    }
    panic!("no MAINTENANCE_MODE_SET push on in the capture");
}

/// Lets node-0 switch push maintenance on and off through the API, so the tap
/// holds a genuine signed `push on` frame; every node ends with it off.
async fn capture(t: &Tapped) -> Vec<u8> {
    for enabled in [true, false] {
        let (status, _) = t.nodes[0]
            .post("/api/v1/system/maintenance", &json!({ "enabled": enabled }))
            .await;
        assert_eq!(status, 200);
        assert!(
            eventually(Duration::from_secs(3), || async {
                maintenance(&t.nodes[1]).await["maintenanceMode"] == enabled
            })
            .await,
            "node-1 got push maintenance {enabled} through the tap"
        );
    }
    capture_through_push_on(t)
}

/// Sends `bytes` to mesh `port` as a fresh connection, keeps it open a moment.
async fn replay(port: u16, bytes: &[u8]) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    s.write_all(bytes).await.unwrap();
    s
}

async fn push_answer(b: &TestBroker, q: &str) -> Value {
    let (_, body) = b
        .post(
            "/api/v1/push",
            &json!({"items": [{"queue": q, "partition": "p", "payload": {"x": 1}}]}),
        )
        .await;
    body[0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn base_mode_captured_traffic_replayed_and_reflected_takes_effect_as_documented() {
    let t = tapped_cluster("hmac").await;
    let captured = capture(&t).await;
    let q = unique("open");
    // replayed verbatim to another broker, and reflected to the sender
    let _a = replay(t.ports[2], &captured).await;
    let _b = replay(t.ports[0], &captured).await;
    for i in [2, 0] {
        let b = &t.nodes[i];
        assert!(
            eventually(Duration::from_secs(3), || async {
                maintenance(b).await["maintenanceMode"] == true
            })
            .await,
            "base mode: the replay flips push maintenance on node-{i}"
        );
        // the route reports the effective state and where it came from
        let m = maintenance(b).await;
        let push = &m["effective"]["push"];
        assert_eq!(push["enabled"], true, "{m}");
        assert_eq!(push["stored"], false, "{m}");
        assert_eq!(push["source"], "mesh", "{m}");
        assert!(
            push["from"]
                .as_str()
                .unwrap()
                .starts_with("node-0 (127.0.0.1:"),
            "{m}"
        );
        assert_eq!(push_answer(b, &q).await["status"], "buffered");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_mode_refuses_captured_traffic_replayed_to_another_broker_or_reflected() {
    let t = tapped_cluster("strict").await;
    let captured = capture(&t).await;
    // the capture is a whole strict transcript: HELLO, AUTH, signed frames
    let (first, _) = decode_raw(&captured).unwrap().unwrap();
    assert_eq!(first.kind, kind::HELLO);
    let hello: Value = serde_json::from_slice(first.payload).unwrap();
    assert_eq!(hello["server_id"], "node-0");
    assert_eq!(hello["to"], "node-1");

    let wrong_before = refused(&t.nodes[2], "wrong_listener").await;
    let own_before = refused(&t.nodes[0], "own_id").await;
    let replay_before = refused(&t.nodes[1], "replayed").await;
    let mut to_c = replay(t.ports[2], &captured).await;
    let mut to_a = replay(t.ports[0], &captured).await;
    // and to the very listener it was captured on
    let mut to_b = replay(t.ports[1], &captured).await;
    for s in [&mut to_c, &mut to_a, &mut to_b] {
        assert!(
            closed_within(s, Duration::from_secs(3)).await,
            "strict mode closes a replayed transcript"
        );
    }
    sleep_ms(500).await;
    for (i, b) in t.nodes.iter().enumerate() {
        let m = maintenance(b).await;
        assert_eq!(m["maintenanceMode"], false, "node-{i}: {m}");
        assert_ne!(m["effective"]["push"]["enabled"], true, "node-{i}: {m}");
    }
    assert!(refused(&t.nodes[2], "wrong_listener").await > wrong_before);
    assert!(refused(&t.nodes[0], "own_id").await > own_before);
    assert!(refused(&t.nodes[1], "replayed").await > replay_before);
    let q = unique("strict");
    for b in &t.nodes {
        assert_eq!(push_answer(b, &q).await["status"], "queued");
    }
    // the real mesh is unharmed
    let (_, s) = t.nodes[0].get("/api/v1/system/shared-state").await;
    assert_eq!(s["peersConnected"], 2, "{s}");
    assert_eq!(s["auth"], "hmac-strict");
}

/// True when the peer closes the connection (EOF or reset) within `limit`;
/// bytes it writes first (strict mode's CHALLENGE) are read and ignored.
pub(crate) async fn closed_within(stream: &mut TcpStream, limit: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => {}
            Err(_) => return false,
        }
    }
}

/// Opens a strict connection to `port` as `dialer`, to the listener `listener`,
/// knowing `secret`: what a genuine replica does. Returns the stream and the
/// signer of the frames to send.
pub(crate) async fn strict_client(
    port: u16,
    dialer: &str,
    listener: &str,
    secret: &str,
) -> (TcpStream, FrameSigner, Vec<u8>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let hello = mesh_auth::hello(
        secret.as_bytes(),
        dialer,
        listener,
        &unique("n"),
        chrono::Utc::now().timestamp_millis(),
    );
    let mut sent = Vec::new();
    encode_raw(
        kind::HELLO,
        &Frame::Hello(hello.clone()).payload(),
        &mut sent,
    );
    s.write_all(&sent).await.unwrap();
    let mut len = [0u8; 4];
    tokio::time::timeout(Duration::from_secs(3), s.read_exact(&mut len))
        .await
        .expect("a CHALLENGE in time")
        .expect("a CHALLENGE, not a close");
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).await.unwrap();
    assert_eq!(body[0], kind::CHALLENGE);
    let ch: Challenge = serde_json::from_slice(&body[1..]).unwrap();
    let (auth, signer) =
        mesh_auth::answer_challenge(secret.as_bytes(), &hello, listener, &ch).unwrap();
    let mut out = Vec::new();
    encode_raw(kind::AUTH, &serde_json::to_vec(&auth).unwrap(), &mut out);
    s.write_all(&out).await.unwrap();
    sent.extend_from_slice(&out);
    (s, signer, sent)
}

/// Bytes of `frame` signed by `signer`.
pub(crate) fn signed(frame: &Frame, signer: &mut FrameSigner) -> Vec<u8> {
    let mut out = Vec::new();
    encode_raw(
        frame.kind(),
        &signer.sign(frame.kind(), &frame.payload()),
        &mut out,
    );
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickled_hello_is_closed_by_the_whole_handshake_deadline() {
    for auth in ["hmac", "strict"] {
        let port = free_port().unwrap().to_string();
        let (_db, b) = setup_with(&[
            ("QUEEN_MESH_PORT", &port),
            ("QUEEN_MESH_PEERS", "node-9@127.0.0.1:1"),
            ("QUEEN_SYNC_SECRET", SECRET),
            ("QUEEN_MESH_AUTH", auth),
            ("QUEEN_MESH_HANDSHAKE_TIMEOUT_MS", "1500"),
        ])
        .await;
        let hello = queen_server::mesh::make_hello("node-9", SECRET);
        let mut bytes = Vec::new();
        encode_raw(kind::HELLO, &Frame::Hello(hello).payload(), &mut bytes);
        let mut s = TcpStream::connect(("127.0.0.1", port.parse::<u16>().unwrap()))
            .await
            .unwrap();
        let started = Instant::now();
        // one byte every 300 ms: each read is quick, the whole HELLO never is
        let mut closed = false;
        for byte in bytes.iter().take(bytes.len() - 1) {
            if s.write_all(&[*byte]).await.is_err() {
                closed = true;
                break;
            }
            let mut buf = [0u8; 16];
            match tokio::time::timeout(Duration::from_millis(300), s.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => {
                    closed = true;
                    break;
                }
                _ => {}
            }
            if started.elapsed() > Duration::from_secs(6) {
                break;
            }
        }
        let took = started.elapsed();
        assert!(
            closed,
            "{auth}: a trickled HELLO was left open for {took:?}"
        );
        assert!(took >= Duration::from_millis(1400), "{auth}: {took:?}");
        assert!(took < Duration::from_secs(5), "{auth}: {took:?}");
        assert_eq!(
            refused_reaching(&b, "handshake_timeout", 1).await,
            1,
            "{auth}"
        );
        println!("{auth}: trickled HELLO closed after {took:?}");
    }
}

/// Resident set size of this process (the brokers run in-process).
async fn rss(b: &TestBroker) -> u64 {
    let (_, m) = b.get("/metrics").await;
    m["memory"]["rss"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_half_sent_large_hellos_leave_memory_bounded() {
    let port = free_port().unwrap();
    let (_db, b) = setup_with(&[
        ("QUEEN_MESH_PORT", &port.to_string()),
        ("QUEEN_MESH_PEERS", "node-9@127.0.0.1:1"),
        ("QUEEN_SYNC_SECRET", SECRET),
        ("QUEEN_MESH_HANDSHAKE_TIMEOUT_MS", "20000"),
    ])
    .await;
    let before = rss(&b).await;
    // 64 connections each announcing a 16 MiB HELLO and sending 1 MiB of it
    // (four of these took the seed design from 12 to 77 MB)
    let chunk = vec![b'x'; 64 * 1024];
    let mut conns = Vec::new();
    for _ in 0..64 {
        let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let mut head = (16u32 * 1024 * 1024).to_be_bytes().to_vec();
        head.push(kind::HELLO);
        let _ = s.write_all(&head).await;
        for _ in 0..16 {
            if s.write_all(&chunk).await.is_err() {
                break;
            }
        }
        conns.push(s);
    }
    // and HELLO-sized ones that stop half-way hold a slot until the deadline
    let mut held = Vec::new();
    for _ in 0..16 {
        let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let mut head = 3000u32.to_be_bytes().to_vec();
        head.push(kind::HELLO);
        head.extend_from_slice(&[b' '; 1500]);
        s.write_all(&head).await.unwrap();
        held.push(s);
    }
    sleep_ms(500).await;
    let after = rss(&b).await;
    let grown = after.saturating_sub(before);
    println!(
        "RSS {} MB -> {} MB after 64 half-sent 16 MiB HELLOs and 16 held ones",
        before / 1_000_000,
        after / 1_000_000
    );
    assert!(grown < 16 * 1024 * 1024, "RSS grew by {grown} bytes");
    assert!(refused(&b, "frame_too_large").await >= 1);
    // 8 held from one address at most; the others were refused at accept
    assert!(refused(&b, "too_many_from_address").await >= 8);
    let (_, m) = b.get("/metrics").await;
    assert!(m["mesh"]["unauthenticated"].as_u64().unwrap() <= 8, "{m}");
    let (status, _) = b.get("/health").await;
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthenticated_connections_are_capped_per_address_and_freed_by_authentication() {
    let port = free_port().unwrap();
    let (_db, b) = setup_with(&[
        ("QUEEN_MESH_PORT", &port.to_string()),
        ("QUEEN_MESH_PEERS", "node-9@127.0.0.1:1"),
        ("QUEEN_SYNC_SECRET", SECRET),
        ("QUEEN_MESH_AUTH", "strict"),
        ("QUEEN_MESH_MAX_UNAUTHENTICATED_PER_ADDR", "2"),
        ("QUEEN_MESH_HANDSHAKE_TIMEOUT_MS", "20000"),
    ])
    .await;
    let idle1 = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let idle2 = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    // both accepted and counted before the third arrives (a loaded machine may
    // take longer than any fixed pause)
    assert!(
        eventually(Duration::from_secs(10), || async {
            let (_, m) = b.get("/metrics").await;
            m["mesh"]["unauthenticated"] == 2
        })
        .await
    );
    let mut third = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    assert!(
        closed_within(&mut third, Duration::from_secs(2)).await,
        "a third unauthenticated connection from one address is refused"
    );
    assert_eq!(refused_reaching(&b, "too_many_from_address", 1).await, 1);
    drop((idle1, idle2));
    sleep_ms(200).await;
    // a genuine peer authenticates and then no longer counts
    let (mut s, mut signer, _) = strict_client(port, "node-9", &b_id(&b).await, SECRET).await;
    let hb = Frame::Heartbeat(queen_proto::mesh::Heartbeat {
        server_id: "node-9".into(),
    });
    s.write_all(&signed(&hb, &mut signer)).await.unwrap();
    assert!(
        eventually(Duration::from_secs(2), || async {
            let (_, m) = b.get("/metrics").await;
            m["mesh"]["unauthenticated"] == 0
        })
        .await
    );
    let _idle3 = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let mut ok = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    assert!(!closed_within(&mut ok, Duration::from_millis(300)).await);
    let text = prometheus_text(&b).await;
    assert!(
        text.contains("queen_mesh_refused_total{reason=\"too_many_from_address\"} 1"),
        "{text}"
    );
}

async fn b_id(b: &TestBroker) -> String {
    let (_, s) = b.get("/api/v1/system/shared-state").await;
    s["serverId"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_mode_refuses_own_and_unknown_ids_and_other_listeners() {
    let port = free_port().unwrap();
    let (_db, b) = setup_with(&[
        ("QUEEN_SERVER_ID", "node-0"),
        ("QUEEN_MESH_PORT", &port.to_string()),
        ("QUEEN_MESH_PEERS", "node-9@127.0.0.1:1"),
        ("QUEEN_SYNC_SECRET", SECRET),
        ("QUEEN_MESH_AUTH", "strict"),
    ])
    .await;
    // correctly signed with the secret, but naming the wrong ids
    for (dialer, listener, reason) in [
        ("node-0", "node-0", "own_id"),
        ("node-5", "node-0", "unknown_peer"),
        ("node-9", "node-1", "wrong_listener"),
    ] {
        let hello = mesh_auth::hello(
            SECRET.as_bytes(),
            dialer,
            listener,
            &unique("n"),
            chrono::Utc::now().timestamp_millis(),
        );
        let mut bytes = Vec::new();
        encode_raw(kind::HELLO, &Frame::Hello(hello).payload(), &mut bytes);
        let mut s = replay(port, &bytes).await;
        let mut buf = [0u8; 64];
        let n = tokio::time::timeout(Duration::from_secs(2), s.read(&mut buf))
            .await
            .expect("closed in time")
            .unwrap_or(0);
        assert_eq!(n, 0, "{reason}: no CHALLENGE is written");
        assert_eq!(refused_reaching(&b, reason, 1).await, 1, "{reason}");
    }
    // the right ids pass
    let (mut s, mut signer, _) = strict_client(port, "node-9", "node-0", SECRET).await;
    let on = Frame::MaintenanceModeSet(queen_proto::mesh::MaintenanceModeSet {
        mode: queen_proto::mesh::MaintenanceKind::Pop,
        enabled: true,
    });
    s.write_all(&signed(&on, &mut signer)).await.unwrap();
    assert!(
        eventually(Duration::from_secs(2), || async {
            let (_, m) = b.get("/api/v1/system/maintenance/pop").await;
            m["popMaintenanceMode"] == true && m["effective"]["pop"]["source"] == "mesh"
        })
        .await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mesh_binds_the_address_host_names_unless_queen_mesh_host_says() {
    let port = free_port().unwrap();
    let (_db, b) = setup_with(&[
        ("QUEEN_MESH_PORT", &port.to_string()),
        ("QUEEN_MESH_PEERS", "node-9@127.0.0.1:1"),
    ])
    .await;
    let (_, s) = b.get("/api/v1/system/shared-state").await;
    assert_eq!(s["meshHost"], "127.0.0.1", "HOST=127.0.0.1 in the test kit");
    assert!(TcpStream::connect(("127.0.0.1", port)).await.is_ok());
    // 127.0.0.2 is loopback too, but not the bound address
    assert!(TcpStream::connect(("127.0.0.2", port)).await.is_err());
    drop(b);

    let port = free_port().unwrap();
    let (_db2, b) = setup_with(&[
        ("QUEEN_MESH_HOST", "127.0.0.2"),
        ("QUEEN_MESH_PORT", &port.to_string()),
        ("QUEEN_MESH_PEERS", "node-9@127.0.0.1:1"),
    ])
    .await;
    let (_, s) = b.get("/api/v1/system/shared-state").await;
    assert_eq!(s["meshHost"], "127.0.0.2");
    assert!(TcpStream::connect(("127.0.0.2", port)).await.is_ok());
    assert!(TcpStream::connect(("127.0.0.1", port)).await.is_err());
}
