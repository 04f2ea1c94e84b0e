//! The timer rules: from every schedule, reschedule and cancel answer, what
//! the timer group popped, and the destination queue's segments.
//!
//! | rule | violation kind | function |
//! |---|---|---|
//! | a fired message is the txn of a schedule that was sent, with the promised message id | `timer-phantom` | `fired_timer_was_scheduled` |
//! | a txn fires at most once | `timer-doubled` | `timer_fires_at_most_once` |
//! | a fire is stored not before its answered `deliverAt` (database clock, exact) | `timer-early` | `timer_never_fires_early` |
//! | a pop delivers a timer not before `delayMs` after its schedule was sent (client clock) | `timer-early` | `delivery_never_early` |
//! | an answered schedule fires exactly once unless the key's next op replaced or cancelled it; a cancel answered `cancelled` names it and it never fires; `absent`/`too_late` after it means it fired | `timer-lost`, `timer-extra`, `timer-verdict` | `answered_timer_fires_unless_removed` |
//! | `scheduled`/`rescheduled` agree with what the key held | `timer-verdict` | `verdicts_follow_the_key` |
//! | every fired timer reached the group, with its stored id | `timer-undelivered` | `fired_timer_is_delivered` |
//! | after the drain no timer is pending and none was dead-lettered | `timer-stuck` | `nothing_left_pending` |
//!
//! Clock allowance: the database rule compares two `clock_timestamp()` values
//! of the same PostgreSQL server (`deliver_at` at schedule, the segment's
//! `created_at` at the fire), answered with six fractional digits, so it
//! allows nothing. The client rule compares the harness's monotonic clock
//! with a delay the database measured on its wall clock: it allows 1 ms of
//! granularity plus 0.1 % of the delay (twice the largest NTP slew rate).

use std::collections::{HashMap, HashSet};

use super::Report;
use crate::workload::timers::{FiredRow, TimerAnswer, TimerAsk, TimerJournal, TimerOp};

/// The allowance of the client-clock rule for a delay of `delay_ms`, in µs.
pub fn client_allowance_us(delay_ms: i64) -> u64 {
    1000 + delay_ms.max(0) as u64
}

/// Schedule ops by txn.
fn schedules(j: &TimerJournal) -> HashMap<&str, &TimerOp> {
    j.ops
        .iter()
        .filter_map(|o| match &o.ask {
            TimerAsk::Schedule { txn, .. } => Some((txn.as_str(), o)),
            TimerAsk::Cancel => None,
        })
        .collect()
}

/// Fired rows by txn.
fn fired_by_txn(j: &TimerJournal) -> HashMap<&str, Vec<&FiredRow>> {
    let mut m: HashMap<&str, Vec<&FiredRow>> = HashMap::new();
    for f in &j.fired {
        m.entry(f.txn.as_str()).or_default().push(f);
    }
    m
}

pub fn check(r: &mut Report, j: &TimerJournal) {
    fired_timer_was_scheduled(r, j);
    timer_fires_at_most_once(r, j);
    timer_never_fires_early(r, j);
    delivery_never_early(r, j);
    let (fire, never, open) = answered_timer_fires_unless_removed(r, j);
    verdicts_follow_the_key(r, j);
    fired_timer_is_delivered(r, j);
    nothing_left_pending(r, j);
    r.lines.push(summary(j));
    r.lines.push(format!(
        "  answered timers: {fire} held to exactly once, {never} to never (replaced or cancelled), {open} undecided (next op unanswered: at most once)"
    ));
}

fn summary(j: &TimerJournal) -> String {
    let mut n: HashMap<&str, u64> = HashMap::new();
    for o in &j.ops {
        let k = match (&o.ask, &o.answer) {
            (
                _,
                TimerAnswer::Scheduled {
                    rescheduled: false, ..
                },
            ) => "scheduled",
            (_, TimerAnswer::Scheduled { .. }) => "rescheduled",
            (_, TimerAnswer::Cancelled { .. }) => "cancelled",
            (_, TimerAnswer::Absent) => "absent",
            (_, TimerAnswer::TooLate) => "too_late",
            (_, TimerAnswer::Refused(_)) => "refused",
            (_, TimerAnswer::NoAnswer(_)) => "unanswered",
        };
        *n.entry(k).or_default() += 1;
    }
    let keys: HashSet<&str> = j.ops.iter().map(|o| o.key.as_str()).collect();
    let delivered: HashSet<&str> = j.deliveries.iter().map(|d| d.txn.as_str()).collect();
    let g = |k: &str| n.get(k).copied().unwrap_or(0);
    format!(
        "timers: {} ops on {} keys (scheduled {}, rescheduled {}, cancelled {}, absent {}, too_late {}, refused {}, unanswered {}); fired {}, delivered {} distinct in {} pops' messages",
        j.ops.len(),
        keys.len(),
        g("scheduled"),
        g("rescheduled"),
        g("cancelled"),
        g("absent"),
        g("too_late"),
        g("refused"),
        g("unanswered"),
        j.fired.len(),
        delivered.len(),
        j.deliveries.len()
    )
}

