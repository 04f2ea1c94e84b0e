//! Read-only listings of the 2.6 surfaces for the dashboard: the key/value
//! namespaces with their live keys, one namespace's keys in byte order, and
//! the queues with pending timers. Expired rows never show, as in every KV
//! read (the timer sweeper prunes them later).

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::store::op::{with_op, DbOp};
use crate::store::{col, rows_into, Store, StoreError};

/// A key/value namespace and its live keys.
#[derive(Debug, Clone)]
pub struct KvNamespace {
    pub ns: String,
    pub keys: i64,
    /// The soonest expiry among its keys.
    pub next_expiry: Option<DateTime<Utc>>,
}

/// One live key with its value.
#[derive(Debug, Clone)]
pub struct KvEntry {
    pub key: String,
    pub value: Value,
    pub version: i64,
    pub expires_at: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
}

/// A queue with pending timers.
#[derive(Debug, Clone)]
pub struct TimerQueue {
    pub queue: String,
    pub timers: i64,
    pub recurring: i64,
    pub next_deliver_at: DateTime<Utc>,
}

impl Store {
    /// Every namespace holding a live key, by name.
    pub async fn kv_namespaces(&self) -> Result<Vec<KvNamespace>, StoreError> {
        with_op!(self.db, DbOp::Kv, |client| {
            let rows = client
                .query(
                    "SELECT ns, count(*) AS keys, min(expires_at) AS next_expiry
                     FROM queen.kv
                     WHERE expires_at IS NULL OR expires_at > now()
                     GROUP BY ns ORDER BY ns",
                    &[],
                )
                .await?;
            rows_into(&rows, |r| {
                Ok(KvNamespace {
                    ns: col(r, "ns")?,
                    keys: col(r, "keys")?,
                    next_expiry: col(r, "next_expiry")?,
                })
            })
        })
    }

    /// Up to `limit` live keys of `ns` after `after` in byte order, and
    /// whether more follow.
    pub async fn kv_entries(
        &self,
        ns: &str,
        after: Option<&str>,
        limit: i64,
    ) -> Result<(Vec<KvEntry>, bool), StoreError> {
        with_op!(self.db, DbOp::Kv, |client| {
            let rows = client
                .query(
                    "SELECT key, value::text AS value, version, expires_at, updated_at
                     FROM queen.kv
                     WHERE ns = $1 AND ($2::text IS NULL OR key > $2)
                       AND (expires_at IS NULL OR expires_at > now())
                     ORDER BY key LIMIT $3::bigint + 1",
                    &[&ns, &after, &limit],
                )
                .await?;
            let mut entries = rows_into(&rows, |r| {
                let text: String = col(r, "value")?;
                Ok(KvEntry {
                    key: col(r, "key")?,
                    value: serde_json::from_str(&text)
                        .map_err(|e| StoreError::internal(format!("kv value is not JSON: {e}")))?,
                    version: col(r, "version")?,
                    expires_at: col(r, "expires_at")?,
                    updated_at: col(r, "updated_at")?,
                })
            })?;
            let more = entries.len() as i64 > limit;
            entries.truncate(usize::try_from(limit).unwrap_or(0));
            Ok((entries, more))
        })
    }

    /// Every queue with a pending timer, by name.
    pub async fn timer_queues(&self) -> Result<Vec<TimerQueue>, StoreError> {
        with_op!(self.db, DbOp::Timers, |client| {
            let rows = client
                .query(
                    "SELECT queue, count(*) AS timers,
                            count(*) FILTER (WHERE interval_ms IS NOT NULL OR cron IS NOT NULL) AS recurring,
                            min(deliver_at) AS next_deliver_at
                     FROM queen.timers GROUP BY queue ORDER BY queue",
                    &[],
                )
                .await?;
            rows_into(&rows, |r| {
                Ok(TimerQueue {
                    queue: col(r, "queue")?,
                    timers: col(r, "timers")?,
                    recurring: col(r, "recurring")?,
                    next_deliver_at: col(r, "next_deliver_at")?,
                })
            })
        })
    }
}
