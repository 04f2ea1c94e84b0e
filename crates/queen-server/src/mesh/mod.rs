//! The mesh: best-effort hints between replicas over TCP.
//!
//! Every replica listens on the mesh port and dials every configured peer. It
//! sends only on connections it dialled and receives only on connections it
//! accepted (two one-way connections per pair). Hints wake parked pops,
//! invalidate cached queue configs and spread maintenance flags; losing one
//! costs latency, never correctness (see `docs/operations/high-availability.md`).
//! [`Mesh::send`] never blocks: each peer has a bounded queue, and a frame that
//! does not fit, or finds the peer down, is dropped and counted.

mod handshake;
mod hints;
mod listener;
mod peer;
mod refusal;
mod wire;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use queen_proto::mesh::Frame;
use queen_proto::status::MeshPeer;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use handshake::{make_hello, FrameSigner};
pub use hints::{Hint, HintInbox};
pub use listener::MESH_BIND_FAILED;
pub use refusal::{Refusal, RefusalCounters};

use crate::config::MeshConfig;

/// Frames a peer's send queue holds before new ones are dropped.
pub const PEER_QUEUE_FRAMES: usize = 1024;

/// Counters of one dialled peer.
#[derive(Debug, Default)]
pub struct PeerStats {
    pub connected: AtomicBool,
    pub sent: AtomicU64,
    pub dropped: AtomicU64,
    pub reconnects: AtomicU64,
    pub last_error: Mutex<Option<String>>,
}

/// One configured peer: its address, send queue and counters.
#[derive(Debug)]
pub struct Peer {
    pub addr: String,
    /// The server id this replica expects at `addr` (strict mode checks it).
    pub id: String,
    tx: mpsc::Sender<Frame>,
    pub stats: PeerStats,
}

/// Counters of the listening side.
#[derive(Debug, Default)]
pub struct InboundStats {
    pub open: AtomicUsize,
    pub accepted: AtomicU64,
    pub rejected: AtomicU64,
    pub frames: AtomicU64,
    /// Accepted connections not (yet) authenticated.
    pub unauthenticated: AtomicUsize,
    /// Connections refused or cut, by reason.
    pub refused: RefusalCounters,
}

/// The mesh handle held by the broker (the send side).
#[derive(Debug)]
pub struct Mesh {
    pub config: MeshConfig,
    pub server_id: String,
    pub peers: Vec<Arc<Peer>>,
    pub inbound: Arc<InboundStats>,
    /// False when the listener could not bind (the broker serves with the local waker only).
    pub listening: AtomicBool,
}

impl Mesh {
    /// Starts the listener and one dialer per peer; returns the handle and
    /// the inbox of the hints peers send.
    pub async fn start(
        config: MeshConfig,
        server_id: String,
        cancel: CancellationToken,
    ) -> (Arc<Self>, HintInbox) {
        let (hints, inbox) = hints::inbox();
        let mut receivers = Vec::new();
        let peers = config
            .peers
            .iter()
            .zip(&config.peer_ids)
            .map(|(addr, id)| {
                let (tx, rx) = mpsc::channel(PEER_QUEUE_FRAMES);
                receivers.push(rx);
                Arc::new(Peer {
                    addr: addr.clone(),
                    id: id.clone(),
                    tx,
                    stats: PeerStats::default(),
                })
            })
            .collect();
        let mesh = Arc::new(Self {
            config,
            server_id,
            peers,
            inbound: Arc::default(),
            listening: AtomicBool::new(false),
        });
        let bound = listener::bind(&mesh.config).await;
        if let Some(l) = bound {
            mesh.listening.store(true, Ordering::Relaxed);
            tokio::spawn(listener::run(l, mesh.clone(), hints, cancel.clone()));
        }
        for (peer, rx) in mesh.peers.iter().zip(receivers) {
            tokio::spawn(peer::run(peer.clone(), rx, mesh.clone(), cancel.clone()));
        }
        tracing::info!(
            host = %mesh.config.host,
            port = mesh.config.port,
            peers = mesh.peers.len(),
            auth = mesh.config.auth.as_str(),
            "TCP mesh started (auth: {}: {})",
            mesh.config.auth.as_str(),
            auth_summary(mesh.config.auth)
        );
        (mesh, inbox)
    }

    /// Queues `frame` for every connected peer; never blocks. A frame for a
    /// peer that is down or whose queue is full is dropped and counted.
    pub fn send(&self, frame: &Frame) {
        for peer in &self.peers {
            if !peer.stats.connected.load(Ordering::Relaxed) {
                peer.stats.dropped.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            if peer.tx.try_send(frame.clone()).is_err() {
                peer.stats.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Refusal counts by reason, for the stats and metrics surfaces.
    pub fn refusals(&self) -> Vec<(&'static str, u64)> {
        self.inbound.refused.snapshot()
    }

    /// Per-peer counters for the stats surface.
    pub fn snapshot(&self) -> Vec<MeshPeer> {
        self.peers
            .iter()
            .map(|p| MeshPeer {
                addr: p.addr.clone(),
                connected: p.stats.connected.load(Ordering::Relaxed),
                sent: p.stats.sent.load(Ordering::Relaxed),
                dropped: p.stats.dropped.load(Ordering::Relaxed),
                reconnects: p.stats.reconnects.load(Ordering::Relaxed),
                last_error: p
                    .stats
                    .last_error
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone(),
            })
            .collect()
    }
}

/// What the running authentication mode does, in one phrase for the boot line.
pub fn auth_summary(auth: crate::config::MeshAuth) -> &'static str {
    use crate::config::MeshAuth;
    match auth {
        MeshAuth::Off => "no secret, any well-formed HELLO is accepted; firewall the mesh port",
        MeshAuth::Hmac => {
            "seed protocol, HELLO MAC over the nonce only; a captured HELLO replays and frames carry no MAC; firewall the mesh port"
        }
        MeshAuth::HmacStrict => {
            "challenge-response bound to both server ids, per-link HKDF key, MAC on every frame"
        }
    }
}
