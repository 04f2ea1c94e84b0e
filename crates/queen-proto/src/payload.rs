//! What a stored payload and a request body must be, free of I/O: the
//! checks behind the broker's "Limits" (docs/operations.md).
//!
//! - A payload is stored byte for byte and answered as stored, so it must be
//!   JSON every reader can parse back ([`check_payload`]): nested at most a
//!   given depth, every number a finite IEEE double, every string valid
//!   Unicode (no lone surrogate escapes).
//! - Strings of a request body other than message payloads reach PostgreSQL
//!   text, which cannot hold a NUL character ([`nul_field`]).

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Why a payload was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    #[error("payload is nested deeper than {0} levels")]
    TooDeep(usize),
    #[error("payload cannot be stored as sent: {0}")]
    Invalid(String),
}

/// Checks a payload (raw JSON text) can be returned faithfully: at most
/// `max_depth` levels, numbers within a double, no lone surrogate.
pub fn check_payload(raw: &str, max_depth: usize) -> Result<(), PayloadError> {
    let mut de = serde_json::Deserializer::from_str(raw);
    let checked = Checker {
        depth_left: max_depth,
    }
    .deserialize(&mut de)
    .and_then(|()| de.end());
    checked.map_err(|e| {
        let text = e.to_string();
        if text.starts_with(TOO_DEEP) || text.starts_with("recursion limit") {
            PayloadError::TooDeep(max_depth)
        } else {
            PayloadError::Invalid(text)
        }
    })
}

const TOO_DEEP: &str = "nested too deep";

/// Walks a JSON value without building it, counting depth.
#[derive(Clone, Copy)]
struct Checker {
    depth_left: usize,
}

impl Checker {
    fn deeper<E: serde::de::Error>(self) -> Result<Self, E> {
        match self.depth_left.checked_sub(1) {
            Some(depth_left) => Ok(Self { depth_left }),
            None => Err(E::custom(TOO_DEEP)),
        }
    }
}

impl<'de> DeserializeSeed<'de> for Checker {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Checker {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<(), E> {
        if v.is_finite() {
            Ok(())
        } else {
            Err(E::custom("number out of range"))
        }
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let inner = self.deeper()?;
        while seq.next_element_seed(inner)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let inner = self.deeper()?;
        while map.next_key_seed(inner)?.is_some() {
            map.next_value_seed(inner)?;
        }
        Ok(())
    }
}

/// The path (`operations[2].transactionId`) of the first string of a body
/// (a key or a value) that holds a NUL character. Message payloads (`payload`,
/// `data` of the objects of an `items` array) are not looked into: they are
/// stored as JSON text, where a NUL is the escape `\u0000`. A key with a NUL
/// is named `a field name`.
pub fn nul_field(map: &Map<String, Value>) -> Option<String> {
    let mut path = String::new();
    walk_object(map, &mut path, false).err()
}

fn walk_object(map: &Map<String, Value>, path: &mut String, in_items: bool) -> Result<(), String> {
    for (key, value) in map {
        if key.contains('\0') {
            return Err("a field name".to_owned());
        }
        let len = path.len();
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(key);
        let payload = in_items && (key == "payload" || key == "data");
        if !payload {
            walk(value, path, key == "items")?;
        }
        path.truncate(len);
    }
    Ok(())
}

fn walk(value: &Value, path: &mut String, items: bool) -> Result<(), String> {
    match value {
        Value::String(s) if s.contains('\0') => Err(path.clone()),
        Value::Array(list) => {
            for (i, v) in list.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                match v {
                    Value::Object(m) => walk_object(m, path, items)?,
                    other => walk(other, path, false)?,
                }
                path.truncate(len);
            }
            Ok(())
        }
        Value::Object(m) => walk_object(m, path, false),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(depth: usize) -> String {
        format!("{}{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn payloads_that_cannot_come_back_are_refused() {
        for ok in [
            "1",
            "1e300",
            "-0.0",
            "\"\\u0000\"",
            "\"\\ud83d\\ude00\"",
            "{\"a\":[1,{\"b\":null}]}",
            &nested(64),
        ] {
            assert_eq!(check_payload(ok, 64), Ok(()), "{ok}");
        }
        for bad in [
            "1e400",
            "-1e400",
            "\"\\ud800\"",
            "\"\\udc00x\"",
            "{\"\\ud800\":1}",
        ] {
            assert!(
                matches!(check_payload(bad, 64), Err(PayloadError::Invalid(_))),
                "{bad}: {:?}",
                check_payload(bad, 64)
            );
        }
        for depth in [65, 129, 10_000] {
            assert_eq!(
                check_payload(&nested(depth), 64),
                Err(PayloadError::TooDeep(64))
            );
        }
    }

    #[test]
    fn nul_in_a_body_is_found_by_path() {
        let body: Value = serde_json::json!({
            "operations": [{"type": "push", "items": [{"queue": "q", "payload": {"x": "a\u{0}"}}]},
                           {"type": "ack", "transactionId": "t\u{0}"}]
        });
        assert_eq!(
            nul_field(body.as_object().unwrap()).as_deref(),
            Some("operations[1].transactionId")
        );
        let ok: Value = serde_json::json!({"items": [{"payload": "\u{0}", "data": ["\u{0}"]}]});
        assert_eq!(nul_field(ok.as_object().unwrap()), None);
        let trace: Value = serde_json::json!({"data": {"note": "\u{0}"}});
        assert_eq!(
            nul_field(trace.as_object().unwrap()).as_deref(),
            Some("data.note")
        );
    }

    /// Replays every saved input under `fuzz/corpus/http_body/` (and crash
    /// artifacts, if any) through the fuzz target's checks.
    #[test]
    fn corpus_replays_without_panicking() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
        let mut seen = 0;
        for dir in [
            root.join("corpus/http_body"),
            root.join("artifacts/http_body"),
        ] {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let bytes = std::fs::read(entry.path()).unwrap();
                let Ok(text) = std::str::from_utf8(&bytes) else {
                    continue;
                };
                if check_payload(text, 64).is_ok() {
                    let v: Value = serde_json::from_str(text).unwrap();
                    assert!(serde_json::from_str::<Value>(&v.to_string()).is_ok());
                }
                if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(text) {
                    let _ = nul_field(&map);
                }
                seen += 1;
            }
        }
        assert!(seen >= 5, "the corpus has seed files");
    }

    proptest::proptest! {
        /// Whatever the check accepts, a strict parser reads, and what it
        /// reads serializes back to an equal value.
        #[test]
        fn accepted_payloads_parse_back(text in "[\\[\\]{}\",:0-9a-z.eE+\\-\\\\u ]{0,64}") {
            if check_payload(&text, 8).is_ok() {
                let v: Value = serde_json::from_str(&text).unwrap();
                proptest::prop_assert!(serde_json::from_str::<Value>(&v.to_string()).is_ok());
            }
        }
    }
}
