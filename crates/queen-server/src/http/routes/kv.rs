//! `POST /api/v1/kv`: key/value operations in one call, applied whole, and
//! the parsing and rendering the `kv` rider of `/transaction` shares.
//!
//! Every bad input refuses the whole call with a 4xx (`kv_bad_request`,
//! 413 `payload_too_large`) before anything is written; every business
//! verdict (absent key, lost race, refused increment) is a 200 element.

use std::collections::HashSet;

use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};

use crate::app::AppState;
use crate::http::surface_error::{kv_time, read_operations, SurfaceError};
use crate::store::{KvKind, KvOp, KvOutcome, KvPrecondition, KvResult, KvRow};

/// Most operations in one call.
pub const MAX_OPS: usize = 256;
/// Most keys one call may touch (getMany counts its keys, getPrefix its limit).
pub const MAX_KEYS: usize = 1024;
/// Inside `/transaction`.
pub const TX_MAX_OPS: usize = 64;
pub const TX_MAX_KEYS: usize = 256;
/// Longest key, in bytes.
pub const MAX_KEY_BYTES: usize = 512;
/// Largest value, serialized.
pub const MAX_VALUE_BYTES: usize = 64 << 10;
/// Longest ttlSeconds accepted (about 68 years: what fits the store).
const MAX_TTL: i64 = i32::MAX as i64;

fn bad(reason: &str, detail: impl Into<String>) -> SurfaceError {
    SurfaceError::bad("kv_bad_request", reason, detail)
}

pub async fn kv(State(app): State<AppState>, body: Body) -> Result<Response, SurfaceError> {
    let ops = read_operations(
        body,
        app.broker.config().max_body_bytes,
        "kv_bad_request",
        "kv_bad_body",
    )
    .await?;
    let parsed = parse_ops(&ops, MAX_OPS, MAX_KEYS, false)?;
    let outcome = app.broker.kv(parsed.clone()).await.map_err(|e| {
        SurfaceError::from_broker(e, "kv_bad_request", "kv_unavailable", "kv_error")
    })?;
    Ok(match outcome {
        KvOutcome::Done(results) => {
            let results: Vec<Value> = parsed
                .iter()
                .zip(&results)
                .enumerate()
                .map(|(i, (op, r))| element(i, op, r))
                .collect();
            Json(json!({ "results": results })).into_response()
        }
        KvOutcome::Precondition(p) => Json(precondition(&p, p.index)).into_response(),
    })
}

/// The answer of a call a lost `required` op stopped (`failed_index` in the
/// caller's index space).
pub fn precondition(p: &KvPrecondition, failed_index: usize) -> Value {
    json!({
        "ok": false,
        "reason": "kv_precondition",
        "failedIndex": failed_index,
        "kvReason": p.reason,
        "version": p.version,
        "value": p.value,
    })
}

fn row(r: &KvRow) -> Value {
    let mut m = Map::new();
    m.insert("key".into(), json!(r.key));
    if let Some(v) = &r.value {
        m.insert("value".into(), v.clone());
    }
    m.insert("version".into(), json!(r.version));
    m.insert("expiresAt".into(), json!(r.expires_at.map(kv_time)));
    m.insert("updatedAt".into(), json!(kv_time(r.updated_at)));
    Value::Object(m)
}

/// One result element (§2.4 of the client surface sheet).
pub fn element(index: usize, op: &KvOp, r: &KvResult) -> Value {
    let mut m = Map::new();
    m.insert("index".into(), json!(index));
    m.insert("op".into(), json!(op.kind.name()));
    match r {
        KvResult::Write {
            applied,
            reason,
            value,
            version,
        } => {
            m.insert("applied".into(), json!(applied));
            if let (false, Some(reason)) = (applied, reason) {
                m.insert("reason".into(), json!(reason));
            }
            m.insert("key".into(), json!(op.key));
            if !(op.kind == KvKind::Check && *applied) {
                m.insert("value".into(), value.clone());
            }
            m.insert("version".into(), json!(version));
        }
        KvResult::Get(None) => {
            m.insert("found".into(), json!(false));
            m.insert("key".into(), json!(op.key));
        }
        KvResult::Get(Some(r)) => {
            m.insert("found".into(), json!(true));
            if let Value::Object(fields) = row(r) {
                m.extend(fields);
            }
        }
        KvResult::Many {
            rows,
            missing,
            truncated,
        } => {
            m.insert("rows".into(), rows.iter().map(row).collect());
            m.insert("missing".into(), json!(missing));
            m.insert("truncated".into(), json!(truncated));
        }
        KvResult::Prefix {
            rows,
            truncated,
            next_after,
        } => {
            m.insert("rows".into(), rows.iter().map(row).collect());
            m.insert("truncated".into(), json!(truncated));
            m.insert("nextAfter".into(), json!(next_after));
        }
    }
    Value::Object(m)
}