/// Every fired message is the txn of a schedule that was sent (answered or
/// not, never refused) and carries the message id promised for it.
pub fn fired_timer_was_scheduled(r: &mut Report, j: &TimerJournal) {
    let sched = schedules(j);
    for f in &j.fired {
        match sched.get(f.txn.as_str()) {
            None => r.violation(
                "timer-phantom",
                format!(
                    "{}@{} txn {} fired but was never scheduled",
                    f.partition, f.offset, f.txn
                ),
            ),
            Some(o) => match &o.answer {
                TimerAnswer::Refused(e) => r.violation(
                    "timer-phantom",
                    format!("txn {} fired but its schedule was refused: {e}", f.txn),
                ),
                TimerAnswer::Scheduled { message_id, .. } if *message_id != f.message_id => r
                    .violation(
                        "timer-phantom",
                        format!(
                            "txn {} fired as message {}, promised {message_id}",
                            f.txn, f.message_id
                        ),
                    ),
                _ => {}
            },
        }
    }
}

/// No txn is stored twice.
pub fn timer_fires_at_most_once(r: &mut Report, j: &TimerJournal) {
    for (txn, rows) in fired_by_txn(j) {
        if rows.len() > 1 {
            let at: Vec<String> = rows
                .iter()
                .map(|f| format!("{}@{}", f.partition, f.offset))
                .collect();
            r.violation(
                "timer-doubled",
                format!("txn {txn} fired {} times: {}", rows.len(), at.join(", ")),
            );
        }
    }
}

/// A fire is stored at or after the `deliverAt` its schedule was answered
/// with (both read from the database clock).
pub fn timer_never_fires_early(r: &mut Report, j: &TimerJournal) {
    let sched = schedules(j);
    for f in &j.fired {
        if let Some(TimerAnswer::Scheduled { deliver_at_us, .. }) =
            sched.get(f.txn.as_str()).map(|o| &o.answer)
        {
            if f.created_us < *deliver_at_us {
                r.violation(
                    "timer-early",
                    format!(
                        "txn {} stored {} µs before its deliverAt",
                        f.txn,
                        deliver_at_us - f.created_us
                    ),
                );
            }
        }
    }
}

/// A pop answers a timer's message no earlier than `delayMs` after the
/// schedule was sent, less [`client_allowance_us`].
pub fn delivery_never_early(r: &mut Report, j: &TimerJournal) {
    let sched = schedules(j);
    for d in &j.deliveries {
        let Some(o) = sched.get(d.txn.as_str()) else {
            continue;
        };
        let TimerAsk::Schedule { delay_ms, .. } = o.ask else {
            continue;
        };
        let earliest = o.t_sent + delay_ms.max(0) as u64 * 1000;
        if d.t_end + client_allowance_us(delay_ms) < earliest {
            r.violation(
                "timer-early",
                format!(
                    "txn {} delivered {} µs after its schedule was sent, delay {delay_ms} ms",
                    d.txn,
                    d.t_end.saturating_sub(o.t_sent)
                ),
            );
        }
    }
}

/// Per key, the ops in order, without the refused ones (nothing applied).
fn by_key(j: &TimerJournal) -> Vec<Vec<&TimerOp>> {
    let mut order: Vec<&str> = Vec::new();
    let mut m: HashMap<&str, Vec<&TimerOp>> = HashMap::new();
    for o in &j.ops {
        if matches!(o.answer, TimerAnswer::Refused(_)) {
            continue;
        }
        let e = m.entry(o.key.as_str()).or_default();
        if e.is_empty() {
            order.push(o.key.as_str());
        }
        e.push(o);
    }
    order.into_iter().filter_map(|k| m.remove(k)).collect()
}

