//! The mesh listener: accepts peers' connections, verifies HELLO, hands hints
//! to the inbox.
//! It never writes back on an accepted connection.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use queen_proto::mesh::{announced_len, decode_raw, kind, Frame, FrameError, RawFrame};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use super::handshake::{verify_hello, FrameSigner, ReplayCache};
use super::hints::HintSender;
use super::Mesh;
use crate::config::{MeshAuth, MeshConfig};

/// The warning logged when the mesh port is taken; operators and tests grep for it.
pub const MESH_BIND_FAILED: &str = "TCP mesh bind failed";

/// How long a new connection may take to send its HELLO.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// Read buffer chunk.
const READ_CHUNK: usize = 16 * 1024;

/// Binds the mesh port; on failure logs [`MESH_BIND_FAILED`] and returns `None`.
pub(super) async fn bind(config: &MeshConfig) -> Option<TcpListener> {
    match TcpListener::bind(("0.0.0.0", config.port)).await {
        Ok(l) => Some(l),
        Err(e) => {
            tracing::warn!(port = config.port, error = %e, "{MESH_BIND_FAILED}; serving with the local waker only");
            None
        }
    }
}

pub(super) async fn run(
    listener: TcpListener,
    mesh: Arc<Mesh>,
    hints: HintSender,
    cancel: CancellationToken,
) {
    let replay = Arc::new(ReplayCache::default());
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
        let (mesh, hints, replay, cancel) =
            (mesh.clone(), hints.clone(), replay.clone(), cancel.clone());
        tokio::spawn(async move {
            mesh.inbound.open.fetch_add(1, Ordering::Relaxed);
            let result = tokio::select! {
                r = serve(stream, &mesh, &hints, &replay) => r,
                _ = cancel.cancelled() => Ok(()),
            };
            mesh.inbound.open.fetch_sub(1, Ordering::Relaxed);
            if let Err(reason) = result {
                mesh.inbound.rejected.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(peer.addr = %addr, reason, "mesh connection closed");
            }
        });
    }
}

/// Reads one frame, refusing bad lengths before buffering them.
async fn read_frame(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    timeout: Duration,
) -> Result<Option<(u8, Vec<u8>)>, String> {
    loop {
        match announced_len(buf) {
            Err(e) => return Err(e.to_string()),
            Ok(Some(total)) if buf.len() >= total => {
                let (raw, used) = match decode_raw(buf) {
                    Ok(Some(x)) => x,
                    Ok(None) => return Err("short frame".into()),
                    Err(e) => return Err(e.to_string()),
                };
                let out = (raw.kind, raw.payload.to_vec());
                buf.drain(..used);
                return Ok(Some(out));
            }
            _ => {}
        }
        let mut chunk = [0u8; READ_CHUNK];
        let n = match tokio::time::timeout(timeout, stream.read(&mut chunk)).await {
            Ok(Ok(n)) => n,
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => return Err("peer silent past its heartbeat".into()),
        };
        if n == 0 {
            return if buf.is_empty() {
                Ok(None)
            } else {
                Err("truncated frame".into())
            };
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Handles one accepted connection until it closes; `Err` says why it was cut.
async fn serve(
    mut stream: TcpStream,
    mesh: &Mesh,
    hints: &HintSender,
    replay: &ReplayCache,
) -> Result<(), String> {
    let cfg = &mesh.config;
    let mut buf = Vec::new();
    let Some((first_kind, payload)) = read_frame(&mut stream, &mut buf, HELLO_TIMEOUT).await?
    else {
        return Ok(());
    };
    if first_kind != kind::HELLO {
        return Err(format!("frame type {first_kind} before HELLO"));
    }
    let hello = match Frame::from_raw(RawFrame {
        kind: first_kind,
        payload: &payload,
    }) {
        Ok(Frame::Hello(h)) => h,
        Ok(_) => return Err("not a HELLO".into()),
        Err(e) => return Err(e.to_string()),
    };
    verify_hello(&hello, &cfg.secret, cfg.auth, replay).map_err(|e| e.to_string())?;
    mesh.inbound.accepted.fetch_add(1, Ordering::Relaxed);
    let mut signer =
        (cfg.auth == MeshAuth::HmacStrict).then(|| FrameSigner::new(&cfg.secret, &hello.nonce));
    // a live peer writes at least a heartbeat per period; allow a few missed ones
    let silence = (cfg.heartbeat * 5).max(Duration::from_secs(3));
    loop {
        let Some((k, payload)) = read_frame(&mut stream, &mut buf, silence).await? else {
            return Ok(());
        };
        let payload: &[u8] = match signer.as_mut() {
            Some(s) => s.verify(k, &payload).ok_or("bad frame MAC")?,
            None => &payload,
        };
        let frame = Frame::from_raw(RawFrame { kind: k, payload })
            .map_err(|e: FrameError| e.to_string())?;
        if matches!(frame, Frame::Hello(_)) {
            return Err("second HELLO".into());
        }
        mesh.inbound.frames.fetch_add(1, Ordering::Relaxed);
        hints.forward(frame).await;
    }
}
