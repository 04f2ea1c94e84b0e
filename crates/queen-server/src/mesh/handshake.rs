//! Mesh authentication: the HELLO MAC, and in strict mode the per-frame MAC.
//!
//! Base (`hmac`): `mac = HMAC-SHA256(secret, nonce)`, checked in constant time.
//! Its documented limits: a captured HELLO can be replayed, and frames after
//! it carry no MAC. Strict (`hmac-strict`, ours): the HELLO MAC also covers a
//! timestamp, the listener refuses stale timestamps and nonces it has seen, and
//! every later frame carries `HMAC(k, counter || type || payload)` with
//! `k = HMAC(secret, "queen-mesh-frame" || nonce)` and a per-connection counter.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use queen_proto::mesh::Hello;
use sha2::Sha256;

use crate::config::MeshAuth;

type HmacSha256 = Hmac<Sha256>;

/// Bytes of a per-frame MAC in strict mode.
pub const FRAME_MAC_LEN: usize = 32;
/// How far a strict HELLO's timestamp may be from our clock (30 s).
pub const MAX_CLOCK_SKEW: Duration = Duration::from_secs(30);

fn mac_over(key: &[u8], parts: &[&[u8]]) -> HmacSha256 {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes keys of any length");
    for p in parts {
        mac.update(p);
    }
    mac
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Builds the HELLO a dialer sends.
pub fn make_hello(server_id: &str, secret: &str, auth: MeshAuth) -> Hello {
    let nonce = uuid::Uuid::new_v4().simple().to_string();
    let ts = (auth == MeshAuth::HmacStrict).then(now_ms);
    let mac = match auth {
        MeshAuth::Off => String::new(),
        MeshAuth::Hmac => hex::encode(
            mac_over(secret.as_bytes(), &[nonce.as_bytes()])
                .finalize()
                .into_bytes(),
        ),
        MeshAuth::HmacStrict => {
            let ts_text = ts.unwrap_or_default().to_string();
            hex::encode(
                mac_over(
                    secret.as_bytes(),
                    &[nonce.as_bytes(), b".", ts_text.as_bytes()],
                )
                .finalize()
                .into_bytes(),
            )
        }
    };
    Hello {
        server_id: server_id.to_owned(),
        nonce,
        mac,
        ts,
    }
}

/// Why a HELLO was refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum HelloError {
    #[error("bad HELLO mac")]
    BadMac,
    #[error("HELLO timestamp missing or outside the allowed clock skew")]
    StaleTimestamp,
    #[error("HELLO nonce replayed")]
    Replayed,
}

/// Nonces seen recently (strict mode), so a captured HELLO cannot be replayed.
#[derive(Debug, Default)]
pub struct ReplayCache {
    seen: Mutex<HashMap<String, Instant>>,
}

impl ReplayCache {
    /// Records `nonce`; false if it was already seen within the window.
    fn insert(&self, nonce: &str) -> bool {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let window = MAX_CLOCK_SKEW * 2;
        seen.retain(|_, at| at.elapsed() < window);
        seen.insert(nonce.to_owned(), Instant::now()).is_none()
    }
}

/// Verifies a HELLO (MAC in constant time; in strict mode also time and replay).
pub fn verify_hello(
    hello: &Hello,
    secret: &str,
    auth: MeshAuth,
    cache: &ReplayCache,
) -> Result<(), HelloError> {
    let given = hex::decode(&hello.mac).map_err(|_| HelloError::BadMac);
    match auth {
        MeshAuth::Off => Ok(()),
        MeshAuth::Hmac => mac_over(secret.as_bytes(), &[hello.nonce.as_bytes()])
            .verify_slice(&given?)
            .map_err(|_| HelloError::BadMac),
        MeshAuth::HmacStrict => {
            let ts = hello.ts.ok_or(HelloError::StaleTimestamp)?;
            let ts_text = ts.to_string();
            mac_over(
                secret.as_bytes(),
                &[hello.nonce.as_bytes(), b".", ts_text.as_bytes()],
            )
            .verify_slice(&given?)
            .map_err(|_| HelloError::BadMac)?;
            if (now_ms() - ts).unsigned_abs() > MAX_CLOCK_SKEW.as_millis() as u64 {
                return Err(HelloError::StaleTimestamp);
            }
            if !cache.insert(&hello.nonce) {
                return Err(HelloError::Replayed);
            }
            Ok(())
        }
    }
}