/// A schedule answered `scheduled`/`rescheduled` fires exactly once, unless
/// the key's next op removed it: a `rescheduled` answer (it was pending and
/// replaced) or a `cancelled` one (which must name its txn). A next op
/// answered `scheduled`, `absent` or `too_late` found it gone, so it fired.
/// A next op without an answer leaves it undecided (at most once).
/// Returns how many were held to "exactly once", to "never", and left open.
pub fn answered_timer_fires_unless_removed(r: &mut Report, j: &TimerJournal) -> (u64, u64, u64) {
    let fired = fired_by_txn(j);
    let mut counts = (0, 0, 0);
    for ops in by_key(j) {
        for (i, o) in ops.iter().enumerate() {
            let (TimerAsk::Schedule { txn, .. }, TimerAnswer::Scheduled { .. }) =
                (&o.ask, &o.answer)
            else {
                continue;
            };
            let stored = fired.get(txn.as_str()).map_or(0, Vec::len);
            let must_fire = match ops.get(i + 1).map(|n| &n.answer) {
                None => Some(true),
                Some(TimerAnswer::Scheduled { rescheduled, .. }) => Some(!rescheduled),
                Some(TimerAnswer::Cancelled { txn: removed }) => {
                    if removed != txn {
                        r.violation(
                            "timer-verdict",
                            format!(
                                "key {}: cancel answered cancelled txn {removed}, the pending one was {txn}",
                                o.key
                            ),
                        );
                    }
                    Some(false)
                }
                Some(TimerAnswer::Absent | TimerAnswer::TooLate) => Some(true),
                Some(TimerAnswer::NoAnswer(_) | TimerAnswer::Refused(_)) => None,
            };
            match must_fire {
                Some(true) => counts.0 += 1,
                Some(false) => counts.1 += 1,
                None => counts.2 += 1,
            }
            match must_fire {
                Some(true) if stored == 0 => r.violation(
                    "timer-lost",
                    format!(
                        "key {} txn {txn} was answered scheduled and never removed, but never fired",
                        o.key
                    ),
                ),
                Some(false) if stored > 0 => r.violation(
                    "timer-extra",
                    format!(
                        "key {} txn {txn} fired although the next op removed it ({:?})",
                        o.key,
                        ops.get(i + 1).map(|n| &n.answer)
                    ),
                ),
                _ => {}
            }
        }
    }
    counts
}

/// A key's first op, or an op right after an answered cancel or `absent`,
/// finds nothing pending: a schedule then is answered `scheduled`, a cancel
/// `absent`.
pub fn verdicts_follow_the_key(r: &mut Report, j: &TimerJournal) {
    for ops in by_key(j) {
        let mut empty = Some(true);
        for o in ops {
            match (&o.answer, empty) {
                (
                    TimerAnswer::Scheduled {
                        rescheduled: true, ..
                    },
                    Some(true),
                ) => r.violation(
                    "timer-verdict",
                    format!(
                        "key {}: answered rescheduled while nothing was pending",
                        o.key
                    ),
                ),
                (TimerAnswer::Cancelled { txn }, Some(true)) => r.violation(
                    "timer-verdict",
                    format!(
                        "key {}: cancelled txn {txn} while nothing was pending",
                        o.key
                    ),
                ),
                _ => {}
            }
            empty = match &o.answer {
                TimerAnswer::Cancelled { .. } | TimerAnswer::Absent | TimerAnswer::TooLate => {
                    Some(true)
                }
                // a pending timer may fire at any moment: unknown after a schedule
                _ => None,
            };
        }
    }
}

/// Every fired timer reached the timer group at least once, each delivery
/// with the stored message id.
pub fn fired_timer_is_delivered(r: &mut Report, j: &TimerJournal) {
    let mut got: HashMap<&str, Vec<&str>> = HashMap::new();
    for d in &j.deliveries {
        got.entry(d.txn.as_str())
            .or_default()
            .push(d.message_id.as_str());
    }
    for f in &j.fired {
        match got.get(f.txn.as_str()) {
            None => r.violation(
                "timer-undelivered",
                format!(
                    "txn {} fired ({}@{}) but was never popped",
                    f.txn, f.partition, f.offset
                ),
            ),
            Some(ids) if ids.iter().any(|m| *m != f.message_id) => r.violation(
                "timer-undelivered",
                format!(
                    "txn {} delivered with ids {ids:?}, stored {}",
                    f.txn, f.message_id
                ),
            ),
            Some(_) => {}
        }
    }
    let stored: HashSet<&str> = j.fired.iter().map(|f| f.txn.as_str()).collect();
    for d in &j.deliveries {
        if !stored.contains(d.txn.as_str()) {
            r.violation(
                "timer-phantom",
                format!("txn {} delivered but not stored", d.txn),
            );
        }
    }
}

/// After the drain no timer is pending and none went to the DLQ.
pub fn nothing_left_pending(r: &mut Report, j: &TimerJournal) {
    for (key, txn) in &j.pending {
        r.violation(
            "timer-stuck",
            format!("key {key} txn {txn} still pending after the drain"),
        );
    }
    for (txn, err) in &j.dead {
        r.violation("timer-stuck", format!("txn {txn} was dead-lettered: {err}"));
    }
}