pub(super) fn is_namespace(ns: &str) -> bool {
    let b = ns.as_bytes();
    let ok = |c: u8, first: bool| {
        c.is_ascii_lowercase() || c.is_ascii_digit() || (!first && matches!(c, b'.' | b'_' | b'-'))
    };
    !b.is_empty() && b.len() <= 64 && ok(b[0], true) && b[1..].iter().all(|&c| ok(c, false))
}

fn key_of(v: Option<&Value>, what: &str) -> Result<String, SurfaceError> {
    match v {
        Some(Value::String(s)) if !s.is_empty() && !s.contains('\0') => {
            if s.len() > MAX_KEY_BYTES {
                Err(SurfaceError::too_large(
                    "kv_key_too_large",
                    format!("{what} longer than {MAX_KEY_BYTES} bytes"),
                ))
            } else {
                Ok(s.clone())
            }
        }
        _ => Err(bad(
            "kv_bad_key",
            format!("{what} must be a non-empty string without NUL"),
        )),
    }
}

fn number(v: Option<&Value>, what: &str) -> Result<Option<String>, SurfaceError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(_) => Err(bad("kv_bad_request", format!("{what} must be a number"))),
    }
}

fn flag(m: &Map<String, Value>, key: &str) -> Result<bool, SurfaceError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(bad("kv_bad_request", format!("{key} must be a boolean"))),
    }
}

/// Validates a whole call; any refusal refuses all of it.
pub fn parse_ops(
    ops: &[Value],
    max_ops: usize,
    max_keys: usize,
    in_transaction: bool,
) -> Result<Vec<KvOp>, SurfaceError> {
    if ops.len() > max_ops {
        return Err(bad(
            "kv_too_many_ops",
            format!("at most {max_ops} operations per call"),
        ));
    }
    let mut out = Vec::with_capacity(ops.len());
    let mut budget = 0usize;
    let mut written: HashSet<(String, String)> = HashSet::new();
    for (i, v) in ops.iter().enumerate() {
        let op = parse_op(v, in_transaction).map_err(|mut c| {
            c.detail = format!("operation {i}: {}", c.detail);
            c
        })?;
        budget += match op.kind {
            KvKind::GetMany => op.keys.len(),
            KvKind::GetPrefix => op.limit as usize,
            _ => 1,
        };
        if op.kind.is_write_or_check() && !written.insert((op.ns.clone(), op.key.clone())) {
            return Err(bad(
                "kv_duplicate_key_in_call",
                format!(
                    "operation {i}: key {:?} is written or checked twice",
                    op.key
                ),
            ));
        }
        out.push(op);
    }
    if budget > max_keys {
        return Err(bad(
            "kv_too_many_keys",
            format!("the call touches {budget} keys, more than {max_keys}"),
        ));
    }
    Ok(out)
}