/// The per-connection key and counter of strict mode's frame MACs.
#[derive(Debug)]
pub struct FrameSigner {
    key: Vec<u8>,
    counter: u64,
}

impl FrameSigner {
    /// Derives the connection key from the secret and the HELLO nonce.
    pub fn new(secret: &str, nonce: &str) -> Self {
        let key = mac_over(secret.as_bytes(), &[b"queen-mesh-frame", nonce.as_bytes()])
            .finalize()
            .into_bytes()
            .to_vec();
        Self { key, counter: 0 }
    }

    fn mac(&self, counter: u64, kind: u8, payload: &[u8]) -> HmacSha256 {
        mac_over(&self.key, &[&counter.to_be_bytes(), &[kind], payload])
    }

    /// Returns `mac || payload` for the next frame.
    pub fn sign(&mut self, kind: u8, payload: &[u8]) -> Vec<u8> {
        self.counter += 1;
        let mut out = self
            .mac(self.counter, kind, payload)
            .finalize()
            .into_bytes()
            .to_vec();
        out.extend_from_slice(payload);
        out
    }

    /// Checks the next frame's MAC and returns its payload.
    pub fn verify<'a>(&mut self, kind: u8, signed: &'a [u8]) -> Option<&'a [u8]> {
        if signed.len() < FRAME_MAC_LEN {
            return None;
        }
        let (mac, payload) = signed.split_at(FRAME_MAC_LEN);
        self.counter += 1;
        self.mac(self.counter, kind, payload)
            .verify_slice(mac)
            .ok()?;
        Some(payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_hello_verifies_and_is_replayable() {
        let cache = ReplayCache::default();
        let h = make_hello("a", "k", MeshAuth::Hmac);
        assert_eq!(verify_hello(&h, "k", MeshAuth::Hmac, &cache), Ok(()));
        // the documented weakness of the base protocol: a replay passes
        assert_eq!(verify_hello(&h, "k", MeshAuth::Hmac, &cache), Ok(()));
        assert_eq!(
            verify_hello(&h, "other", MeshAuth::Hmac, &cache),
            Err(HelloError::BadMac)
        );
        let mut forged = h.clone();
        forged.nonce = "00".into();
        assert_eq!(
            verify_hello(&forged, "k", MeshAuth::Hmac, &cache),
            Err(HelloError::BadMac)
        );
    }

    #[test]
    fn strict_hello_refuses_replays_and_stale_clocks() {
        let cache = ReplayCache::default();
        let h = make_hello("a", "k", MeshAuth::HmacStrict);
        assert_eq!(verify_hello(&h, "k", MeshAuth::HmacStrict, &cache), Ok(()));
        assert_eq!(
            verify_hello(&h, "k", MeshAuth::HmacStrict, &cache),
            Err(HelloError::Replayed)
        );
        let mut old = make_hello("a", "k", MeshAuth::HmacStrict);
        old.ts = Some(old.ts.unwrap() - 120_000);
        // the MAC covers ts, so moving it breaks the MAC before the clock check
        assert_eq!(
            verify_hello(&old, "k", MeshAuth::HmacStrict, &cache),
            Err(HelloError::BadMac)
        );
        let base = make_hello("a", "k", MeshAuth::Hmac);
        assert_eq!(
            verify_hello(&base, "k", MeshAuth::HmacStrict, &cache),
            Err(HelloError::StaleTimestamp)
        );
    }

    #[test]
    fn frame_macs_bind_counter_type_and_payload() {
        let mut tx = FrameSigner::new("k", "n");
        let mut rx = FrameSigner::new("k", "n");
        let a = tx.sign(3, b"{\"q\":1}");
        let b = tx.sign(3, b"{\"q\":2}");
        assert_eq!(rx.verify(3, &a), Some(&b"{\"q\":1}"[..]));
        // replaying the first frame fails: the counter moved on
        assert_eq!(rx.verify(3, &a), None);
        let mut rx2 = FrameSigner::new("k", "n");
        assert!(rx2.verify(3, &a).is_some());
        assert_eq!(rx2.verify(4, &b), None, "type is covered");
        let mut other_conn = FrameSigner::new("k", "m");
        assert_eq!(other_conn.verify(3, &a), None, "nonce is covered");
    }
}
