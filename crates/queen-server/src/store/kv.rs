//! Key/value rows (`POST /api/v1/kv`, the `kv` rider of `/transaction`, and
//! the permits of locks): one `queen.kv_write` call per single-key write or
//! check, plain reads for get, getMany and getPrefix.
//!
//! A call runs in one PostgreSQL transaction. Single-key operations are
//! decided in (namespace, key, position) order, multi-key reads last, so a
//! read sees the call's own writes. A lost `required` operation stops the
//! call; the caller rolls the whole transaction back.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde_json::Value;

use super::op::{with_op, DbOp};
use super::{col, Store, StoreError};

/// Bytes of values one getMany or getPrefix returns at most (4 MiB).
pub const KV_READ_BUDGET_BYTES: usize = 4 << 20;

/// The kind of a KV operation, as named on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KvKind {
    Get,
    GetMany,
    GetPrefix,
    Put,
    PutIfAbsent,
    Delete,
    Incr,
    Check,
}

impl KvKind {
    /// The wire name (`op`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::GetMany => "getMany",
            Self::GetPrefix => "getPrefix",
            Self::Put => "put",
            Self::PutIfAbsent => "putIfAbsent",
            Self::Delete => "delete",
            Self::Incr => "incr",
            Self::Check => "check",
        }
    }

    /// Writes and checks: decided by `queen.kv_write`.
    pub fn is_write_or_check(self) -> bool {
        matches!(
            self,
            Self::Put | Self::PutIfAbsent | Self::Delete | Self::Incr | Self::Check
        )
    }

    fn is_multi_read(self) -> bool {
        matches!(self, Self::GetMany | Self::GetPrefix)
    }
}

/// One validated KV operation.
#[derive(Debug, Clone)]
pub struct KvOp {
    pub kind: KvKind,
    pub ns: String,
    /// The key of a single-key op; the prefix of getPrefix; empty for getMany.
    pub key: String,
    /// getMany's keys.
    pub keys: Vec<String>,
    /// getPrefix: exclusive cursor, page size (1…1000), values left out.
    pub after: Option<String>,
    pub limit: i64,
    pub keys_only: bool,
    /// put / putIfAbsent: the value (JSON `null` is a value).
    pub value: Option<Value>,
    /// Writes: a lifetime in seconds, or `forever`.
    pub ttl_seconds: Option<i32>,
    pub forever: bool,
    pub expect: Option<i64>,
    /// incr: exact decimals as text.
    pub delta: Option<String>,
    pub min: Option<String>,
    pub max: Option<String>,
    pub required: bool,
}

impl KvOp {
    /// An op of `kind` on `ns`/`key` with every option unset.
    pub fn new(kind: KvKind, ns: impl Into<String>, key: impl Into<String>) -> Self {
        Self {
            kind,
            ns: ns.into(),
            key: key.into(),
            keys: Vec::new(),
            after: None,
            limit: 100,
            keys_only: false,
            value: None,
            ttl_seconds: None,
            forever: false,
            expect: None,
            delta: None,
            min: None,
            max: None,
            required: false,
        }
    }
}

/// A live row as a read returns it.
#[derive(Debug, Clone)]
pub struct KvRow {
    pub key: String,
    /// `None` with keysOnly.
    pub value: Option<Value>,
    pub version: i64,
    pub expires_at: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
}

/// What one operation did or read.
#[derive(Debug, Clone)]
pub enum KvResult {
    /// put, putIfAbsent, delete, incr, check.
    Write {
        applied: bool,
        reason: Option<String>,
        value: Value,
        version: i64,
    },
    Get(Option<KvRow>),
    Many {
        rows: Vec<KvRow>,
        missing: Vec<String>,
        truncated: bool,
    },
    Prefix {
        rows: Vec<KvRow>,
        truncated: bool,
        next_after: Option<String>,
    },
}

/// A `required` operation that lost: nothing of the call may be kept.
#[derive(Debug, Clone)]
pub struct KvPrecondition {
    /// Position of the op in its call (or rider).
    pub index: usize,
    pub reason: String,
    pub version: i64,
    pub value: Value,
}

