//! The lock-token rules: from every grant (acquire or renew answered), every
//! guarded transaction attempt, and the records the lock queue stores.
//! Times are the harness's: a grant "was granted before" a commit when its
//! answer arrived before the commit was sent.
//!
//! | rule | violation kind | function |
//! |---|---|---|
//! | a grant asked after another grant of the lock was answered has a higher token | `lock-token` | `lock_tokens_only_rise` |
//! | no guarded commit of token t, sent after a higher token of the lock was granted, is stored or answered committed | `lock-fence` | `no_commit_after_a_higher_grant` |
//! | a commit answered committed is stored once, a refused one is not, and every record is an attempt's, with its token | `lock-commit` | `guarded_answers_match_storage` |
//! | in a lock's partition, tokens never fall from one record to the next | `lock-order` | `records_follow_token_order` |
//! | a guarded commit sent more than the lifetime after its token's grant was answered (the permit expired) is not committed | `lock-expired` | `expired_permit_guards_nothing` |

use std::collections::HashMap;

use super::Report;
use crate::workload::locks::{Commit, CommitOutcome, Grant, LockJournal, TTL_SECS};

pub fn check(r: &mut Report, j: &LockJournal) {
    lock_tokens_only_rise(r, j);
    no_commit_after_a_higher_grant(r, j);
    guarded_answers_match_storage(r, j);
    records_follow_token_order(r, j);
    expired_permit_guards_nothing(r, j);
    let committed = j
        .commits
        .iter()
        .filter(|c| c.outcome == CommitOutcome::Committed)
        .count();
    let stale = j.commits.iter().filter(|c| c.stale).count();
    let stale_refused = j
        .commits
        .iter()
        .filter(|c| c.stale && matches!(c.outcome, CommitOutcome::Refused(_)))
        .count();
    r.lines.push(format!(
        "locks: {} grants ({} renews, {} already), {} guarded commits ({committed} committed, {stale} after a stall of which {stale_refused} refused), {} records stored",
        j.grants.len(),
        j.grants.iter().filter(|g| g.renew).count(),
        j.grants.iter().filter(|g| g.already).count(),
        j.commits.len(),
        j.records.len()
    ));
}

/// Fresh grants (not `already`) of each lock.
fn fresh_grants(j: &LockJournal) -> HashMap<&str, Vec<&Grant>> {
    let mut m: HashMap<&str, Vec<&Grant>> = HashMap::new();
    for g in j.grants.iter().filter(|g| !g.already) {
        m.entry(g.lock.as_str()).or_default().push(g);
    }
    m
}

/// A grant asked after another grant of the same lock was answered carries
/// a higher token (a renew is a grant too: it rewrites the permit).
pub fn lock_tokens_only_rise(r: &mut Report, j: &LockJournal) {
    for (lock, mut grants) in fresh_grants(j) {
        grants.sort_by_key(|g| g.t_done);
        let mut by_sent = grants.clone();
        by_sent.sort_by_key(|g| g.t_sent);
        // the highest token among grants answered before each one was asked
        let mut k = 0;
        let mut top: Option<&Grant> = None;
        for b in by_sent {
            while k < grants.len() && grants[k].t_done < b.t_sent {
                if top.is_none_or(|t| grants[k].token > t.token) {
                    top = Some(grants[k]);
                }
                k += 1;
            }
            if let Some(a) = top {
                if b.token <= a.token {
                    r.violation(
                        "lock-token",
                        format!(
                            "{lock}: token {} granted to {} (asked at {}) after token {} was granted to {} (answered at {})",
                            b.token,
                            b.owner,
                            super::secs(b.t_sent),
                            a.token,
                            a.owner,
                            super::secs(a.t_done)
                        ),
                    );
                }
            }
        }
    }
}

/// The earliest answer time of a grant of `lock` with a token above `token`.
fn first_higher(grants: &[&Grant], token: i64) -> Option<u64> {
    grants
        .iter()
        .filter(|g| g.token > token)
        .map(|g| g.t_done)
        .min()
}

/// A guarded commit of token t sent after a higher token of its lock was
/// granted must not commit: neither stored nor answered committed.
pub fn no_commit_after_a_higher_grant(r: &mut Report, j: &LockJournal) {
    let grants = fresh_grants(j);
    let stored: HashMap<&str, i64> = j
        .records
        .iter()
        .map(|rec| (rec.txid.as_str(), rec.offset))
        .collect();
    let mut judge = |c: &Commit, how: String| {
        let Some(gs) = grants.get(c.lock.as_str()) else {
            return;
        };
        if let Some(at) = first_higher(gs, c.token) {
            if at < c.t_sent {
                r.violation(
                    "lock-fence",
                    format!(
                        "{}: commit {} of token {} by worker {} sent at {} {how}, after a higher token was granted at {}",
                        c.lock,
                        c.txid,
                        c.token,
                        c.worker,
                        super::secs(c.t_sent),
                        super::secs(at)
                    ),
                );
            }
        }
    };
    for c in &j.commits {
        if let Some(off) = stored.get(c.txid.as_str()) {
            judge(c, format!("is stored at offset {off}"));
        } else if c.outcome == CommitOutcome::Committed {
            judge(c, "was answered committed".to_owned());
        }
    }
}

