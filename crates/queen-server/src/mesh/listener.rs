//! The mesh listener: accepts peers' connections, authenticates them, hands
//! hints to the inbox.
//!
//! Before authentication a connection is bounded in both modes: one deadline
//! for the whole handshake, frames of at most `PRE_AUTH_MAX_FRAME` bytes, and
//! a cap on unauthenticated connections in total and per source address.
//! In the base mode the listener never writes on an accepted connection; in
//! strict mode it writes the CHALLENGE of the handshake, and nothing after.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use queen_proto::mesh::{encode_raw, kind, Frame, FrameError, Hello, RawFrame, MAX_FRAME_LEN};
use queen_proto::mesh_auth::{ListenerHandshake, ListenerStep, PRE_AUTH_MAX_FRAME};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use super::handshake::{fresh_nonce, now_ms, verify_base_hello, FrameSigner, ReplayCache};
use super::hints::HintSender;
use super::wire::{read_frame, Cut};
use super::{Mesh, Refusal};
use crate::config::{MeshAuth, MeshConfig};

/// The warning logged when the mesh port is taken; operators and tests grep for it.
pub const MESH_BIND_FAILED: &str = "TCP mesh bind failed";

/// Binds `QUEEN_MESH_HOST:QUEEN_MESH_PORT`; on failure logs [`MESH_BIND_FAILED`]
/// and returns `None`.
pub(super) async fn bind(config: &MeshConfig) -> Option<TcpListener> {
    match TcpListener::bind((config.host, config.port)).await {
        Ok(l) => Some(l),
        Err(e) => {
            tracing::warn!(host = %config.host, port = config.port, error = %e, "{MESH_BIND_FAILED}; serving with the local waker only");
            None
        }
    }
}

/// Counts of unauthenticated connections, in total and per source address.
#[derive(Debug, Default)]
struct Gate {
    per_addr: Mutex<HashMap<IpAddr, usize>>,
}

/// A held unauthenticated slot; released on drop (authenticated or closed).
struct Ticket {
    mesh: Arc<Mesh>,
    gate: Arc<Gate>,
    ip: IpAddr,
    held: bool,
}

impl Ticket {
    fn release(&mut self) {
        if !std::mem::take(&mut self.held) {
            return;
        }
        self.mesh
            .inbound
            .unauthenticated
            .fetch_sub(1, Ordering::Relaxed);
        let mut per = self.gate.per_addr.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = per.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                per.remove(&self.ip);
            }
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.release();
    }
}

impl Gate {
    /// Takes an unauthenticated slot for `ip`, or says which cap refused it.
    fn admit(self: &Arc<Self>, mesh: &Arc<Mesh>, ip: IpAddr) -> Result<Ticket, Refusal> {
        let cfg = &mesh.config;
        let mut per = self.per_addr.lock().unwrap_or_else(|e| e.into_inner());
        let total = &mesh.inbound.unauthenticated;
        if total.load(Ordering::Relaxed) >= cfg.max_unauthenticated {
            return Err(Refusal::TooManyUnauthenticated);
        }
        let n = per.entry(ip).or_insert(0);
        if *n >= cfg.max_unauthenticated_per_addr {
            return Err(Refusal::TooManyFromAddress);
        }
        *n += 1;
        total.fetch_add(1, Ordering::Relaxed);
        Ok(Ticket {
            mesh: mesh.clone(),
            gate: self.clone(),
            ip,
            held: true,
        })
    }
}

pub(super) async fn run(
    listener: TcpListener,
    mesh: Arc<Mesh>,
    hints: HintSender,
    cancel: CancellationToken,
) {
    let replay = Arc::new(ReplayCache::default());
    let gate = Arc::new(Gate::default());
    loop {
        let (stream, addr) = tokio::select! {
            r = listener.accept() => match r {
                Ok(pair) => pair,
                Err(e) => {
                    tracing::debug!(error = %e, "mesh accept failed");
                    continue;
                }
            },
            _ = cancel.cancelled() => return,
        };
        let ticket = match gate.admit(&mesh, addr.ip()) {
            Ok(t) => t,
            Err(r) => {
                // dropping the stream closes it before a byte is read
                refuse(
                    &mesh,
                    addr,
                    &Cut::refused(r, "unauthenticated connection cap"),
                );
                continue;
            }
        };
        let (mesh, hints, replay, cancel) =
            (mesh.clone(), hints.clone(), replay.clone(), cancel.clone());
        tokio::spawn(async move {
            mesh.inbound.open.fetch_add(1, Ordering::Relaxed);
            let result = tokio::select! {
                r = serve(stream, addr, &mesh, &hints, &replay, ticket) => r,
                _ = cancel.cancelled() => Ok(()),
            };
            mesh.inbound.open.fetch_sub(1, Ordering::Relaxed);
            if let Err(cut) = result {
                refuse(&mesh, addr, &cut);
            }
        });
    }
}

fn refuse(mesh: &Mesh, addr: SocketAddr, cut: &Cut) {
    if let Some(r) = cut.refusal {
        mesh.inbound.rejected.fetch_add(1, Ordering::Relaxed);
        mesh.inbound.refused.count(r);
        tracing::debug!(peer.addr = %addr, reason = r.as_str(), detail = %cut.detail, "mesh connection refused");
    } else {
        tracing::debug!(peer.addr = %addr, detail = %cut.detail, "mesh connection closed");
    }
}

