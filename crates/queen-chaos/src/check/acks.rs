//! Rules on one consumer group's acks: an extended lease accepts them, every
//! message the cursor passed was acked, and nothing acked comes back.

use std::collections::{HashMap, HashSet};

use super::deliveries::Seen;
use super::{secs, GroupCtx, GroupRow, Key, Report};
use crate::journal::{AckEvent, AckItem, AckOutcome};

/// What the group's acks did.
pub(super) struct Acked {
    /// Per partition: `(answered at, offset)` of every ack that moved the cursor.
    moved: HashMap<String, Vec<(u64, i64)>>,
    /// Keys the group sent a `failed` ack for.
    pub(super) failed_sent: HashSet<Key>,
    /// Keys whose completed (or dead-lettering) ack succeeded, or may have.
    processed: HashSet<Key>,
}

/// Goes through the group's acks, applying the per-item rule and counting
/// late acks.
pub(super) fn check_acks(r: &mut Report, row: &mut GroupRow, ctx: &GroupCtx<'_>) -> Acked {
    let mut acked = Acked {
        moved: HashMap::new(),
        failed_sent: HashSet::new(),
        processed: HashSet::new(),
    };
    let offset_of = |pid: &str, txid: &str| -> Option<(String, i64)> {
        let pname = ctx.name_of.get(pid)?;
        ctx.stored
            .get(&((*pname).to_owned(), txid.to_owned()))
            .map(|m| ((*pname).to_owned(), m.offset))
    };
    for a in ctx.journal.acks.iter().filter(|a| a.group == ctx.gi) {
        for it in &a.items {
            let Some((pname, off)) = offset_of(&it.partition_id, &it.txid) else {
                continue;
            };
            if it.status == "failed" {
                acked.failed_sent.insert((pname.clone(), it.txid.clone()));
            }
            if a.late {
                match it.outcome {
                    AckOutcome::Ok { .. } => row.late_acks_accepted += 1,
                    AckOutcome::Refused(_) => row.late_acks_refused += 1,
                    AckOutcome::NoAnswer(_) => {}
                }
            }
            extended_lease_accepts_the_ack(r, ctx, a, it, &pname);
            if matches!(it.outcome, AckOutcome::NoAnswer(_))
                || matches!(it.outcome, AckOutcome::Ok { dlq } if dlq || it.status == "completed")
            {
                acked.processed.insert((pname.clone(), it.txid.clone()));
            }
            let moved = match it.outcome {
                AckOutcome::Ok { dlq } => it.status == "completed" || dlq,
                _ => false,
            };
            if moved {
                acked.moved.entry(pname).or_default().push((a.t_end, off));
            }
        }
    }
    acked
}

/// Rule: an ack answered while its lease was extended is not refused for the
/// lease (`lease`). Only first tries count: a retry may follow a first try
/// that committed without answering, after which the partition can be leased
/// anew and the retry is refused.
fn extended_lease_accepts_the_ack(
    r: &mut Report,
    ctx: &GroupCtx<'_>,
    a: &AckEvent,
    it: &AckItem,
    pname: &str,
) {
    if let (Some(until), AckOutcome::Refused(e), 0) = (a.extended_until, &it.outcome, a.attempt) {
        if a.t_end < until && e.contains("lease") {
            r.violation(
                "lease",
                format!(
                    "{}: ack of {pname}/{} answered at {} refused ({e}) although its lease was extended until at least {}",
                    ctx.gname,
                    it.txid,
                    secs(a.t_end),
                    secs(until)
                ),
            );
        }
    }
}

/// Rule: the cursor passed every message, so each one the group was
/// delivered must have been acked (completed or dead-lettered) by it; a
/// message delivered but never acked was skipped (`lost`).
pub(super) fn passed_messages_were_acked(
    r: &mut Report,
    row: &mut GroupRow,
    ctx: &GroupCtx<'_>,
    seen: &Seen,
    acked: &Acked,
) {
    let mut unacked: Vec<&Key> = ctx
        .must
        .iter()
        .filter(|k| seen.delivered.contains(*k) && !acked.processed.contains(*k))
        .collect();
    unacked.sort();
    row.unacked = unacked.len() as u64;
    for k in unacked {
        r.violation(
            "lost",
            format!(
                "{}: {}/{} delivered but never acked, yet the cursor passed it",
                ctx.gname, k.0, k.1
            ),
        );
    }
}

/// Rule: a pop never delivers an offset at or below one whose ack had
/// already succeeded when the pop started (`order`).
pub(super) fn pops_never_go_back_past_an_ack(
    r: &mut Report,
    row: &mut GroupRow,
    ctx: &GroupCtx<'_>,
    seen: &Seen,
    acked: &mut Acked,
) {
    for (pname, acks) in &mut acked.moved {
        acks.sort_unstable();
        let mut prefix = Vec::with_capacity(acks.len());
        let mut best = i64::MIN;
        for (t, off) in acks.iter() {
            best = best.max(*off);
            prefix.push((*t, best));
        }
        let Some(pops) = seen.pops_by_part.get(pname) else {
            continue;
        };
        for (t_start, t_end, first) in pops {
            let n = prefix.partition_point(|(t, _)| t < t_start);
            if n == 0 {
                continue;
            }
            let (t_ack, max_acked) = prefix[n - 1];
            if *first <= max_acked {
                row.reorders += 1;
                r.violation(
                    "order",
                    format!(
                        "{}: a pop of {pname} during {}..{} delivered offset {first} again, after an ack up to offset {max_acked} had succeeded (by {})",
                        ctx.gname,
                        secs(*t_start),
                        secs(*t_end),
                        secs(t_ack)
                    ),
                );
            }
        }
    }
}
