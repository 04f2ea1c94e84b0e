//! `GET /api/v1/system/shared-state`: this replica's view of the mesh.

use axum::extract::State;
use axum::Json;
use queen_proto::status::{MeshInbound, MeshPeer, SharedState};

use crate::app::AppState;

pub async fn shared_state(State(app): State<AppState>) -> Json<SharedState> {
    let b = &app.broker;
    let cfg = &b.config().mesh;
    let server_id = b.config().server_id.clone();
    let Some(mesh) = b.mesh_status() else {
        return Json(SharedState::Off {
            enabled: false,
            server_id,
            auth: cfg.auth.as_str(),
            reason: if cfg.sync_enabled {
                "no peers configured"
            } else {
                "QUEEN_SYNC_ENABLED=false"
            },
            peers: Vec::new(),
        });
    };
    let peers: Vec<MeshPeer> = mesh.peers;
    Json(SharedState::On {
        enabled: true,
        server_id,
        auth: cfg.auth.as_str(),
        mesh_host: cfg.host.to_string(),
        mesh_port: cfg.port,
        listening: mesh.listening,
        heartbeat_ms: cfg.heartbeat.as_millis() as u64,
        peers_connected: peers.iter().filter(|p| p.connected).count(),
        peers,
        inbound: MeshInbound {
            open: mesh.inbound_open,
            accepted: mesh.inbound_accepted,
            rejected: mesh.inbound_rejected,
            frames: mesh.inbound_frames,
        },
        guard: mesh.guard,
    })
}
