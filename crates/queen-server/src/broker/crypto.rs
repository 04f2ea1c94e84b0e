//! Payload encryption at rest (http-api.md §5.14).
//!
//! With `QUEEN_ENCRYPTION_KEY` set and a queue's `encryptionEnabled`, payloads
//! are stored as `{"encrypted": b64, "iv": b64, "authTag": b64}`: AES-256-GCM
//! with a 16-byte tag, no associated data, standard base64. The IV stored is
//! 16 random bytes, of which the cipher uses the first 12 as the GCM nonce:
//! what the reference does (it never sets the IV length, so its library uses
//! the 12-byte default; reference-schema-0.15.md §3). So this broker writes
//! envelopes the reference opens, and opens the reference's, and a database
//! (or an import) can carry them across unchanged.
//!
//! Reading also accepts the envelopes this broker wrote before it followed
//! that rule (all 16 bytes as the nonce), so nothing stored earlier is lost.
//!
//! An envelope no key here opens is never handed out as if it were the
//! message's data: [`open`] answers [`Sealed`], and the pop or fetch that
//! met it fails naming the message. Admin views show the stored envelope
//! ([`open_or_stored`]), marked as stored encrypted.

use aes_gcm::aead::consts::U16;
use aes_gcm::aead::generic_array::GenericArray;
use aes_gcm::aead::{Aead, KeyInit};
use aes_gcm::aes::Aes256;
use aes_gcm::{Aes256Gcm, AesGcm};
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// AES-256-GCM with all 16 IV bytes as the nonce: how this broker sealed
/// payloads before it wrote the reference's envelopes (read only).
type Aes256Gcm16 = AesGcm<Aes256, U16>;

/// Bytes of the GCM tag appended to the ciphertext.
const TAG_LEN: usize = 16;
/// Bytes of the IV stored in an envelope (the reference's layout).
const IV_LEN: usize = 16;
/// Bytes of the IV the cipher uses as its GCM nonce: the first 12 stored.
const NONCE_LEN: usize = 12;

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope {
    encrypted: String,
    iv: String,
    #[serde(rename = "authTag")]
    auth_tag: String,
}

/// Why an envelope does not open: another key sealed it (or it was altered).
const OTHER_KEY: &str = "QUEEN_ENCRYPTION_KEY does not open it (another key sealed it)";
/// Why an envelope does not open: no key is configured.
const NO_KEY: &str = "QUEEN_ENCRYPTION_KEY is not set";

/// A stored envelope that no key of this broker opens.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Sealed(pub &'static str);

/// Encrypts and decrypts payload text with the configured key.
pub struct PayloadCipher {
    cipher: Aes256Gcm,
    legacy: Aes256Gcm16,
}

impl std::fmt::Debug for PayloadCipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PayloadCipher(<key redacted>)")
    }
}

impl PayloadCipher {
    pub fn new(key: &[u8; 32]) -> Self {
        Self {
            cipher: Aes256Gcm::new(GenericArray::from_slice(key)),
            legacy: Aes256Gcm16::new(GenericArray::from_slice(key)),
        }
    }

    /// Returns the stored form (JSON text of the envelope) of `payload`:
    /// a random 16-byte IV, its first 12 bytes the nonce, as the reference.
    pub fn encrypt(&self, payload: &str) -> Result<String, String> {
        let mut iv = [0u8; IV_LEN];
        getrandom::fill(&mut iv).map_err(|e| format!("no randomness for the IV: {e}"))?;
        let mut sealed = self
            .cipher
            .encrypt(
                GenericArray::from_slice(&iv[..NONCE_LEN]),
                payload.as_bytes(),
            )
            .map_err(|_| "encryption failed".to_owned())?;
        let tag = sealed.split_off(sealed.len() - TAG_LEN);
        Ok(envelope_text(&sealed, &iv, &tag))
    }

    /// Returns the plaintext of a stored envelope, or `None` when `stored` is not
    /// an envelope this key opens (plaintext payloads included).
    pub fn decrypt(&self, stored: &str) -> Option<String> {
        let parts = parse(stored)?;
        self.open_parts(&parts).ok()
    }

