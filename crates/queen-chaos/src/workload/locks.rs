//! The lock workload: workers take a lock with a short lifetime through
//! `POST /api/v1/locks` on random brokers, push records `{worker, token}`
//! through guarded transactions (`POST /api/v1/transaction` with the lock's
//! `guard` in the `kv` rider), sometimes renew, and sometimes stall past the
//! lifetime so another worker takes the lock over; the stalled worker then
//! tries one more guarded commit with its old token. Every grant and every
//! commit attempt is journaled with its times.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use serde_json::{json, Value};
use tokio::time::Instant;

use super::{http_client, Control};
use crate::rng::Rng;

/// The queue the guarded records go to; one partition per lock.
pub const LOCK_QUEUE: &str = "chaos-locks";
/// The locks the workers contend for.
pub const LOCK_NAMES: &[&str] = &["lock-a", "lock-b"];
/// Lifetime of a permit.
pub const TTL_SECS: u64 = 2;
/// Chance that a holder stalls past the lifetime before its last commit.
const STALL_CHANCE: f64 = 0.3;
/// Chance that a holder renews before committing again.
const RENEW_CHANCE: f64 = 0.15;

/// A token the broker handed out: an acquire or a renew answered.
#[derive(Debug, Clone)]
pub struct Grant {
    pub lock: String,
    pub owner: String,
    pub token: i64,
    /// `acquire` answered `already: true` (the owner's own permit again).
    pub already: bool,
    pub renew: bool,
    pub broker: usize,
    pub t_sent: u64,
    pub t_done: u64,
}

/// How a guarded transaction was answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommitOutcome {
    Committed,
    /// `success: false` (the reason).
    Refused(String),
    /// No answer: applied or not.
    NoAnswer(String),
}

/// One guarded transaction attempt.
#[derive(Debug, Clone)]
pub struct Commit {
    pub lock: String,
    pub worker: usize,
    pub token: i64,
    pub txid: String,
    /// Sent after the holder stalled past its lifetime.
    pub stale: bool,
    pub broker: usize,
    pub t_sent: u64,
    pub t_done: u64,
    pub outcome: CommitOutcome,
}

/// A guarded record as the segments hold it.
#[derive(Debug, Clone)]
pub struct LockRecord {
    pub lock: String,
    pub offset: i64,
    pub txid: String,
    pub worker: i64,
    pub token: i64,
}

#[derive(Debug, Default)]
pub struct LockJournal {
    pub grants: Vec<Grant>,
    pub commits: Vec<Commit>,
    /// Stored records, in offset order per lock.
    pub records: Vec<LockRecord>,
}

/// One worker: rounds of acquire, guarded commits, maybe a stall, release.
pub async fn worker(
    idx: usize,
    urls: Arc<Vec<String>>,
    ctl: Arc<Control>,
    traffic_end: Instant,
    mut rng: Rng,
) -> LockJournal {
    let mut log = LockJournal::default();
    let Ok(http) = http_client() else {
        return log;
    };
    let mut seq = 0u64;
    let mut round = 0u64;
    while !ctl.stop_producers.load(Ordering::Acquire) && Instant::now() < traffic_end {
        round += 1;
        let lock = LOCK_NAMES[rng.index(LOCK_NAMES.len())];
        let owner = format!("w{idx}-r{round}");
        let Some((mut token, mut guard)) =
            acquire(&http, &urls, &ctl, &mut rng, &mut log, lock, &owner).await
        else {
            tokio::time::sleep(Duration::from_millis(rng.between(100, 400))).await;
            continue;
        };
        let commits = rng.between(1, 5);
        for _ in 0..commits {
            if rng.chance(RENEW_CHANCE) {
                match renew(&http, &urls, &ctl, &mut rng, &mut log, lock, &owner, token).await {
                    Some((t, g)) => (token, guard) = (t, g),
                    None => break,
                }
            }
            seq += 1;
            let c = commit(
                &http, &urls, &ctl, &mut rng, lock, idx, seq, token, &guard, false,
            );
            let c = c.await;
            let refused = c.outcome != CommitOutcome::Committed;
            log.commits.push(c);
            if refused {
                break;
            }
            tokio::time::sleep(Duration::from_millis(rng.between(20, 250))).await;
        }
        if rng.chance(STALL_CHANCE) {
            // past the lifetime: someone else may hold the lock by now
            let ms = TTL_SECS * 1000 + rng.between(200, 1500);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            seq += 1;
            let c = commit(
                &http, &urls, &ctl, &mut rng, lock, idx, seq, token, &guard, true,
            );
            log.commits.push(c.await);
        } else {
            let url = &urls[rng.index(urls.len())];
            let _ = http
                .post(format!("{url}/api/v1/locks"))
                .json(&json!({"operations": [{"op": "release", "name": lock, "token": token}]}))
                .send()
                .await;
        }
        tokio::time::sleep(Duration::from_millis(rng.between(20, 200))).await;
    }
    log
}

