//! The TCP mesh of best-effort hints between replicas (`QUEEN_MESH_*`,
//! `QUEEN_SYNC_*` and their `QUEEN_UDP_*` aliases; high-availability.md
//! section 2).

use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

use super::defaults;
use super::env::{at_least_one, ConfigError, Reader};

/// How replicas authenticate mesh connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MeshAuth {
    /// No secret: any well-formed HELLO is accepted.
    Off,
    /// HMAC-SHA256 over the dialer's nonce (the seed design; replayable).
    Hmac,
    /// Challenge-response bound to both server ids and the direction, and a
    /// per-link key for a MAC on every frame (`queen_proto::mesh_auth`).
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
    /// The server id of each entry of `peers` (`id@host:port`, else the host):
    /// strict mode dials expecting it and accepts only these ids.
    pub peer_ids: Vec<String>,
    /// Address the mesh listener binds (`QUEEN_MESH_HOST`, default `HOST`).
    pub host: IpAddr,
    pub port: u16,
    /// One deadline for the whole handshake of an accepted connection.
    pub handshake_timeout: Duration,
    /// Unauthenticated connections held at once, in total and per source address.
    pub max_unauthenticated: usize,
    pub max_unauthenticated_per_addr: usize,
    pub secret: String,
    pub heartbeat: Duration,
    pub auth: MeshAuth,
}

impl fmt::Debug for MeshConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MeshConfig")
            .field("sync_enabled", &self.sync_enabled)
            .field("peers", &self.peers)
            .field("peer_ids", &self.peer_ids)
            .field("host", &self.host)
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

/// The peer list (`host:port` or `server_id@host:port` entries) without the
/// entries that name this replica; returns the addresses and their ids.
fn read_peers(
    r: &Reader<'_>,
    server_id: &str,
    port: u16,
) -> Result<(Vec<String>, Vec<String>), ConfigError> {
    let mut peers = Vec::new();
    let mut ids = Vec::new();
    let Some((var, list)) = r.raw_aliased("QUEEN_MESH_PEERS", "QUEEN_UDP_PEERS") else {
        return Ok((peers, ids));
    };
    for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (id, addr) = match entry.split_once('@') {
            Some((id, addr)) if !id.trim().is_empty() => (Some(id.trim()), addr.trim()),
            Some(_) => return Err(ConfigError::new(var, entry, "empty server id before @")),
            None => (None, entry),
        };
        let Some((host, peer_port)) = addr.rsplit_once(':') else {
            return Err(ConfigError::new(var, entry, "expected host:port"));
        };
        let peer_port: u16 = peer_port
            .parse()
            .map_err(|_| ConfigError::new(var, entry, "port must be a number"))?;
        let is_self = id == Some(server_id)
            || (peer_port == port
                && (host == server_id
                    || host == "localhost"
                    || host == "127.0.0.1"
                    || host == "::1"));
        if !is_self {
            peers.push(addr.to_owned());
            ids.push(id.unwrap_or(host).to_owned());
        }
    }
    Ok((peers, ids))
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
    let (peers, peer_ids) = read_peers(r, server_id, port)?;
    let host = match r.optional::<IpAddr>("QUEEN_MESH_HOST")? {
        Some(h) => h,
        None => r.parsed("HOST", defaults::HOST)?,
    };
    let secret = r.string("QUEEN_SYNC_SECRET", "");
    let auth = read_auth_mode(r, &secret)?;
    let heartbeat = at_least_one(
        "QUEEN_SYNC_HEARTBEAT_MS",
        r.millis("QUEEN_SYNC_HEARTBEAT_MS", defaults::QUEEN_SYNC_HEARTBEAT_MS)?,
    )?;
    Ok(MeshConfig {
        sync_enabled: r.boolean("QUEEN_SYNC_ENABLED", defaults::QUEEN_SYNC_ENABLED)?,
        peers,
        peer_ids,
        host,
        port,
        handshake_timeout: at_least_one(
            "QUEEN_MESH_HANDSHAKE_TIMEOUT_MS",
            r.millis(
                "QUEEN_MESH_HANDSHAKE_TIMEOUT_MS",
                defaults::QUEEN_MESH_HANDSHAKE_TIMEOUT_MS,
            )?,
        )?,
        max_unauthenticated: at_least_one(
            "QUEEN_MESH_MAX_UNAUTHENTICATED",
            r.parsed(
                "QUEEN_MESH_MAX_UNAUTHENTICATED",
                defaults::QUEEN_MESH_MAX_UNAUTHENTICATED,
            )?,
        )?,
        max_unauthenticated_per_addr: at_least_one(
            "QUEEN_MESH_MAX_UNAUTHENTICATED_PER_ADDR",
            r.parsed(
                "QUEEN_MESH_MAX_UNAUTHENTICATED_PER_ADDR",
                defaults::QUEEN_MESH_MAX_UNAUTHENTICATED_PER_ADDR,
            )?,
        )?,
        secret,
        heartbeat,
        auth,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::super::Config;
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let env: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Config::from_env(&env)
    }

    #[test]
    fn peer_entries_may_name_their_server_id() {
        let c = config(&[
            ("QUEEN_SERVER_ID", "b"),
            (
                "QUEEN_MESH_PEERS",
                "a@10.0.0.1:6633, b@10.0.0.2:6633,broker-c:6633",
            ),
        ])
        .unwrap();
        // the entry naming this replica's id is itself, whatever its address
        assert_eq!(c.mesh.peers, vec!["10.0.0.1:6633", "broker-c:6633"]);
        assert_eq!(c.mesh.peer_ids, vec!["a", "broker-c"], "else the host");
        assert!(c
            .describe()
            .contains("peers=a@10.0.0.1:6633,broker-c@broker-c:6633"));
        let e = config(&[("QUEEN_MESH_PEERS", "@h:1")]).unwrap_err();
        assert_eq!(e.var, "QUEEN_MESH_PEERS");
    }

    #[test]
    fn the_mesh_binds_where_host_says_unless_queen_mesh_host_does() {
        let c = config(&[]).unwrap();
        assert_eq!(c.mesh.host.to_string(), "0.0.0.0");
        let c = config(&[("HOST", "127.0.0.1")]).unwrap();
        assert_eq!(c.mesh.host.to_string(), "127.0.0.1");
        let c = config(&[("HOST", "127.0.0.1"), ("QUEEN_MESH_HOST", "10.1.2.3")]).unwrap();
        assert_eq!(c.mesh.host.to_string(), "10.1.2.3");
        assert_eq!(c.host.to_string(), "127.0.0.1");
        assert!(c.describe().contains("host=10.1.2.3 port=6633"));
        let e = config(&[("QUEEN_MESH_HOST", "somewhere")]).unwrap_err();
        assert_eq!(e.var, "QUEEN_MESH_HOST");
    }

    #[test]
    fn pre_auth_bounds_have_defaults_and_refuse_zero() {
        let c = config(&[]).unwrap();
        assert_eq!(c.mesh.handshake_timeout, Duration::from_secs(5));
        assert_eq!(c.mesh.max_unauthenticated, 64);
        assert_eq!(c.mesh.max_unauthenticated_per_addr, 8);
        for var in [
            "QUEEN_MESH_HANDSHAKE_TIMEOUT_MS",
            "QUEEN_MESH_MAX_UNAUTHENTICATED",
            "QUEEN_MESH_MAX_UNAUTHENTICATED_PER_ADDR",
        ] {
            assert_eq!(config(&[(var, "0")]).unwrap_err().var, var);
        }
    }
}
