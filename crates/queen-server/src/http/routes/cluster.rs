//! `GET /api/v1/system/shared-state`: this replica's view of the mesh.

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use crate::app::AppState;

pub async fn shared_state(State(app): State<AppState>) -> Json<Value> {
    let b = &app.broker;
    let cfg = &b.config().mesh;
    let Some(mesh) = b.mesh_status() else {
        return Json(json!({
            "enabled": false,
            "serverId": b.config().server_id,
            "auth": cfg.auth.as_str(),
            "reason": if cfg.sync_enabled { "no peers configured" } else { "QUEEN_SYNC_ENABLED=false" },
            "peers": [],
        }));
    };
    let connected = mesh.peers.iter().filter(|p| p.connected).count();
    Json(json!({
        "enabled": true,
        "serverId": b.config().server_id,
        "auth": cfg.auth.as_str(),
        "meshPort": cfg.port,
        "listening": mesh.listening,
        "heartbeatMs": cfg.heartbeat.as_millis() as u64,
        "peersConnected": connected,
        "peers": mesh.peers,
        "inbound": {
            "open": mesh.inbound_open,
            "accepted": mesh.inbound_accepted,
            "rejected": mesh.inbound_rejected,
            "frames": mesh.inbound_frames,
        },
    }))
}