fn parse_op(v: &Value, in_transaction: bool) -> Result<KvOp, SurfaceError> {
    let m = v
        .as_object()
        .ok_or_else(|| bad("kv_bad_request", "an operation must be an object"))?;
    for t in ["tenant", "tenantId", "_tenant"] {
        if m.contains_key(t) {
            return Err(bad(
                "kv_tenant_not_an_input",
                format!("{t} is not an input"),
            ));
        }
    }
    let kind = match m.get("op").and_then(Value::as_str) {
        Some("get") => KvKind::Get,
        Some("getMany") => KvKind::GetMany,
        Some("getPrefix") => KvKind::GetPrefix,
        Some("put") => KvKind::Put,
        Some("putIfAbsent") => KvKind::PutIfAbsent,
        Some("delete") => KvKind::Delete,
        Some("incr") => KvKind::Incr,
        Some("check") => KvKind::Check,
        other => {
            return Err(bad(
                "kv_unknown_op",
                format!(
                    "unknown op {}",
                    other.map_or("(none)".into(), |s| format!("{s:?}"))
                ),
            ))
        }
    };
    let ns = match m.get("ns") {
        Some(Value::String(s)) if is_namespace(s) => s.clone(),
        _ => {
            return Err(bad(
                "kv_bad_namespace",
                "ns must match ^[a-z0-9][a-z0-9._-]{0,63}$",
            ))
        }
    };
    let mut op = KvOp::new(kind, ns, String::new());
    op.required = flag(m, "required")?;
    match kind {
        KvKind::GetMany => {
            let Some(Value::Array(keys)) = m.get("keys") else {
                return Err(bad("kv_bad_request", "getMany needs a keys array"));
            };
            if keys.is_empty() {
                return Err(bad("kv_bad_request", "getMany needs at least one key"));
            }
            op.keys = keys
                .iter()
                .map(|k| key_of(Some(k), "key"))
                .collect::<Result<_, _>>()?;
        }
        KvKind::GetPrefix => {
            if in_transaction {
                return Err(bad(
                    "kv_get_prefix_not_allowed_in_transaction",
                    "getPrefix is not allowed inside a transaction",
                ));
            }
            match m.get("prefix") {
                Some(Value::String(s)) if !s.is_empty() => {
                    op.key = key_of(m.get("prefix"), "prefix")?;
                }
                _ => return Err(bad("kv_prefix_required", "getPrefix needs a prefix")),
            }
            op.after = match m.get("after") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) if s.contains('\0') => {
                    return Err(bad("kv_bad_request", "after must not contain NUL"))
                }
                Some(Value::String(s)) => Some(s.clone()),
                Some(_) => return Err(bad("kv_bad_request", "after must be a string")),
            };
            op.limit = match m.get("limit") {
                None | Some(Value::Null) => 100,
                Some(Value::Number(n)) if n.is_i64() || n.is_u64() => {
                    n.as_i64().unwrap_or(i64::MAX).clamp(1, 1000)
                }
                Some(_) => return Err(bad("kv_bad_request", "limit must be an integer")),
            };
            op.keys_only = flag(m, "keysOnly")?;
        }
        _ => op.key = key_of(m.get("key"), "key")?,
    }
    // expect
    if let Some(e) = m.get("expect") {
        let n = match e {
            Value::Number(n) => n.as_i64().filter(|n| *n >= 0),
            _ => None,
        }
        .ok_or_else(|| bad("kv_bad_expect", "expect must be an integer >= 0"))?;
        match kind {
            KvKind::Put | KvKind::Delete | KvKind::Check => op.expect = Some(n),
            KvKind::PutIfAbsent if n == 0 => {}
            KvKind::PutIfAbsent => {
                return Err(bad("kv_bad_expect", "putIfAbsent takes no expect but 0"))
            }
            _ => {
                return Err(bad(
                    "kv_bad_request",
                    format!("{} takes no expect", kind.name()),
                ))
            }
        }
    } else if kind == KvKind::Check {
        return Err(bad("kv_bad_expect", "check needs expect"));
    }
    // value
    if matches!(kind, KvKind::Put | KvKind::PutIfAbsent) {
        let value = m
            .get("value")
            .ok_or_else(|| bad("kv_bad_request", "put needs a value (null is one)"))?;
        // stored as jsonb, which holds no NUL (in a string or a key)
        if let Some(at) = crate::http::limits::nul_in_json("value", value) {
            return Err(bad(
                "kv_bad_value",
                format!("{at} must not contain NUL characters"),
            ));
        }
        if value.to_string().len() > MAX_VALUE_BYTES {
            return Err(SurfaceError::too_large(
                "kv_value_too_large",
                format!("value larger than {MAX_VALUE_BYTES} bytes"),
            ));
        }
        op.value = Some(value.clone());
    }
    // expiry
    let ttl = m.get("ttlSeconds").filter(|v| !v.is_null());
    let forever = m.get("forever").filter(|v| !v.is_null());
    let writes = matches!(kind, KvKind::Put | KvKind::PutIfAbsent | KvKind::Incr);
    if writes {
        match (ttl, forever) {
            (Some(t), None) => {
                let t = t
                    .as_i64()
                    .filter(|t| *t > 0 && *t <= MAX_TTL)
                    .ok_or_else(|| bad("kv_bad_ttl", "ttlSeconds must be an integer > 0"))?;
                op.ttl_seconds = Some(t as i32);
            }
            (None, Some(Value::Bool(true))) => op.forever = true,
            _ => {
                return Err(bad(
                    "kv_expiry_not_specified",
                    "a write needs exactly one of ttlSeconds or forever:true",
                ))
            }
        }
    } else if ttl.is_some() || forever.is_some() {
        return Err(bad(
            "kv_bad_request",
            format!("{} takes no expiry", kind.name()),
        ));
    }
    if kind == KvKind::Incr {
        op.delta = Some(number(m.get("delta"), "delta")?.unwrap_or_else(|| "1".into()));
        op.min = number(m.get("min"), "min")?;
        op.max = number(m.get("max"), "max")?;
    } else if m.contains_key("delta") || m.contains_key("min") || m.contains_key("max") {
        return Err(bad(
            "kv_bad_request",
            format!("{} takes no delta, min or max", kind.name()),
        ));
    }
    Ok(op)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(v: Value) -> String {
        parse_ops(&[v], MAX_OPS, MAX_KEYS, false)
            .unwrap_err()
            .reason
    }

    #[test]
    fn bad_operations_are_refused_with_their_reason() {
        assert_eq!(
            refused(json!({"op": "frob", "ns": "a", "key": "k"})),
            "kv_unknown_op"
        );
        assert_eq!(
            refused(json!({"op": "get", "ns": "A", "key": "k"})),
            "kv_bad_namespace"
        );
        assert_eq!(
            refused(json!({"op": "get", "ns": "a", "key": ""})),
            "kv_bad_key"
        );
        assert_eq!(
            refused(json!({"op": "get", "ns": "a", "key": "x".repeat(513)})),
            "kv_key_too_large"
        );
        assert_eq!(
            refused(json!({"op": "put", "ns": "a", "key": "k", "value": 1})),
            "kv_expiry_not_specified"
        );
        assert_eq!(
            refused(json!({"op": "put", "ns": "a", "key": "k", "value": 1, "ttlSeconds": 0})),
            "kv_bad_ttl"
        );
        assert_eq!(
            refused(
                json!({"op": "put", "ns": "a", "key": "k", "value": 1, "forever": true, "expect": -1})
            ),
            "kv_bad_expect"
        );
        assert_eq!(
            refused(
                json!({"op": "put", "ns": "a", "key": "k", "value": 1, "forever": true, "expect": true})
            ),
            "kv_bad_expect"
        );
        assert_eq!(
            refused(json!({"op": "check", "ns": "a", "key": "k"})),
            "kv_bad_expect"
        );
        assert_eq!(
            refused(json!({"op": "incr", "ns": "a", "key": "k", "forever": true, "delta": true})),
            "kv_bad_request"
        );
        assert_eq!(
            refused(
                json!({"op": "put", "ns": "a", "key": "k", "forever": true, "value": "x".repeat(70_000)})
            ),
            "kv_value_too_large"
        );
        assert_eq!(
            refused(json!({"op": "getPrefix", "ns": "a", "prefix": ""})),
            "kv_prefix_required"
        );
        assert_eq!(
            refused(json!({"op": "get", "ns": "a", "key": "k", "tenant": "t"})),
            "kv_tenant_not_an_input"
        );
        assert_eq!(refused(json!(3)), "kv_bad_request");
        assert_eq!(
            refused(
                json!({"op": "put", "ns": "a", "key": "k", "forever": true, "value": "a\u{0}b"})
            ),
            "kv_bad_value"
        );
        assert_eq!(
            refused(
                json!({"op": "put", "ns": "a", "key": "k", "forever": true, "value": {"k\u{0}": 1}})
            ),
            "kv_bad_value"
        );
        assert_eq!(
            refused(json!({"op": "getPrefix", "ns": "a", "prefix": "p", "after": "a\u{0}"})),
            "kv_bad_request"
        );
    }

    #[test]
    fn limits_and_duplicates_refuse_the_whole_call() {
        let many: Vec<Value> = (0..257)
            .map(|i| json!({"op": "get", "ns": "a", "key": format!("k{i}")}))
            .collect();
        let e = parse_ops(&many, MAX_OPS, MAX_KEYS, false).unwrap_err();
        assert_eq!(e.reason, "kv_too_many_ops");
        let twice = [
            json!({"op": "put", "ns": "a", "key": "k", "value": 1, "forever": true}),
            json!({"op": "delete", "ns": "a", "key": "k"}),
        ];
        let e = parse_ops(&twice, MAX_OPS, MAX_KEYS, false).unwrap_err();
        assert_eq!(e.reason, "kv_duplicate_key_in_call");
        let prefix = [json!({"op": "getPrefix", "ns": "a", "prefix": "p"})];
        let e = parse_ops(&prefix, TX_MAX_OPS, TX_MAX_KEYS, true).unwrap_err();
        assert_eq!(e.reason, "kv_get_prefix_not_allowed_in_transaction");
    }
}