    fn open_parts(&self, p: &Parts) -> Result<String, Sealed> {
        let mut sealed = p.ciphertext.clone();
        sealed.extend_from_slice(&p.tag);
        let plain = match self.cipher.decrypt(
            GenericArray::from_slice(&p.iv[..NONCE_LEN]),
            sealed.as_slice(),
        ) {
            Ok(plain) => plain,
            Err(_) if p.iv.len() == IV_LEN => self
                .legacy
                .decrypt(GenericArray::from_slice(&p.iv), sealed.as_slice())
                .map_err(|_| Sealed(OTHER_KEY))?,
            Err(_) => return Err(Sealed(OTHER_KEY)),
        };
        String::from_utf8(plain).map_err(|_| Sealed("its plaintext is not UTF-8"))
    }

    /// Opens an envelope whose JSON may be in any key order and spacing (the
    /// reference's `jsonb` text) and returns the plaintext and the envelope in
    /// this broker's stored form (same IV, ciphertext and tag). `Ok(None)`:
    /// `stored` is not an envelope.
    pub fn reseal_foreign(&self, stored: &str) -> Result<Option<(String, String)>, Sealed> {
        let Some(parts) = parse(stored) else {
            return Ok(None);
        };
        let plain = self.open_parts(&parts)?;
        Ok(Some((
            plain,
            envelope_text(&parts.ciphertext, &parts.iv, &parts.tag),
        )))
    }
}

/// The decoded fields of an envelope.
struct Parts {
    ciphertext: Vec<u8>,
    iv: Vec<u8>,
    tag: Vec<u8>,
}

/// Reads `stored` as an envelope: a JSON object of exactly the three string
/// fields, in any order, with base64 an IV of 12 or 16 bytes and a 16-byte tag.
fn parse(stored: &str) -> Option<Parts> {
    let s = stored.trim_start();
    if !s.starts_with('{') || !s.contains("\"authTag\"") {
        return None;
    }
    let env: Envelope = serde_json::from_str(s).ok()?;
    let iv = STANDARD.decode(env.iv).ok()?;
    let tag = STANDARD.decode(env.auth_tag).ok()?;
    if !(iv.len() == IV_LEN || iv.len() == NONCE_LEN) || tag.len() != TAG_LEN {
        return None;
    }
    Some(Parts {
        ciphertext: STANDARD.decode(env.encrypted).ok()?,
        iv,
        tag,
    })
}

fn envelope_text(ciphertext: &[u8], iv: &[u8], tag: &[u8]) -> String {
    // three base64 strings: serializing them cannot fail
    serde_json::to_string(&Envelope {
        encrypted: STANDARD.encode(ciphertext),
        iv: STANDARD.encode(iv),
        auth_tag: STANDARD.encode(tag),
    })
    .unwrap_or_default()
}

/// True when `stored` has the shape of an encrypted envelope, whichever key
/// sealed it.
pub fn is_envelope(stored: &str) -> bool {
    parse(stored).is_some()
}

/// The payload to deliver: `stored` itself when it is not an envelope, its
/// plaintext when the configured key opens it, and [`Sealed`] otherwise (no
/// key configured, or another key sealed it).
pub fn open(cipher: Option<&PayloadCipher>, stored: String) -> Result<String, Sealed> {
    let Some(parts) = parse(&stored) else {
        return Ok(stored);
    };
    match cipher {
        Some(c) => c.open_parts(&parts),
        None => Err(Sealed(NO_KEY)),
    }
}

/// [`open`] for admin views: an envelope that does not open is shown as stored.
pub fn open_or_stored(cipher: Option<&PayloadCipher>, stored: String) -> String {
    match parse(&stored) {
        None => stored,
        Some(parts) => match cipher.map(|c| c.open_parts(&parts)) {
            Some(Ok(plain)) => plain,
            _ => stored,
        },
    }
}

impl super::Broker {
    /// The payload of a message to hand to a consumer ([`open`]), or the
    /// refusal naming the message when it is an envelope no key here opens.
    pub(super) fn deliverable(
        &self,
        queue: &str,
        partition: &str,
        transaction_id: &str,
        stored: String,
    ) -> Result<String, super::BrokerError> {
        open(self.cipher.as_ref(), stored).map_err(|Sealed(why)| {
            super::BrokerError::Sealed(format!(
                "cannot deliver message {transaction_id} of queue {queue} partition {partition}: \
                 its payload is an encryption envelope and {why}"
            ))
        })
    }
}

#[cfg(test)]
mod tests;