/// Handles one accepted connection until it closes; `Err` says why it was cut.
async fn serve(
    mut stream: TcpStream,
    addr: SocketAddr,
    mesh: &Mesh,
    hints: &HintSender,
    replay: &ReplayCache,
    mut ticket: Ticket,
) -> Result<(), Cut> {
    let cfg = &mesh.config;
    let mut buf = Vec::new();
    let handshake = tokio::time::timeout(
        cfg.handshake_timeout,
        authenticate(&mut stream, &mut buf, mesh, replay),
    )
    .await;
    let (peer_id, mut signer) = match handshake {
        Err(_) => {
            return Err(Cut::refused(
                Refusal::HandshakeTimeout,
                format!("handshake not done within {:?}", cfg.handshake_timeout),
            ))
        }
        Ok(Err(cut)) => return Err(cut),
        Ok(Ok(None)) => return Ok(()),
        Ok(Ok(Some(done))) => done,
    };
    ticket.release();
    mesh.inbound.accepted.fetch_add(1, Ordering::Relaxed);
    let from: Arc<str> = format!("{peer_id} ({addr})").into();
    // a live peer writes at least a heartbeat per period; allow a few missed ones
    let silence = (cfg.heartbeat * 5).max(Duration::from_secs(3));
    loop {
        let Some((k, payload)) =
            read_frame(&mut stream, &mut buf, MAX_FRAME_LEN, Some(silence)).await?
        else {
            return Ok(());
        };
        let payload: &[u8] = match signer.as_mut() {
            Some(s) => s
                .verify(k, &payload)
                .ok_or_else(|| Cut::refused(Refusal::BadFrameMac, "bad frame MAC"))?,
            None => &payload,
        };
        let frame = Frame::from_raw(RawFrame { kind: k, payload })
            .map_err(|e: FrameError| Cut::refused(Refusal::BadFrame, e.to_string()))?;
        if matches!(frame, Frame::Hello(_)) {
            return Err(Cut::refused(Refusal::UnexpectedFrame, "second HELLO"));
        }
        mesh.inbound.frames.fetch_add(1, Ordering::Relaxed);
        hints.forward(frame, &from).await;
    }
}

/// Runs the handshake of the configured mode. `Ok(None)`: closed before a
/// HELLO; `Ok(Some((id, signer)))`: authenticated as `id` (claimed, in the
/// base mode), with the frame verifier in strict mode.
async fn authenticate(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    mesh: &Mesh,
    replay: &ReplayCache,
) -> Result<Option<(String, Option<FrameSigner>)>, Cut> {
    let cfg = &mesh.config;
    let Some((first_kind, payload)) = read_frame(stream, buf, PRE_AUTH_MAX_FRAME, None).await?
    else {
        return Ok(None);
    };
    if cfg.auth != MeshAuth::HmacStrict {
        if first_kind != kind::HELLO {
            return Err(Cut::refused(
                Refusal::UnexpectedFrame,
                format!("frame type {first_kind} before HELLO"),
            ));
        }
        let hello: Hello = serde_json::from_slice(&payload)
            .map_err(|e| Cut::refused(Refusal::BadFrame, format!("malformed HELLO: {e}")))?;
        if !verify_base_hello(&hello, &cfg.secret, cfg.auth) {
            return Err(Cut::refused(Refusal::BadMac, "bad HELLO mac"));
        }
        return Ok(Some((hello.server_id, None)));
    }
    let secret = cfg.secret.as_bytes();
    let mut hs = ListenerHandshake::new(secret, &mesh.server_id, &cfg.peer_ids, fresh_nonce());
    let strict = |e: queen_proto::mesh_auth::StrictError| Cut::refused(e.into(), e.to_string());
    let challenge = match hs
        .on_frame(first_kind, &payload, now_ms())
        .map_err(strict)?
    {
        ListenerStep::Challenge(ch) => ch,
        ListenerStep::Authenticated(_) => {
            return Err(Cut::refused(Refusal::UnexpectedFrame, "AUTH before HELLO"))
        }
    };
    let Some(hello) = hs.hello().cloned() else {
        return Err(Cut::refused(Refusal::UnexpectedFrame, "no HELLO"));
    };
    if !replay.insert(&hello.nonce) {
        return Err(Cut::refused(Refusal::Replayed, "HELLO nonce replayed"));
    }
    let mut out = Vec::new();
    let body = serde_json::to_vec(&challenge).unwrap_or_default();
    encode_raw(kind::CHALLENGE, &body, &mut out);
    stream
        .write_all(&out)
        .await
        .map_err(|e| Cut::closed(format!("writing CHALLENGE: {e}")))?;
    let Some((k, payload)) = read_frame(stream, buf, PRE_AUTH_MAX_FRAME, None).await? else {
        return Err(Cut::refused(Refusal::BadFrame, "closed before AUTH"));
    };
    match hs.on_frame(k, &payload, now_ms()).map_err(strict)? {
        ListenerStep::Authenticated(signer) => Ok(Some((hello.server_id, Some(signer)))),
        ListenerStep::Challenge(_) => Err(Cut::refused(Refusal::UnexpectedFrame, "second HELLO")),
    }
}