/// Committed answers are stored once, refused ones not at all, and every
/// stored record is an attempt's, with that attempt's worker and token.
pub fn guarded_answers_match_storage(r: &mut Report, j: &LockJournal) {
    let mut stored: HashMap<&str, Vec<&crate::workload::locks::LockRecord>> = HashMap::new();
    for rec in &j.records {
        stored.entry(rec.txid.as_str()).or_default().push(rec);
    }
    for c in &j.commits {
        let n = stored.get(c.txid.as_str()).map_or(0, Vec::len);
        match (&c.outcome, n) {
            (CommitOutcome::Committed, 0) => r.violation(
                "lock-commit",
                format!(
                    "{} commit {} answered committed but not stored",
                    c.lock, c.txid
                ),
            ),
            (CommitOutcome::Refused(why), n) if n > 0 => r.violation(
                "lock-commit",
                format!("{} commit {} refused ({why}) but stored", c.lock, c.txid),
            ),
            (_, n) if n > 1 => r.violation(
                "lock-commit",
                format!("{} commit {} stored {n} times", c.lock, c.txid),
            ),
            _ => {}
        }
    }
    let attempts: HashMap<&str, &Commit> = j.commits.iter().map(|c| (c.txid.as_str(), c)).collect();
    for rec in &j.records {
        match attempts.get(rec.txid.as_str()) {
            None => r.violation(
                "lock-commit",
                format!(
                    "{}@{} record {} was never sent",
                    rec.lock, rec.offset, rec.txid
                ),
            ),
            Some(c)
                if c.token != rec.token || c.worker as i64 != rec.worker || c.lock != rec.lock =>
            {
                r.violation(
                    "lock-commit",
                    format!(
                        "{}@{} record {} holds worker {} token {}, sent as {} worker {} token {}",
                        rec.lock,
                        rec.offset,
                        rec.txid,
                        rec.worker,
                        rec.token,
                        c.lock,
                        c.worker,
                        c.token
                    ),
                )
            }
            Some(_) => {}
        }
    }
}

/// Guarded commits of one lock are serialised with its grants, so in offset
/// order a lock's records never go back to a lower token.
pub fn records_follow_token_order(r: &mut Report, j: &LockJournal) {
    let mut last: HashMap<&str, (i64, i64)> = HashMap::new();
    let mut recs: Vec<_> = j.records.iter().collect();
    recs.sort_by_key(|rec| (rec.lock.as_str(), rec.offset));
    for rec in recs {
        if let Some((tok, off)) = last.get(rec.lock.as_str()) {
            if rec.token < *tok {
                r.violation(
                    "lock-order",
                    format!(
                        "{}: record {} at offset {} has token {} after token {tok} at offset {off}",
                        rec.lock, rec.txid, rec.offset, rec.token
                    ),
                );
            }
        }
        last.insert(rec.lock.as_str(), (rec.token, rec.offset));
    }
}

/// Allowance of the expiry rule: the harness's monotonic clock against the
/// database's wall clock over one lifetime (0.1 %), plus granularity.
pub const EXPIRY_ALLOWANCE_US: u64 = 5_000;

/// A permit expires `TTL_SECS` after the grant (at the latest after the
/// grant's answer arrived); a guarded commit sent later than that, with that
/// token, finds the permit expired and must not commit (stored or answered).
pub fn expired_permit_guards_nothing(r: &mut Report, j: &LockJournal) {
    let mut answered: HashMap<(&str, i64), u64> = HashMap::new();
    for g in j.grants.iter().filter(|g| !g.already) {
        answered.insert((g.lock.as_str(), g.token), g.t_done);
    }
    let stored: HashMap<&str, i64> = j
        .records
        .iter()
        .map(|rec| (rec.txid.as_str(), rec.offset))
        .collect();
    for c in &j.commits {
        let Some(granted) = answered.get(&(c.lock.as_str(), c.token)) else {
            continue;
        };
        let expired = granted + TTL_SECS * 1_000_000 + EXPIRY_ALLOWANCE_US;
        let kept = c.outcome == CommitOutcome::Committed || stored.contains_key(c.txid.as_str());
        if kept && c.t_sent > expired {
            r.violation(
                "lock-expired",
                format!(
                    "{}: commit {} of token {} sent at {}, {} after the grant was answered at {}: the permit had expired",
                    c.lock,
                    c.txid,
                    c.token,
                    super::secs(c.t_sent),
                    super::secs(c.t_sent - granted),
                    super::secs(*granted)
                ),
            );
        }
    }
}
