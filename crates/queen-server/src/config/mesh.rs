//! The TCP mesh of best-effort hints between replicas (`QUEEN_MESH_*`,
//! `QUEEN_SYNC_*` and their `QUEEN_UDP_*` aliases; high-availability.md
//! section 2).

use std::fmt;
use std::time::Duration;

use super::defaults;
use super::env::{at_least_one, ConfigError, Reader};

/// How replicas authenticate mesh connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MeshAuth {
    /// No secret: any well-formed HELLO is accepted.
    Off,
    /// HMAC-SHA256 over the dialer's nonce (the seed design).
    Hmac,
    /// Timestamped HELLO, replay cache and a MAC on every frame.
    HmacStrict,
}

impl MeshAuth {
    /// The name the boot log and the stats surface show.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Hmac => "hmac",
            Self::HmacStrict => "hmac-strict",
        }
    }
}

/// The TCP mesh of best-effort hints between replicas (high-availability.md §2).
#[derive(Clone)]
pub struct MeshConfig {
    pub sync_enabled: bool,
    /// `host:port` of every other replica.
    pub peers: Vec<String>,
    pub port: u16,
    pub secret: String,
    pub heartbeat: Duration,
    pub auth: MeshAuth,
}

impl fmt::Debug for MeshConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MeshConfig")
            .field("sync_enabled", &self.sync_enabled)
            .field("peers", &self.peers)
            .field("port", &self.port)
            .field("secret", &"<redacted>")
            .field("auth", &self.auth)
            .finish_non_exhaustive()
    }
}

impl MeshConfig {
    /// The mesh runs only with sync enabled and at least one peer.
    pub fn is_active(&self) -> bool {
        self.sync_enabled && !self.peers.is_empty()
    }
}

fn read_port(r: &Reader<'_>) -> Result<u16, ConfigError> {
    match r.raw_aliased("QUEEN_MESH_PORT", "QUEEN_UDP_NOTIFY_PORT") {
        None => Ok(defaults::QUEEN_MESH_PORT),
        Some((var, v)) => v
            .trim()
            .parse()
            .map_err(|e: std::num::ParseIntError| ConfigError::new(var, v.clone(), e.to_string())),
    }
}

/// The peer list without the entries that name this replica.
fn read_peers(r: &Reader<'_>, server_id: &str, port: u16) -> Result<Vec<String>, ConfigError> {
    let mut peers = Vec::new();
    let Some((var, list)) = r.raw_aliased("QUEEN_MESH_PEERS", "QUEEN_UDP_PEERS") else {
        return Ok(peers);
    };
    for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((host, peer_port)) = entry.rsplit_once(':') else {
            return Err(ConfigError::new(var, entry, "expected host:port"));
        };
        let peer_port: u16 = peer_port
            .parse()
            .map_err(|_| ConfigError::new(var, entry, "port must be a number"))?;
        let is_self = peer_port == port
            && (host == server_id || host == "localhost" || host == "127.0.0.1" || host == "::1");
        if !is_self {
            peers.push(entry.to_owned());
        }
    }
    Ok(peers)
}

fn read_auth_mode(r: &Reader<'_>, secret: &str) -> Result<MeshAuth, ConfigError> {
    let strict = match r
        .string("QUEEN_MESH_AUTH", defaults::QUEEN_MESH_AUTH)
        .trim()
    {
        "" | "hmac" | "base" => false,
        "strict" | "hmac-strict" => true,
        other => {
            return Err(ConfigError::new(
                "QUEEN_MESH_AUTH",
                other,
                "expected hmac or strict",
            ))
        }
    };
    match (secret.is_empty(), strict) {
        (true, true) => Err(ConfigError::new(
            "QUEEN_MESH_AUTH",
            "strict",
            "strict mode needs QUEEN_SYNC_SECRET",
        )),
        (true, false) => Ok(MeshAuth::Off),
        (false, false) => Ok(MeshAuth::Hmac),
        (false, true) => Ok(MeshAuth::HmacStrict),
    }
}

pub(super) fn read_mesh(r: &Reader<'_>, server_id: &str) -> Result<MeshConfig, ConfigError> {
    let port = read_port(r)?;
    let peers = read_peers(r, server_id, port)?;
    let secret = r.string("QUEEN_SYNC_SECRET", "");
    let auth = read_auth_mode(r, &secret)?;
    let heartbeat = at_least_one(
        "QUEEN_SYNC_HEARTBEAT_MS",
        r.millis("QUEEN_SYNC_HEARTBEAT_MS", defaults::QUEEN_SYNC_HEARTBEAT_MS)?,
    )?;
    Ok(MeshConfig {
        sync_enabled: r.boolean("QUEEN_SYNC_ENABLED", defaults::QUEEN_SYNC_ENABLED)?,
        peers,
        port,
        secret,
        heartbeat,
        auth,
    })
}
