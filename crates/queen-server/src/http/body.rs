//! Request bodies and query strings, read leniently where the contract says so.

use std::collections::HashMap;

use axum::body::Body;
use bytes::Bytes;
use serde_json::{Map, Value};
use uuid::Uuid;

use super::error::ApiError;

/// Reads the whole body. `RequestBodyLimitLayer` enforces the limit (a body
/// without `Content-Length` fails while it is read, past `limit`): that is
/// answered 413 naming `limit`; a body past `HTTP_BODY_TIMEOUT_MS` 408; a
/// body that is malformed (a bad chunk) or breaks off 400.
pub async fn read_bytes(body: Body, limit: usize) -> Result<Bytes, ApiError> {
    axum::body::to_bytes(body, usize::MAX)
        .await
        .map_err(|e| super::edge::body_error(&e, limit))
}

/// Parses a JSON object body. An empty body counts as `{}`; a string with a
/// NUL character (outside message payloads) is refused naming its field.
pub fn parse_object(bytes: &[u8]) -> Result<Map<String, Value>, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(map)) => {
            super::limits::check_body_strings(&map)?;
            Ok(map)
        }
        Ok(_) => Err(ApiError::bad_request("Request body must be a JSON object")),
        Err(e) => Err(ApiError::bad_request(format!("Invalid JSON: {e}"))),
    }
}

/// Reads an optional string field: absent and `null` are `None`; any other
/// non-string is refused with `message`.
pub fn opt_str<'a>(
    map: &'a Map<String, Value>,
    key: &str,
    message: &str,
) -> Result<Option<&'a str>, ApiError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ApiError::bad_request(message)),
    }
}

/// Reads an optional UUID field; an empty string counts as absent.
pub fn opt_uuid(map: &Map<String, Value>, key: &str) -> Result<Option<Uuid>, ApiError> {
    let bad = || ApiError::bad_request(format!("{key} must be a valid UUID"));
    match opt_str(map, key, &format!("{key} must be a string"))? {
        None | Some("") => Ok(None),
        Some(s) => Uuid::parse_str(s).map(Some).map_err(|_| bad()),
    }
}

/// Query parameters of a request, by name.
pub type Query = HashMap<String, String>;

/// A query boolean: `true` or `1` are true, anything else (or absent) is the default.
pub fn query_bool(q: &Query, key: &str, default: bool) -> bool {
    match q.get(key).map(String::as_str) {
        Some("true" | "1") => true,
        Some(_) => false,
        None => default,
    }
}

/// A query integer; unparsable or absent gives the default.
pub fn query_u64(q: &Query, key: &str, default: u64) -> u64 {
    q.get(key)
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(default)
}

/// A query string; empty counts as absent.
pub fn query_str<'a>(q: &'a Query, key: &str) -> Option<&'a str> {
    q.get(key).map(String::as_str).filter(|s| !s.is_empty())
}

/// An optional query timestamp; a value that does not parse is refused by name.
pub fn query_time(q: &Query, key: &str) -> Result<Option<chrono::DateTime<chrono::Utc>>, ApiError> {
    match query_str(q, key) {
        None => Ok(None),
        Some(s) => queen_proto::time::parse_timestamp(s)
            .map(Some)
            .ok_or_else(|| ApiError::bad_request(format!("{key} must be an ISO-8601 timestamp"))),
    }
}

/// `limit` and `offset` of a listing, with the route's default limit and a ceiling.
pub fn query_page(q: &Query, default_limit: u64) -> (i64, i64) {
    /// Longest page any listing returns.
    const MAX_LIMIT: u64 = 10_000;
    let limit = query_u64(q, "limit", default_limit).clamp(1, MAX_LIMIT);
    let offset = query_u64(q, "offset", 0).min(i64::MAX as u64);
    (limit as i64, offset as i64)
}

/// Parses a path segment that must be a UUID.
pub fn path_uuid(s: &str, what: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(s).map_err(|_| ApiError::bad_request(format!("{what} must be a valid UUID")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_body_is_an_empty_object() {
        assert!(parse_object(b"").unwrap().is_empty());
        assert!(parse_object(b"  \n").unwrap().is_empty());
    }

    #[test]
    fn malformed_json_names_the_problem() {
        let e = parse_object(b"{\"a\":").unwrap_err();
        assert!(e.message.starts_with("Invalid JSON: "), "{}", e.message);
        let e = parse_object(b"[1]").unwrap_err();
        assert_eq!(e.message, "Request body must be a JSON object");
    }

    #[test]
    fn query_values_are_lenient() {
        let q: Query = [("wait", "1"), ("batch", "x"), ("autoAck", "yes")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        assert!(query_bool(&q, "wait", false));
        assert!(!query_bool(&q, "autoAck", true));
        assert!(query_bool(&q, "absent", true));
        assert_eq!(query_u64(&q, "batch", 7), 7);
    }
}
