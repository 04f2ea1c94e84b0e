//! `POST /api/v1/locks`: acquire, renew, release and get permits of locks and
//! semaphores. Ops of a call are independent and answered in order; any bad
//! input refuses the whole call with `400 locks_bad_request` first.

use std::collections::HashSet;

use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};

use crate::app::AppState;
use crate::broker::LockOp;
use crate::http::surface_error::{kv_time, read_operations, SurfaceError};
use crate::store::{permit_key, LockOutcome, Permit, LOCKS_NS};

/// Most operations per call.
pub const MAX_OPS: usize = 64;
/// Most slot rows one call may touch (the sum of the semaphores' limits).
pub const MAX_SLOTS: usize = 4096;
/// Longest lock name and owner, in bytes.
const MAX_NAME_BYTES: usize = 256;

fn bad(reason: &str, detail: impl Into<String>) -> SurfaceError {
    SurfaceError::bad("locks_bad_request", reason, detail)
}

pub async fn locks(State(app): State<AppState>, body: Body) -> Result<Response, SurfaceError> {
    let ops = read_operations(
        body,
        app.broker.config().max_body_bytes,
        "locks_bad_request",
        "locks_bad_body",
    )
    .await?;
    let parsed = parse_ops(&ops)?;
    let mut results = Vec::with_capacity(parsed.len());
    for (i, op) in parsed.iter().enumerate() {
        let out = app.broker.lock_op(op).await.map_err(|e| {
            SurfaceError::from_broker(e, "locks_bad_request", "kv_unavailable", "kv_error")
        })?;
        results.push(element(i, op, &out));
    }
    Ok(Json(json!({ "results": results })).into_response())
}

fn guard(name: &str, slot: i32, token: i64) -> Value {
    json!({
        "op": "check",
        "ns": LOCKS_NS,
        "key": permit_key(name, slot),
        "expect": token,
        "required": true,
    })
}

fn short_holders(h: &[Permit]) -> Value {
    h.iter()
        .map(|p| json!({ "slot": p.slot, "owner": p.owner }))
        .collect()
}

fn element(index: usize, op: &LockOp, out: &LockOutcome) -> Value {
    let name = op.name();
    let kind = match op {
        LockOp::Acquire { .. } => "acquire",
        LockOp::Renew { .. } => "renew",
        LockOp::Release { .. } => "release",
        LockOp::Get { .. } => "get",
    };
    let mut m = Map::new();
    m.insert("index".into(), json!(index));
    m.insert("op".into(), json!(kind));
    m.insert("name".into(), json!(name));
    let fields = match out {
        LockOutcome::Acquired {
            slot,
            token,
            owner,
            already,
        } => {
            let mut f = json!({
                "acquired": true, "slot": slot, "token": token, "owner": owner,
                "guard": guard(name, *slot, *token),
            });
            if *already {
                f["already"] = json!(true);
            }
            f
        }
        LockOutcome::Refused { reason, holders } => {
            json!({ "acquired": false, "reason": reason, "holders": short_holders(holders) })
        }
        LockOutcome::Renewed { slot, token } => json!({
            "renewed": true, "slot": slot, "token": token, "guard": guard(name, *slot, *token),
        }),
        LockOutcome::Released { slot } => json!({ "released": true, "slot": slot }),
        LockOutcome::Lost { slot, holders } => {
            let verdict = if matches!(op, LockOp::Renew { .. }) {
                "renewed"
            } else {
                "released"
            };
            json!({ verdict: false, "reason": "lost", "slot": slot, "holders": short_holders(holders) })
        }
        LockOutcome::Held { holders } => json!({
            "held": !holders.is_empty(),
            "holders": holders.iter().map(|p| json!({
                "slot": p.slot,
                "owner": p.owner,
                "token": p.token,
                "since": p.since.clone().unwrap_or_else(|| kv_time(p.updated_at)),
                "expiresAt": p.expires_at.map(kv_time),
                "renewedAt": p.since.as_ref().map(|_| kv_time(p.updated_at)),
            })).collect::<Vec<_>>(),
        }),
    };
    if let Value::Object(f) = fields {
        m.extend(f);
    }
    Value::Object(m)
}

fn has_control(s: &str) -> bool {
    s.chars().any(char::is_control)
}

fn name_of(m: &Map<String, Value>) -> Result<String, SurfaceError> {
    match m.get("name") {
        Some(Value::String(s))
            if !s.is_empty()
                && s.len() <= MAX_NAME_BYTES
                && !has_control(s)
                && !s.contains('#') =>
        {
            Ok(s.clone())
        }
        Some(Value::String(s)) if s.len() > MAX_NAME_BYTES => Err(SurfaceError::too_large(
            "locks_bad_name",
            format!("name longer than {MAX_NAME_BYTES} bytes"),
        )),
        _ => Err(bad(
            "locks_bad_name",
            "name must be a non-empty string without control characters or '#'",
        )),
    }
}

fn owner_of(m: &Map<String, Value>) -> Result<Option<String>, SurfaceError> {
    match m.get("owner") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.is_empty() && s.len() <= MAX_NAME_BYTES && !has_control(s) => {
            Ok(Some(s.clone()))
        }
        _ => Err(bad(
            "locks_bad_owner",
            "owner must be a non-empty string of at most 256 bytes without control characters",
        )),
    }
}

fn int(v: Option<&Value>) -> Option<Option<i64>> {
    match v {
        None | Some(Value::Null) => Some(None),
        Some(Value::Number(n)) => n.as_i64().map(Some),
        Some(_) => None,
    }
}