/// The outcome of a whole KV call.
#[derive(Debug, Clone)]
pub enum KvOutcome {
    /// Results index-aligned with the ops.
    Done(Vec<KvResult>),
    Precondition(KvPrecondition),
}

impl Store {
    /// Runs one `POST /api/v1/kv` call in its own transaction: committed
    /// whole, or (a lost `required`) rolled back whole.
    pub async fn kv_call(&self, ops: &[KvOp]) -> Result<KvOutcome, StoreError> {
        with_op!(self.db, DbOp::Kv, |client| {
            let tx = client.transaction().await?;
            let outcome = kv_apply(&tx, ops).await?;
            match outcome {
                KvOutcome::Done(_) => tx.commit().await?,
                KvOutcome::Precondition(_) => tx.rollback().await?,
            }
            Ok(outcome)
        })
    }
}

/// Applies `ops` on `client` (inside the caller's transaction). Stops at the
/// first lost `required` op and returns it; the caller must roll back.
pub(super) async fn kv_apply(
    client: &impl GenericClient,
    ops: &[KvOp],
) -> Result<KvOutcome, StoreError> {
    let mut order: Vec<usize> = (0..ops.len()).collect();
    order.sort_by(|&a, &b| {
        let (x, y) = (&ops[a], &ops[b]);
        x.kind
            .is_multi_read()
            .cmp(&y.kind.is_multi_read())
            .then_with(|| x.ns.as_bytes().cmp(y.ns.as_bytes()))
            .then_with(|| x.key.as_bytes().cmp(y.key.as_bytes()))
            .then(a.cmp(&b))
    });
    let mut results: Vec<Option<KvResult>> = vec![None; ops.len()];
    for i in order {
        let op = &ops[i];
        let result = match op.kind {
            KvKind::Get => KvResult::Get(get_one(client, &op.ns, &op.key).await?),
            KvKind::GetMany => get_many(client, &op.ns, &op.keys).await?,
            KvKind::GetPrefix => get_prefix(client, op).await?,
            _ => write_one(client, op).await?,
        };
        if let KvResult::Write {
            applied: false,
            reason,
            value,
            version,
        } = &result
        {
            if op.required {
                return Ok(KvOutcome::Precondition(KvPrecondition {
                    index: i,
                    reason: reason.clone().unwrap_or_default(),
                    version: *version,
                    value: value.clone(),
                }));
            }
        }
        results[i] = Some(result);
    }
    Ok(KvOutcome::Done(results.into_iter().flatten().collect()))
}

fn parse_json(text: Option<String>) -> Result<Value, StoreError> {
    match text {
        None => Ok(Value::Null),
        Some(t) => serde_json::from_str(&t)
            .map_err(|e| StoreError::internal(format!("kv value is not JSON: {e}"))),
    }
}

async fn write_one(client: &impl GenericClient, op: &KvOp) -> Result<KvResult, StoreError> {
    let stmt = client
        .prepare_cached(
            "SELECT applied, reason, value::text AS value, version
             FROM queen.kv_write($1, $2, $3, $4::text::jsonb, $5, $6, $7,
                                 $8::text::numeric, $9::text::numeric, $10::text::numeric, now())",
        )
        .await?;
    let kind = match op.kind {
        KvKind::PutIfAbsent => "putIfAbsent",
        k => k.name(),
    };
    // putIfAbsent is put with "must not exist"
    let expect = if op.kind == KvKind::PutIfAbsent {
        Some(0)
    } else {
        op.expect
    };
    let value = op.value.as_ref().map(Value::to_string);
    let row = client
        .query_one(
            &stmt,
            &[
                &kind,
                &op.ns,
                &op.key,
                &value,
                &op.ttl_seconds,
                &op.forever,
                &expect,
                &op.delta
                    .as_deref()
                    .or(Some("1").filter(|_| op.kind == KvKind::Incr)),
                &op.min,
                &op.max,
            ],
        )
        .await?;
    Ok(KvResult::Write {
        applied: col(&row, "applied")?,
        reason: col(&row, "reason")?,
        value: parse_json(col(&row, "value")?)?,
        version: col(&row, "version")?,
    })
}

