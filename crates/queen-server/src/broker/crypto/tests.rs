use super::*;

/// Key of the fixed vectors: 32 bytes of 7.
const KEY: [u8; 32] = [7u8; 32];

/// `{"card":"4111","n":1}` sealed the reference's way by an independent
/// implementation (Python `cryptography`'s AESGCM, the first 12 of the 16 IV
/// bytes 00..0f as the nonce), in the key order and spacing of the
/// reference's `jsonb` text.
const REFERENCE_ENVELOPE: &str = r#"{"iv": "AAECAwQFBgcICQoLDA0ODw==", "authTag": "9hzRitSCEKc8nbIfDpTkgg==", "encrypted": "Y6OKEW9t+3NVhtSt03pA2I8ejL9l"}"#;

#[test]
fn opens_an_envelope_the_reference_wrote() {
    let c = PayloadCipher::new(&KEY);
    assert_eq!(
        open(Some(&c), REFERENCE_ENVELOPE.into()).as_deref(),
        Ok(r#"{"card":"4111","n":1}"#)
    );
    let (plain, ours) = c.reseal_foreign(REFERENCE_ENVELOPE).unwrap().unwrap();
    assert_eq!(plain, r#"{"card":"4111","n":1}"#);
    // same IV, ciphertext and tag, in this broker's field order
    assert_eq!(
        ours,
        r#"{"encrypted":"Y6OKEW9t+3NVhtSt03pA2I8ejL9l","iv":"AAECAwQFBgcICQoLDA0ODw==","authTag":"9hzRitSCEKc8nbIfDpTkgg=="}"#
    );
    assert!(is_envelope(REFERENCE_ENVELOPE));
}

#[test]
fn writes_envelopes_the_reference_opens() {
    let c = PayloadCipher::new(&KEY);
    let stored = c.encrypt(r#"{"card":"4111"}"#).unwrap();
    assert!(!stored.contains("4111"));
    let v: serde_json::Value = serde_json::from_str(&stored).unwrap();
    let iv = STANDARD.decode(v["iv"].as_str().unwrap()).unwrap();
    let tag = STANDARD.decode(v["authTag"].as_str().unwrap()).unwrap();
    let mut sealed = STANDARD.decode(v["encrypted"].as_str().unwrap()).unwrap();
    assert_eq!((iv.len(), tag.len()), (16, 16));
    // the reference's decryption: AES-256-GCM, nonce = the first 12 IV bytes
    sealed.extend_from_slice(&tag);
    let reference = Aes256Gcm::new(GenericArray::from_slice(&KEY));
    let plain = reference
        .decrypt(GenericArray::from_slice(&iv[..12]), sealed.as_slice())
        .unwrap();
    assert_eq!(plain, br#"{"card":"4111"}"#);
    // the last 4 IV bytes play no part, as in the reference
    let mut other = v.clone();
    let mut iv2 = iv.clone();
    iv2[12..].copy_from_slice(&[0xff; 4]);
    other["iv"] = serde_json::json!(STANDARD.encode(&iv2));
    assert_eq!(
        c.decrypt(&other.to_string()).as_deref(),
        Some(r#"{"card":"4111"}"#)
    );
    // fresh IV each time
    assert_ne!(c.encrypt("1").unwrap(), c.encrypt("1").unwrap());
}

#[test]
fn still_opens_envelopes_sealed_with_the_whole_iv_as_nonce() {
    let iv = [9u8; 16];
    let legacy = Aes256Gcm16::new(GenericArray::from_slice(&KEY));
    let mut sealed = legacy
        .encrypt(GenericArray::from_slice(&iv), b"\"old\"".as_slice())
        .unwrap();
    let tag = sealed.split_off(sealed.len() - TAG_LEN);
    let stored = envelope_text(&sealed, &iv, &tag);
    let c = PayloadCipher::new(&KEY);
    assert_eq!(open(Some(&c), stored).as_deref(), Ok("\"old\""));
}

#[test]
fn an_envelope_that_does_not_open_is_refused_not_delivered() {
    let c = PayloadCipher::new(&KEY);
    let other = PayloadCipher::new(&[8u8; 32]).encrypt("secret").unwrap();
    assert!(open(Some(&c), other.clone()).is_err());
    assert!(open(None, REFERENCE_ENVELOPE.into()).is_err());
    assert!(c.reseal_foreign(&other).is_err());
    // admin views show it as stored
    assert_eq!(open_or_stored(Some(&c), other.clone()), other);
    let mut tampered: serde_json::Value = serde_json::from_str(&c.encrypt("x").unwrap()).unwrap();
    tampered["encrypted"] = serde_json::json!(STANDARD.encode(b"y"));
    assert_eq!(c.decrypt(&tampered.to_string()), None);
    assert!(open(Some(&c), tampered.to_string()).is_err());
}

#[test]
fn plaintext_passes_through() {
    let c = PayloadCipher::new(&KEY);
    for p in [
        "{\"a\":1}",
        "null",
        "\"authTag\"",
        "[1,2]",
        // an object with other fields is a payload, not an envelope
        r#"{"encrypted":"a","iv":"b","authTag":"c","x":1}"#,
    ] {
        assert_eq!(open(Some(&c), p.into()).as_deref(), Ok(p));
        assert_eq!(open(None, p.into()).as_deref(), Ok(p));
        assert_eq!(c.reseal_foreign(p), Ok(None));
    }
}
