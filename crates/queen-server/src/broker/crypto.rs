//! Payload encryption at rest (http-api.md §5.14).
//!
//! With `QUEEN_ENCRYPTION_KEY` set and a queue's `encryptionEnabled`, payloads
//! are stored as `{"encrypted": b64, "iv": b64, "authTag": b64}`: AES-256-GCM
//! with a random 16-byte IV and a 16-byte tag, standard base64 — the layout of
//! the reference, so a database can be shared with it. Pops, DLQ reads and
//! message detail decrypt.

use aes_gcm::aead::consts::U16;
use aes_gcm::aead::generic_array::GenericArray;
use aes_gcm::aead::{Aead, KeyInit};
use aes_gcm::aes::Aes256;
use aes_gcm::AesGcm;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// AES-256-GCM with the reference's 16-byte IV.
type Aes256Gcm16 = AesGcm<Aes256, U16>;

/// Bytes of the GCM tag appended to the ciphertext.
const TAG_LEN: usize = 16;

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope {
    encrypted: String,
    iv: String,
    #[serde(rename = "authTag")]
    auth_tag: String,
}

/// Encrypts and decrypts payload text with the configured key.
pub struct PayloadCipher {
    cipher: Aes256Gcm16,
}

impl std::fmt::Debug for PayloadCipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PayloadCipher(<key redacted>)")
    }
}

impl PayloadCipher {
    pub fn new(key: &[u8; 32]) -> Self {
        Self {
            cipher: Aes256Gcm16::new(GenericArray::from_slice(key)),
        }
    }

    /// Returns the stored form (JSON text of the envelope) of `payload`.
    pub fn encrypt(&self, payload: &str) -> Result<String, String> {
        let mut iv = [0u8; 16];
        getrandom::fill(&mut iv).map_err(|e| format!("no randomness for the IV: {e}"))?;
        let mut sealed = self
            .cipher
            .encrypt(GenericArray::from_slice(&iv), payload.as_bytes())
            .map_err(|_| "encryption failed".to_owned())?;
        let tag = sealed.split_off(sealed.len() - TAG_LEN);
        serde_json::to_string(&Envelope {
            encrypted: STANDARD.encode(&sealed),
            iv: STANDARD.encode(iv),
            auth_tag: STANDARD.encode(tag),
        })
        .map_err(|e| e.to_string())
    }

    /// Returns the plaintext of a stored envelope, or `None` when `stored` is not
    /// an envelope this key opens (plaintext payloads pass through unchanged).
    pub fn decrypt(&self, stored: &str) -> Option<String> {
        if !stored.starts_with('{') || !stored.contains("\"authTag\"") {
            return None;
        }
        let env: Envelope = serde_json::from_str(stored).ok()?;
        let iv = STANDARD.decode(env.iv).ok()?;
        if iv.len() != 16 {
            return None;
        }
        let mut sealed = STANDARD.decode(env.encrypted).ok()?;
        sealed.extend(STANDARD.decode(env.auth_tag).ok()?);
        let plain = self
            .cipher
            .decrypt(GenericArray::from_slice(&iv), sealed.as_slice())
            .ok()?;
        String::from_utf8(plain).ok()
    }
}

/// True when `stored` has the shape of an encrypted envelope (`encrypted`
/// first, with an `authTag`), whichever key sealed it.
pub fn is_envelope(stored: &str) -> bool {
    stored.starts_with("{\"encrypted\"") && stored.contains("\"authTag\"")
}

/// Decrypts `stored` when a cipher is configured and it is an envelope it opens.
pub fn open(cipher: Option<&PayloadCipher>, stored: String) -> String {
    match cipher.and_then(|c| c.decrypt(&stored)) {
        Some(plain) => plain,
        None => stored,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_layout() {
        let c = PayloadCipher::new(&[7u8; 32]);
        let stored = c.encrypt(r#"{"card":"4111"}"#).unwrap();
        assert!(!stored.contains("4111"));
        let v: serde_json::Value = serde_json::from_str(&stored).unwrap();
        assert_eq!(
            STANDARD.decode(v["iv"].as_str().unwrap()).unwrap().len(),
            16
        );
        assert_eq!(
            STANDARD
                .decode(v["authTag"].as_str().unwrap())
                .unwrap()
                .len(),
            16
        );
        assert_eq!(c.decrypt(&stored).as_deref(), Some(r#"{"card":"4111"}"#));
        // two encryptions of one payload differ (fresh IV)
        assert_ne!(c.encrypt("1").unwrap(), c.encrypt("1").unwrap());
    }

    #[test]
    fn plaintext_and_foreign_envelopes_pass_through() {
        let c = PayloadCipher::new(&[7u8; 32]);
        assert_eq!(open(Some(&c), "{\"a\":1}".into()), "{\"a\":1}");
        let other = PayloadCipher::new(&[8u8; 32]).encrypt("secret").unwrap();
        assert_eq!(open(Some(&c), other.clone()), other);
        let mut tampered: serde_json::Value =
            serde_json::from_str(&c.encrypt("x").unwrap()).unwrap();
        tampered["encrypted"] = serde_json::json!(STANDARD.encode(b"y"));
        assert_eq!(c.decrypt(&tampered.to_string()), None);
    }
}
