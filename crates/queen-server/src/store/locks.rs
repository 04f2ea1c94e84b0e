//! Locks and semaphores (`POST /api/v1/locks`) as KV rows: a permit is the
//! row `queen-locks`/`<name>#<slot>` holding `{owner, since?}` with the
//! lifetime as TTL, and its token is the row's version (which only rises).
//!
//! Each operation runs in its own transaction under a transaction-scoped
//! advisory lock on the lock's name (class 21022), so a semaphore's slots are
//! read and one is taken without a race: it never admits more than its
//! limit. The slot rows themselves are written through `queen.kv_write`,
//! which also serialises them against plain KV calls on the same keys.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde_json::{json, Value};

use super::kv::{kv_apply, KvKind, KvOp, KvOutcome, KvResult};
use super::op::{with_op, DbOp};
use super::{col, Store, StoreError};

/// The KV namespace of permits.
pub const LOCKS_NS: &str = "queen-locks";

/// One live permit.
#[derive(Debug, Clone)]
pub struct Permit {
    pub slot: i32,
    pub owner: Option<String>,
    pub token: i64,
    pub since: Option<String>,
    pub expires_at: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
}

/// What one lock operation did.
#[derive(Debug, Clone)]
pub enum LockOutcome {
    Acquired {
        slot: i32,
        token: i64,
        owner: String,
        already: bool,
    },
    /// `contended` when a plain KV write raced the free slot.
    Refused {
        reason: &'static str,
        holders: Vec<Permit>,
    },
    Renewed {
        slot: i32,
        token: i64,
    },
    Released {
        slot: i32,
    },
    Lost {
        slot: i32,
        holders: Vec<Permit>,
    },
    Held {
        holders: Vec<Permit>,
    },
}

/// The permit key of `name`'s `slot`.
pub fn permit_key(name: &str, slot: i32) -> String {
    format!("{name}#{slot}")
}

async fn lock_name(client: &impl GenericClient, name: &str) -> Result<(), StoreError> {
    client
        .execute(
            "SELECT pg_advisory_xact_lock(21022, hashtext($1))",
            &[&name],
        )
        .await?;
    Ok(())
}

/// Every live permit of `name`, by slot.
async fn holders(client: &impl GenericClient, name: &str) -> Result<Vec<Permit>, StoreError> {
    let prefix = format!("{name}#");
    let rows = client
        .query(
            "SELECT key, value->>'owner' AS owner, value->>'since' AS since, version,
                    expires_at, updated_at
             FROM queen.kv
             WHERE ns = $1 AND key >= $2 AND starts_with(key, $2)
               AND (expires_at IS NULL OR expires_at > now())",
            &[&LOCKS_NS, &prefix],
        )
        .await?;
    let mut out = Vec::with_capacity(rows.len());
    for r in &rows {
        let key: String = col(r, "key")?;
        let Some(slot) = key[prefix.len()..].parse::<i32>().ok() else {
            continue; // a row written by hand through /api/v1/kv
        };
        out.push(Permit {
            slot,
            owner: col(r, "owner")?,
            token: col(r, "version")?,
            since: col(r, "since")?,
            expires_at: col(r, "expires_at")?,
            updated_at: col(r, "updated_at")?,
        });
    }
    out.sort_by_key(|p| p.slot);
    Ok(out)
}

async fn write(client: &impl GenericClient, op: KvOp) -> Result<KvResult, StoreError> {
    match kv_apply(client, std::slice::from_ref(&op)).await? {
        KvOutcome::Done(mut r) => Ok(r.remove(0)),
        KvOutcome::Precondition(_) => Err(StoreError::internal("lock write marked required")),
    }
}

fn put(name: &str, slot: i32, value: Value, ttl: i32, expect: i64) -> KvOp {
    let mut op = KvOp::new(KvKind::Put, LOCKS_NS, permit_key(name, slot));
    op.value = Some(value);
    op.ttl_seconds = Some(ttl);
    op.expect = Some(expect);
    op
}