const LIVE: &str = "(expires_at IS NULL OR expires_at > now())";

fn kv_row(r: &tokio_postgres::Row, with_value: bool) -> Result<KvRow, StoreError> {
    Ok(KvRow {
        key: col(r, "key")?,
        value: if with_value {
            Some(parse_json(col(r, "value")?)?)
        } else {
            None
        },
        version: col(r, "version")?,
        expires_at: col(r, "expires_at")?,
        updated_at: col(r, "updated_at")?,
    })
}

async fn get_one(
    client: &impl GenericClient,
    ns: &str,
    key: &str,
) -> Result<Option<KvRow>, StoreError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT key, value::text AS value, version, expires_at, updated_at
             FROM queen.kv WHERE ns = $1 AND key = $2 AND {LIVE}"
        ))
        .await?;
    client
        .query_opt(&stmt, &[&ns, &key])
        .await?
        .map(|r| kv_row(&r, true))
        .transpose()
}

async fn get_many(
    client: &impl GenericClient,
    ns: &str,
    keys: &[String],
) -> Result<KvResult, StoreError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT key, value::text AS value, version, expires_at, updated_at
             FROM queen.kv WHERE ns = $1 AND key = ANY($2) AND {LIVE} ORDER BY key"
        ))
        .await?;
    let found = client.query(&stmt, &[&ns, &keys]).await?;
    let mut rows = Vec::new();
    let mut budget = KV_READ_BUDGET_BYTES;
    let mut truncated = false;
    let mut cut: Vec<String> = Vec::new();
    for r in &found {
        let size = col::<Option<String>>(r, "value")?.map_or(0, |v| v.len());
        if truncated || size > budget {
            truncated = true;
            cut.push(col(r, "key")?);
            continue;
        }
        budget -= size;
        rows.push(kv_row(r, true)?);
    }
    let missing = keys
        .iter()
        .filter(|k| !rows.iter().any(|r: &KvRow| &r.key == *k) && !cut.contains(k))
        .cloned()
        .collect();
    Ok(KvResult::Many {
        rows,
        missing,
        truncated,
    })
}

async fn get_prefix(client: &impl GenericClient, op: &KvOp) -> Result<KvResult, StoreError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT key, value::text AS value, version, expires_at, updated_at
             FROM queen.kv
             WHERE ns = $1 AND key >= $2 AND starts_with(key, $2)
               AND ($3::text IS NULL OR key > $3) AND {LIVE}
             ORDER BY key LIMIT $4"
        ))
        .await?;
    let found = client
        .query(&stmt, &[&op.ns, &op.key, &op.after, &(op.limit + 1)])
        .await?;
    let mut rows = Vec::new();
    let mut budget = KV_READ_BUDGET_BYTES;
    let mut truncated = found.len() as i64 > op.limit;
    for r in found.iter().take(op.limit as usize) {
        let size = if op.keys_only {
            0
        } else {
            col::<Option<String>>(r, "value")?.map_or(0, |v| v.len())
        };
        if size > budget && !rows.is_empty() {
            truncated = true;
            break;
        }
        budget = budget.saturating_sub(size);
        rows.push(kv_row(r, !op.keys_only)?);
    }
    let next_after = truncated
        .then(|| rows.last().map(|r: &KvRow| r.key.clone()))
        .flatten();
    Ok(KvResult::Prefix {
        rows,
        truncated,
        next_after,
    })
}

/// Deletes up to `batch` expired rows; returns how many.
pub(super) async fn prune_expired(
    client: &impl GenericClient,
    batch: i64,
) -> Result<u64, StoreError> {
    Ok(client
        .execute(
            "DELETE FROM queen.kv WHERE ctid = ANY (ARRAY(
                 SELECT ctid FROM queen.kv WHERE expires_at <= now() LIMIT $1))",
            &[&batch],
        )
        .await?)
}