fn ttl_of(m: &Map<String, Value>) -> Result<i32, SurfaceError> {
    if m.get("forever").is_some_and(|v| !v.is_null()) {
        return Err(bad("locks_bad_ttl", "a permit cannot be forever"));
    }
    match int(m.get("ttlSeconds")) {
        Some(None) => Err(bad("locks_ttl_required", "ttlSeconds is required")),
        Some(Some(t)) if t > 0 && t <= i64::from(i32::MAX) => Ok(t as i32),
        _ => Err(bad("locks_bad_ttl", "ttlSeconds must be an integer > 0")),
    }
}

fn token_of(m: &Map<String, Value>) -> Result<i64, SurfaceError> {
    match int(m.get("token")) {
        Some(None) => Err(bad("locks_token_required", "token is required")),
        Some(Some(t)) if t > 0 => Ok(t),
        _ => Err(bad("locks_bad_token", "token must be an integer > 0")),
    }
}

fn slot_of(m: &Map<String, Value>) -> Result<i32, SurfaceError> {
    match int(m.get("slot")) {
        Some(None) => Ok(0),
        Some(Some(s)) if (0..1024).contains(&s) => Ok(s as i32),
        _ => Err(bad("locks_bad_slot", "slot must be an integer 0…1023")),
    }
}

/// Validates a whole call.
pub fn parse_ops(ops: &[Value]) -> Result<Vec<LockOp>, SurfaceError> {
    if ops.len() > MAX_OPS {
        return Err(bad(
            "locks_too_many_ops",
            format!("at most {MAX_OPS} operations per call"),
        ));
    }
    let mut names = HashSet::new();
    let mut slots = 0usize;
    let mut out = Vec::with_capacity(ops.len());
    for (i, v) in ops.iter().enumerate() {
        let op = parse_op(v).map_err(|mut c| {
            c.detail = format!("operation {i}: {}", c.detail);
            c
        })?;
        if !names.insert(op.name().to_owned()) {
            return Err(bad(
                "locks_duplicate_in_call",
                format!("operation {i}: lock {:?} appears twice", op.name()),
            ));
        }
        slots += match &op {
            LockOp::Acquire { limit, .. } => *limit as usize,
            LockOp::Get { .. } => 1024,
            _ => 1,
        };
        out.push(op);
    }
    if slots > MAX_SLOTS {
        return Err(bad(
            "locks_too_many_keys",
            format!("the call touches {slots} permit rows, more than {MAX_SLOTS}"),
        ));
    }
    Ok(out)
}

fn parse_op(v: &Value) -> Result<LockOp, SurfaceError> {
    let m = v
        .as_object()
        .ok_or_else(|| bad("locks_bad_request", "an operation must be an object"))?;
    for t in ["tenant", "tenantId", "_tenant"] {
        if m.contains_key(t) {
            return Err(bad(
                "locks_tenant_not_an_input",
                format!("{t} is not an input"),
            ));
        }
    }
    let kind = m.get("op").and_then(Value::as_str);
    let op = match kind {
        Some("acquire") => LockOp::Acquire {
            name: name_of(m)?,
            owner: owner_of(m)?,
            limit: match int(m.get("limit")) {
                Some(None) => 1,
                Some(Some(l)) if (1..=1024).contains(&l) => l as i32,
                _ => return Err(bad("locks_bad_limit", "limit must be an integer 1…1024")),
            },
            ttl: ttl_of(m)?,
        },
        Some("renew") => LockOp::Renew {
            name: name_of(m)?,
            token: token_of(m)?,
            slot: slot_of(m)?,
            owner: owner_of(m)?,
            ttl: ttl_of(m)?,
        },
        Some("release") => {
            if m.contains_key("owner") {
                return Err(bad("locks_bad_request", "release takes no owner"));
            }
            LockOp::Release {
                name: name_of(m)?,
                token: token_of(m)?,
                slot: slot_of(m)?,
            }
        }
        Some("get") => LockOp::Get { name: name_of(m)? },
        other => {
            return Err(bad(
                "locks_unknown_op",
                format!(
                    "unknown op {}",
                    other.map_or("(none)".into(), |s| format!("{s:?}"))
                ),
            ))
        }
    };
    Ok(op)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(v: Value) -> String {
        parse_ops(&[v]).unwrap_err().reason
    }

    #[test]
    fn bad_lock_operations_are_refused() {
        assert_eq!(
            refused(json!({"op": "grab", "name": "a"})),
            "locks_unknown_op"
        );
        assert_eq!(
            refused(json!({"op": "acquire", "name": "a#b", "ttlSeconds": 5})),
            "locks_bad_name"
        );
        assert_eq!(
            refused(json!({"op": "acquire", "name": "a"})),
            "locks_ttl_required"
        );
        assert_eq!(
            refused(json!({"op": "acquire", "name": "a", "ttlSeconds": 5, "forever": true})),
            "locks_bad_ttl"
        );
        assert_eq!(
            refused(json!({"op": "acquire", "name": "a", "ttlSeconds": 5, "limit": 0})),
            "locks_bad_limit"
        );
        assert_eq!(
            refused(json!({"op": "renew", "name": "a", "ttlSeconds": 5})),
            "locks_token_required"
        );
        assert_eq!(
            refused(json!({"op": "release", "name": "a", "token": 1, "slot": 5000})),
            "locks_bad_slot"
        );
        assert_eq!(
            refused(json!({"op": "acquire", "name": "a", "ttlSeconds": 5, "owner": ""})),
            "locks_bad_owner"
        );
        let twice = [
            json!({"op": "get", "name": "a"}),
            json!({"op": "get", "name": "a"}),
        ];
        assert_eq!(
            parse_ops(&twice).unwrap_err().reason,
            "locks_duplicate_in_call"
        );
    }
}
