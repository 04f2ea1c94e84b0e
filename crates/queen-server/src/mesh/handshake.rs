//! Mesh authentication.
//!
//! Base (`hmac`, the seed design, wire-compatible with it): the dialer sends
//! `HELLO {server_id, nonce, mac}` with `mac = HMAC-SHA256(secret, nonce)`,
//! checked in constant time; nothing else. Its documented limits: a captured
//! HELLO can be replayed, and frames after it carry no MAC.
//!
//! Strict (`hmac-strict`): a challenge-response bound to both server ids and
//! the direction, with a per-link HKDF key for a MAC on every later frame; the
//! pure protocol is `queen_proto::mesh_auth`. What lives here is the state a
//! listener keeps across connections (the replay cache) and the clock.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use queen_proto::mesh::Hello;
pub use queen_proto::mesh_auth::FrameSigner;
use sha2::Sha256;

use crate::config::MeshAuth;

type HmacSha256 = Hmac<Sha256>;

/// How long a strict HELLO nonce is remembered (twice the allowed clock skew,
/// so a HELLO whose timestamp still passes cannot pass twice).
const REPLAY_WINDOW: Duration =
    Duration::from_millis(2 * queen_proto::mesh_auth::MAX_CLOCK_SKEW_MS.unsigned_abs());
/// Most nonces the replay cache holds; past it the oldest half is dropped
/// (strict mode's challenge still refuses a replay, the cache only refuses it early).
const REPLAY_CACHE_MAX: usize = 4096;

fn base_mac(secret: &str, nonce: &str) -> HmacSha256 {
    let mut mac =
        HmacSha256::new_from_slice(secret.as_bytes()).expect("HMAC takes keys of any length");
    mac.update(nonce.as_bytes());
    mac
}

/// Unix milliseconds now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A fresh random nonce (128 bits of which 122 random, hex).
pub fn fresh_nonce() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// The HELLO of the base protocol (`hmac`, or `off` with an empty secret).
pub fn make_hello(server_id: &str, secret: &str) -> Hello {
    let nonce = fresh_nonce();
    let mac = if secret.is_empty() {
        String::new()
    } else {
        hex::encode(base_mac(secret, &nonce).finalize().into_bytes())
    };
    Hello {
        server_id: server_id.to_owned(),
        nonce,
        mac,
        ts: None,
        to: None,
    }
}

/// Verifies a base-protocol HELLO (`off` accepts any well-formed one).
pub fn verify_base_hello(hello: &Hello, secret: &str, auth: MeshAuth) -> bool {
    match auth {
        MeshAuth::Off => true,
        MeshAuth::Hmac => hex::decode(&hello.mac)
            .is_ok_and(|given| base_mac(secret, &hello.nonce).verify_slice(&given).is_ok()),
        MeshAuth::HmacStrict => false,
    }
}

/// Strict HELLO nonces seen recently, so a replayed HELLO is refused before
/// the listener spends a challenge on it.
#[derive(Debug, Default)]
pub struct ReplayCache {
    seen: Mutex<HashMap<String, Instant>>,
}

impl ReplayCache {
    /// Records `nonce`; false if it was already seen within the window.
    pub fn insert(&self, nonce: &str) -> bool {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.retain(|_, at| at.elapsed() < REPLAY_WINDOW);
        if seen.len() >= REPLAY_CACHE_MAX {
            let mut ages: Vec<Instant> = seen.values().copied().collect();
            ages.sort_unstable();
            let cut = ages[ages.len() / 2];
            seen.retain(|_, at| *at > cut);
        }
        seen.insert(nonce.to_owned(), Instant::now()).is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_hello_verifies_and_is_replayable() {
        let h = make_hello("a", "k");
        assert!(verify_base_hello(&h, "k", MeshAuth::Hmac));
        // the documented weakness of the base protocol: nothing stops a replay
        assert!(verify_base_hello(&h, "k", MeshAuth::Hmac));
        assert!(!verify_base_hello(&h, "other", MeshAuth::Hmac));
        let mut forged = h.clone();
        forged.nonce = "00".into();
        assert!(!verify_base_hello(&forged, "k", MeshAuth::Hmac));
        // the seed's wire: no ts, no to
        let json = serde_json::to_value(&h).unwrap();
        assert_eq!(json.as_object().unwrap().len(), 3, "{json}");
    }

    #[test]
    fn the_replay_cache_refuses_a_nonce_twice_and_stays_bounded() {
        let c = ReplayCache::default();
        assert!(c.insert("n"));
        assert!(!c.insert("n"));
        for i in 0..(REPLAY_CACHE_MAX * 2) {
            c.insert(&i.to_string());
        }
        assert!(c.seen.lock().unwrap().len() <= REPLAY_CACHE_MAX);
    }
}
