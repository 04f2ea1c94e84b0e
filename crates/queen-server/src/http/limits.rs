//! What a client may send, checked once at the edge (docs/operations.md,
//! "Limits"): text that reaches PostgreSQL (names, ids, the token's `sub`)
//! holds no NUL character (PostgreSQL `text` cannot) and has a bounded
//! length; payloads must come back as sent (`queen_proto::payload`).

use serde_json::{Map, Value};

use super::error::ApiError;

/// Longest name (queue, partition, group, namespace, task, token subject) in characters.
pub const MAX_NAME_CHARS: usize = queen_proto::names::MAX_NAME_CHARS;

/// Longest error text a client stores (an ack's or a transaction operation's
/// `error`) in characters: room for an exception message with its context.
pub const MAX_ERROR_CHARS: usize = 16_384;

/// The longest value, in characters, of a free-text field a client can store
/// or look up, by the field's name (in a body, a query string or a path).
/// Fields with limits of their own (`key`, `timerKey`, lock and stream
/// `name`s, ephemeral names) are checked by their routes.
pub fn text_limit(field: &str) -> Option<usize> {
    match field {
        "queue" | "partition" | "consumerGroup" | "group" | "namespace" | "task"
        | "transactionId" | "traceName" | "traceNames" | "eventType" | "workerId" | "hostname" => {
            Some(MAX_NAME_CHARS)
        }
        "error" | "errorMessage" => Some(MAX_ERROR_CHARS),
        _ => None,
    }
}

/// Body arrays whose objects carry the fields of [`text_limit`] too.
const NESTED: [&str; 3] = ["items", "acknowledgments", "operations"];

/// Refuses text with a NUL character or longer than `max_chars`, naming `field`.
pub fn check_text(field: &str, value: &str, max_chars: usize) -> Result<(), ApiError> {
    if value.contains('\0') {
        return Err(nul_error(field));
    }
    // bytes first: the character count is only needed near the limit
    if value.len() > max_chars && value.chars().count() > max_chars {
        return Err(ApiError::bad_request(format!(
            "{field} must be at most {max_chars} characters"
        )));
    }
    Ok(())
}

/// The answer to a NUL character in `field`.
pub fn nul_error(field: &str) -> ApiError {
    ApiError::bad_request(format!("{field} must not contain NUL characters"))
}

/// Where `value` holds a NUL character (in a string or an object key), as a
/// path from `field` (`value.a[2]`, `value.{key}` for a key): JSON the
/// database stores as `jsonb` (KV values) cannot hold one.
pub fn nul_in_json(field: &str, value: &Value) -> Option<String> {
    match value {
        Value::String(s) => s.contains('\0').then(|| field.to_owned()),
        Value::Array(list) => list
            .iter()
            .enumerate()
            .find_map(|(i, v)| nul_in_json(&format!("{field}[{i}]"), v)),
        Value::Object(map) => map.iter().find_map(|(k, v)| {
            if k.contains('\0') {
                Some(format!("{field} (an object key)"))
            } else {
                nul_in_json(&format!("{field}.{k}"), v)
            }
        }),
        _ => None,
    }
}

/// Refuses a body with a NUL in a string outside message payloads, or a
/// free-text field longer than its [`text_limit`], naming the field.
pub fn check_body_strings(map: &Map<String, Value>) -> Result<(), ApiError> {
    if let Some(field) = queen_proto::payload::nul_field(map) {
        return Err(nul_error(&field));
    }
    check_lengths(map, "")
}

/// The length check of [`check_body_strings`]: the fields of `map`, the
/// strings of a listed array (`traceNames`), and the objects of the
/// `NESTED` arrays (a transaction's `operations[0].items[3].queue`).
/// Payloads and other values are not looked into.
fn check_lengths(map: &Map<String, Value>, prefix: &str) -> Result<(), ApiError> {
    for (key, value) in map {
        let path = |suffix: &str| format!("{prefix}{key}{suffix}");
        match (value, text_limit(key)) {
            (Value::String(s), Some(max)) => {
                check_text(&path(""), s, max)?;
                check_path_field(key, &path(""), s)?;
            }
            (Value::Array(list), Some(max)) => {
                for (i, v) in list.iter().enumerate() {
                    if let Value::String(s) = v {
                        check_text(&path(&format!("[{i}]")), s, max)?;
                        check_path_field(key, &path(&format!("[{i}]")), s)?;
                    }
                }
            }
            (Value::Array(list), None) if NESTED.contains(&key.as_str()) => {
                for (i, v) in list.iter().enumerate() {
                    if let Value::Object(m) = v {
                        check_lengths(m, &path(&format!("[{i}].")))?;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Free-text fields that later travel in a URL path (`/traces/by-name/:name`)
/// follow the rule of names (`queen_proto::names::path_problem`); queue,
/// partition and group names are checked as names by their routes.
fn check_path_field(key: &str, path: &str, value: &str) -> Result<(), ApiError> {
    if !matches!(key, "traceName" | "traceNames") {
        return Ok(());
    }
    match queen_proto::names::path_problem(value) {
        Some(p) => Err(ApiError::bad_request(format!("{path} {p}"))),
        None => Ok(()),
    }
}

/// Refuses a payload that cannot be returned as sent (400 with the reason).
pub fn check_payload(raw: &str, max_depth: usize) -> Result<(), ApiError> {
    queen_proto::payload::check_payload(raw, max_depth)
        .map_err(|e| ApiError::bad_request(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_bounded() {
        assert!(check_text("group", &"g".repeat(255), 255).is_ok());
        assert_eq!(
            check_text("group", &"g".repeat(256), 255)
                .unwrap_err()
                .message,
            "group must be at most 255 characters"
        );
        assert_eq!(
            check_text("sub", "a\0", 255).unwrap_err().message,
            "sub must not contain NUL characters"
        );
    }

    #[test]
    fn nul_is_found_anywhere_in_json() {
        let v = serde_json::json!({"a": [1, {"b": "x\u{0}"}]});
        assert_eq!(nul_in_json("value", &v).as_deref(), Some("value.a[1].b"));
        let v = serde_json::json!({"ok": {"k\u{0}": 1}});
        assert_eq!(
            nul_in_json("value", &v).as_deref(),
            Some("value.ok (an object key)")
        );
        assert_eq!(nul_in_json("value", &serde_json::json!({"a": "b"})), None);
    }

    #[test]
    fn body_fields_are_bounded_where_they_are() {
        let long = "x".repeat(256);
        let refused = |body: Value| {
            check_body_strings(body.as_object().unwrap())
                .unwrap_err()
                .message
        };
        assert_eq!(
            refused(serde_json::json!({"traceNames": ["ok", long]})),
            "traceNames[1] must be at most 255 characters"
        );
        assert_eq!(
            refused(
                serde_json::json!({"operations": [{"type": "push", "items": [{"queue": long}]}]})
            ),
            "operations[0].items[0].queue must be at most 255 characters"
        );
        let error = "e".repeat(MAX_ERROR_CHARS + 1);
        assert_eq!(
            refused(serde_json::json!({"acknowledgments": [{"error": error}]})),
            format!("acknowledgments[0].error must be at most {MAX_ERROR_CHARS} characters")
        );
        // payloads, data and unlisted fields are not names
        let fine = serde_json::json!({
            "items": [{"queue": "q", "payload": {"queue": long}}],
            "data": {"queue": long}, "value": long, "error": "e".repeat(MAX_ERROR_CHARS),
        });
        assert!(check_body_strings(fine.as_object().unwrap()).is_ok());
    }
}