impl Store {
    /// Takes a permit of `name` (a lock when `limit` is 1) for `owner`.
    pub async fn lock_acquire(
        &self,
        name: &str,
        owner: &str,
        limit: i32,
        ttl: i32,
        pick: u32,
    ) -> Result<LockOutcome, StoreError> {
        with_op!(self.db, DbOp::Locks, |client| {
            let tx = client.transaction().await?;
            lock_name(&tx, name).await?;
            let held = holders(&tx, name).await?;
            let in_range: Vec<&Permit> = held.iter().filter(|p| p.slot < limit).collect();
            if let Some(mine) = in_range.iter().find(|p| p.owner.as_deref() == Some(owner)) {
                let out = LockOutcome::Acquired {
                    slot: mine.slot,
                    token: mine.token,
                    owner: owner.to_owned(),
                    already: true,
                };
                tx.commit().await?;
                return Ok(out);
            }
            let free: Vec<i32> = (0..limit)
                .filter(|s| !in_range.iter().any(|p| p.slot == *s))
                .collect();
            if free.is_empty() {
                let out = LockOutcome::Refused {
                    reason: "held",
                    holders: held.clone(),
                };
                tx.commit().await?;
                return Ok(out);
            }
            let slot = free[pick as usize % free.len()];
            let out = match write(&tx, put(name, slot, json!({ "owner": owner }), ttl, 0)).await? {
                KvResult::Write {
                    applied: true,
                    version,
                    ..
                } => LockOutcome::Acquired {
                    slot,
                    token: version,
                    owner: owner.to_owned(),
                    already: false,
                },
                _ => LockOutcome::Refused {
                    reason: "contended",
                    holders: holders(&tx, name).await?,
                },
            };
            tx.commit().await?;
            Ok(out)
        })
    }

    /// Extends the permit at `slot` held with `token` (or by `owner`).
    pub async fn lock_renew(
        &self,
        name: &str,
        slot: i32,
        token: i64,
        owner: Option<&str>,
        ttl: i32,
    ) -> Result<LockOutcome, StoreError> {
        with_op!(self.db, DbOp::Locks, |client| {
            let tx = client.transaction().await?;
            lock_name(&tx, name).await?;
            let held = holders(&tx, name).await?;
            let current = held
                .iter()
                .find(|p| p.slot == slot)
                .filter(|p| p.token == token || (owner.is_some() && p.owner.as_deref() == owner));
            let out = match current {
                None => LockOutcome::Lost {
                    slot,
                    holders: held.clone(),
                },
                Some(p) => {
                    let since = p
                        .since
                        .clone()
                        .unwrap_or_else(|| queen_proto::time::format_micros(p.updated_at));
                    let value = json!({ "owner": p.owner, "since": since });
                    match write(&tx, put(name, slot, value, ttl, p.token)).await? {
                        KvResult::Write {
                            applied: true,
                            version,
                            ..
                        } => LockOutcome::Renewed {
                            slot,
                            token: version,
                        },
                        _ => LockOutcome::Lost {
                            slot,
                            holders: holders(&tx, name).await?,
                        },
                    }
                }
            };
            tx.commit().await?;
            Ok(out)
        })
    }

    /// Gives back the permit at `slot` if `token` is still its token.
    pub async fn lock_release(
        &self,
        name: &str,
        slot: i32,
        token: i64,
    ) -> Result<LockOutcome, StoreError> {
        with_op!(self.db, DbOp::Locks, |client| {
            let tx = client.transaction().await?;
            lock_name(&tx, name).await?;
            let mut op = KvOp::new(KvKind::Delete, LOCKS_NS, permit_key(name, slot));
            op.expect = Some(token);
            let out = match write(&tx, op).await? {
                KvResult::Write { applied: true, .. } => LockOutcome::Released { slot },
                _ => LockOutcome::Lost {
                    slot,
                    holders: holders(&tx, name).await?,
                },
            };
            tx.commit().await?;
            Ok(out)
        })
    }

    /// Who holds `name`.
    pub async fn lock_get(&self, name: &str) -> Result<LockOutcome, StoreError> {
        with_op!(self.db, DbOp::Locks, |client| {
            Ok(LockOutcome::Held {
                holders: holders(&*client, name).await?,
            })
        })
    }
}