async fn locks_call(http: &reqwest::Client, url: &str, op: Value) -> Option<Value> {
    let resp = http
        .post(format!("{url}/api/v1/locks"))
        .json(&json!({ "operations": [op] }))
        .send()
        .await
        .ok()?;
    if !resp.status().is_success() {
        return None;
    }
    let v: Value = resp.json().await.ok()?;
    Some(v["results"][0].clone())
}

/// Tries to take `lock` a few times (an acquire without an answer is resent
/// with the same owner, which is safe); the token and guard when granted.
async fn acquire(
    http: &reqwest::Client,
    urls: &[String],
    ctl: &Control,
    rng: &mut Rng,
    log: &mut LockJournal,
    lock: &str,
    owner: &str,
) -> Option<(i64, Value)> {
    for _ in 0..20 {
        if ctl.past_deadline() {
            return None;
        }
        let broker = rng.index(urls.len());
        let t_sent = ctl.micros();
        let op = json!({"op": "acquire", "name": lock, "ttlSeconds": TTL_SECS, "owner": owner});
        let answer = locks_call(http, &urls[broker], op).await;
        let t_done = ctl.micros();
        match answer {
            Some(r) if r["acquired"] == true => {
                let token = r["token"].as_i64()?;
                log.grants.push(Grant {
                    lock: lock.to_owned(),
                    owner: owner.to_owned(),
                    token,
                    already: r["already"] == true,
                    renew: false,
                    broker,
                    t_sent,
                    t_done,
                });
                return Some((token, r["guard"].clone()));
            }
            Some(_) => {
                tokio::time::sleep(Duration::from_millis(rng.between(50, 300))).await;
            }
            None => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    None
}

#[expect(
    clippy::too_many_arguments,
    reason = "the worker's state, passed down once"
)]
async fn renew(
    http: &reqwest::Client,
    urls: &[String],
    ctl: &Control,
    rng: &mut Rng,
    log: &mut LockJournal,
    lock: &str,
    owner: &str,
    token: i64,
) -> Option<(i64, Value)> {
    let broker = rng.index(urls.len());
    let t_sent = ctl.micros();
    let op = json!({"op": "renew", "name": lock, "token": token, "ttlSeconds": TTL_SECS,
                    "owner": owner});
    let r = locks_call(http, &urls[broker], op).await?;
    let t_done = ctl.micros();
    if r["renewed"] != true {
        return None;
    }
    let token = r["token"].as_i64()?;
    log.grants.push(Grant {
        lock: lock.to_owned(),
        owner: owner.to_owned(),
        token,
        already: false,
        renew: true,
        broker,
        t_sent,
        t_done,
    });
    Some((token, r["guard"].clone()))
}

#[expect(
    clippy::too_many_arguments,
    reason = "the worker's state, passed down once"
)]
async fn commit(
    http: &reqwest::Client,
    urls: &[String],
    ctl: &Control,
    rng: &mut Rng,
    lock: &str,
    worker: usize,
    seq: u64,
    token: i64,
    guard: &Value,
    stale: bool,
) -> Commit {
    let txid = format!("lk-w{worker}-{seq:06}");
    let body = json!({
        "operations": [{"type": "push", "items": [{"queue": LOCK_QUEUE, "partition": lock,
            "transactionId": txid, "payload": {"worker": worker, "token": token}}]}],
        "kv": [guard],
    });
    let broker = rng.index(urls.len());
    let t_sent = ctl.micros();
    let outcome = match http
        .post(format!("{}/api/v1/transaction", urls[broker]))
        .json(&body)
        .send()
        .await
    {
        Err(e) => CommitOutcome::NoAnswer(format!("request failed: {e}")),
        Ok(resp) => {
            let status = resp.status();
            let v: Value = resp.json().await.unwrap_or(Value::Null);
            if status.is_success() && v["success"] == true {
                CommitOutcome::Committed
            } else if status.is_success() && v["success"] == false {
                let why = v["reason"].as_str().or(v["error"].as_str()).unwrap_or("?");
                CommitOutcome::Refused(why.to_owned())
            } else if status.is_client_error() {
                CommitOutcome::Refused(format!("{status}: {v}"))
            } else {
                CommitOutcome::NoAnswer(format!("{status}: {v}"))
            }
        }
    };
    Commit {
        lock: lock.to_owned(),
        worker,
        token,
        txid,
        stale,
        broker,
        t_sent,
        t_done: ctl.micros(),
        outcome,
    }
}

/// Reads the guarded records stored in the lock queue.
pub async fn snapshot(db: &tokio_postgres::Client, journal: &mut LockJournal) -> Result<()> {
    journal.records = crate::dbstate::queue_messages(db, LOCK_QUEUE)
        .await?
        .into_iter()
        .map(|m| {
            let record: Value = serde_json::from_str(&m.payload).unwrap_or(Value::Null);
            let field = |k: &str| record.get(k).and_then(Value::as_i64).unwrap_or(-1);
            LockRecord {
                worker: field("worker"),
                token: field("token"),
                lock: m.partition,
                offset: m.offset,
                txid: m.txid,
            }
        })
        .collect();
    Ok(())
}
