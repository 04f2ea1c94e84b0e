//! One dialer task per peer: connect, HELLO, then send hints and heartbeats.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use queen_proto::mesh::{encode_raw, kind, Challenge, Frame, Heartbeat};
use queen_proto::mesh_auth::{self, PRE_AUTH_MAX_FRAME};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::handshake::{fresh_nonce, make_hello, now_ms, FrameSigner};
use super::wire::read_frame;
use super::{Mesh, Peer};
use crate::backoff::Backoff;
use crate::config::MeshAuth;

/// First reconnect delay; doubled on every failure.
const BACKOFF_START: Duration = Duration::from_millis(250);
/// Reconnect delay ceiling (spec: high-availability §3).
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// How long a connection must hold before the peer counts as back.
const STABLE_CONNECTION: Duration = Duration::from_secs(2);
/// Longest a connect attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Resolves the peer's host anew (its address may have moved) and connects.
async fn connect(addr: &str) -> std::io::Result<TcpStream> {
    let mut last = std::io::Error::other("no address");
    for a in tokio::net::lookup_host(addr).await? {
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(a)).await {
            Ok(Ok(s)) => return Ok(s),
            Ok(Err(e)) => last = e,
            Err(_) => last = std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timeout"),
        }
    }
    Err(last)
}

/// Encodes a frame, signed in strict mode.
fn frame_bytes(frame: &Frame, signer: Option<&mut FrameSigner>) -> Vec<u8> {
    let payload = frame.payload();
    let mut out = Vec::with_capacity(payload.len() + 40);
    match signer {
        Some(s) => encode_raw(frame.kind(), &s.sign(frame.kind(), &payload), &mut out),
        None => encode_raw(frame.kind(), &payload, &mut out),
    }
    out
}

pub(super) async fn run(
    peer: Arc<Peer>,
    mut rx: mpsc::Receiver<Frame>,
    mesh: Arc<Mesh>,
    cancel: CancellationToken,
) {
    let cfg = &mesh.config;
    let mut backoff = Backoff::doubling(BACKOFF_START, BACKOFF_MAX);
    let mut ever_connected = false;
    let mut warned_down = false;
    loop {
        let attempt = tokio::select! {
            r = connect(&peer.addr) => r,
            _ = cancel.cancelled() => return,
        };
        match attempt {
            Ok(mut stream) => {
                let _ = stream.set_nodelay(true);
                let handshake = tokio::time::timeout(
                    cfg.handshake_timeout,
                    handshake(&mut stream, &peer, &mesh),
                )
                .await
                .unwrap_or_else(|_| {
                    Err(format!(
                        "handshake not done within {:?} (do both brokers run the same QUEEN_MESH_AUTH?)",
                        cfg.handshake_timeout
                    ))
                });
                match handshake {
                    Err(e) => record_error(&peer, &e),
                    Ok(mut signer) => {
                        // stale wakes queued while the peer was down are worthless now
                        while rx.try_recv().is_ok() {}
                        peer.stats.connected.store(true, Ordering::Relaxed);
                        if ever_connected {
                            peer.stats.reconnects.fetch_add(1, Ordering::Relaxed);
                        }
                        ever_connected = true;
                        let connected_at = tokio::time::Instant::now();
                        let err =
                            pump(&mut stream, &mut rx, &peer, &mesh, signer.as_mut(), &cancel)
                                .await;
                        peer.stats.connected.store(false, Ordering::Relaxed);
                        if cancel.is_cancelled() {
                            return;
                        }
                        // only a connection that held counts as the peer being back: one
                        // that a proxy or a dying peer closes at once keeps the backoff
                        // growing and the "unreachable" warning standing
                        if connected_at.elapsed() >= STABLE_CONNECTION {
                            backoff.reset();
                            if warned_down {
                                tracing::info!(peer.addr = %peer.addr, "mesh peer reconnected");
                                warned_down = false;
                            }
                        }
                        if let Some(e) = err {
                            record_error(&peer, &e);
                        }
                    }
                }
            }
            Err(e) => record_error(&peer, &e.to_string()),
        }
        if !warned_down {
            tracing::warn!(peer.addr = %peer.addr, "mesh peer unreachable; retrying with backoff");
            warned_down = true;
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff.next_delay()) => {}
            _ = cancel.cancelled() => return,
        }
    }
}

/// Opens the link: the HELLO, and in strict mode the challenge-response.
/// Returns the frame signer of strict mode.
async fn handshake(
    stream: &mut TcpStream,
    peer: &Peer,
    mesh: &Mesh,
) -> Result<Option<FrameSigner>, String> {
    let cfg = &mesh.config;
    if cfg.auth != MeshAuth::HmacStrict {
        let hello = make_hello(&mesh.server_id, &cfg.secret);
        let bytes = frame_bytes(&Frame::Hello(hello), None);
        stream.write_all(&bytes).await.map_err(|e| e.to_string())?;
        return Ok(None);
    }
    let secret = cfg.secret.as_bytes();
    let hello = mesh_auth::hello(secret, &mesh.server_id, &peer.id, &fresh_nonce(), now_ms());
    let bytes = frame_bytes(&Frame::Hello(hello.clone()), None);
    stream.write_all(&bytes).await.map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    let (k, payload) = read_frame(stream, &mut buf, PRE_AUTH_MAX_FRAME, None)
        .await
        .map_err(|c| c.detail)?
        .ok_or_else(|| {
            format!(
                "the listener closed the handshake (is it {} in strict mode, and are we in its peer list?)",
                peer.id
            )
        })?;
    if k != kind::CHALLENGE {
        return Err(format!("frame type {k} instead of CHALLENGE"));
    }
    let ch: Challenge =
        serde_json::from_slice(&payload).map_err(|e| format!("malformed CHALLENGE: {e}"))?;
    let (auth, signer) =
        mesh_auth::answer_challenge(secret, &hello, &peer.id, &ch).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    encode_raw(
        kind::AUTH,
        &serde_json::to_vec(&auth).unwrap_or_default(),
        &mut out,
    );
    stream.write_all(&out).await.map_err(|e| e.to_string())?;
    Ok(Some(signer))
}

fn record_error(peer: &Peer, e: &str) {
    *peer
        .stats
        .last_error
        .lock()
        .unwrap_or_else(|p| p.into_inner()) = Some(e.to_owned());
}

/// Sends queued frames and heartbeats until the connection breaks; returns why.
async fn pump(
    stream: &mut TcpStream,
    rx: &mut mpsc::Receiver<Frame>,
    peer: &Peer,
    mesh: &Mesh,
    mut signer: Option<&mut FrameSigner>,
    cancel: &CancellationToken,
) -> Option<String> {
    let mut heartbeat = tokio::time::interval(mesh.config.heartbeat);
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let frame = tokio::select! {
            f = rx.recv() => match f {
                Some(f) => f,
                None => return Some("send queue closed".into()),
            },
            _ = heartbeat.tick() => Frame::Heartbeat(Heartbeat { server_id: mesh.server_id.clone() }),
            _ = cancel.cancelled() => return None,
        };
        let is_hint = !matches!(frame, Frame::Heartbeat(_));
        let bytes = frame_bytes(&frame, signer.as_deref_mut());
        if let Err(e) = stream.write_all(&bytes).await {
            return Some(e.to_string());
        }
        if is_hint {
            peer.stats.sent.fetch_add(1, Ordering::Relaxed);
        }
    }
}
