//! The recurring-timer rules: from the answered schedules and cancels and
//! every fire the segments of `chaos-recurring` hold.
//!
//! | rule | violation kind | function |
//! |---|---|---|
//! | every fire is `txn@<tick>` of a scheduled timer, in that timer's partition | `recurring-phantom` | `fires_of` |
//! | no tick is stored twice, and no two fires of a timer stand for ticks closer than its period | `recurring-doubled` | `no_tick_twice` |
//! | a tick is on the schedule's grid: the answered first tick plus whole intervals; whole minutes for the cron timer | `recurring-off-grid` | `no_tick_twice` |
//! | a fire is stored not before its tick (both the database clock, exact) | `recurring-early` | `never_early_nor_a_backlog` |
//! | a fire stands for the latest tick passed when a sweep took it, so it is stored less than a period (plus 5 s for the sweep's own transaction under faults) after its tick: missed ticks are never replayed one by one | `recurring-backlog` | `never_early_nor_a_backlog` |
//! | an answered timer fired at least a quarter of the ticks of its life (the CI plan holds every broker away from PostgreSQL for about 4 s of 60) | `recurring-lost` | `kept_firing` |
//! | every cancel was answered and no timer row is left | `recurring-stuck` | `nothing_left` |

use std::collections::{HashMap, HashSet};

use super::Report;
use crate::workload::recurring::{RecurringFire, RecurringJournal, RecurringTimer};

/// What a sweep's transaction may add between taking a timer and storing its
/// fire, beyond the period, in µs.
pub const BACKLOG_ALLOWANCE_US: i64 = 5_000_000;

/// A fire read back: its timer and the tick its transactionId names.
#[derive(Debug)]
struct Fire<'a> {
    timer: &'a RecurringTimer,
    tick_us: i64,
    row: &'a RecurringFire,
}

pub fn check(r: &mut Report, j: &RecurringJournal) {
    let fires = fires_of(r, j);
    no_tick_twice(r, &fires);
    never_early_nor_a_backlog(r, &fires);
    kept_firing(r, j, &fires);
    nothing_left(r, j);
    let per: Vec<String> = j
        .timers
        .iter()
        .map(|t| {
            let n = fires
                .iter()
                .filter(|f| f.timer.spec.key == t.spec.key)
                .count();
            format!("{} {n}", t.spec.key)
        })
        .collect();
    r.lines.push(format!(
        "recurring timers: {} fires ({}), cancels answered {}/{}",
        fires.len(),
        per.join(", "),
        j.timers.iter().filter(|t| t.cancelled.is_some()).count(),
        j.timers.len()
    ));
}

fn fires_of<'a>(r: &mut Report, j: &'a RecurringJournal) -> Vec<Fire<'a>> {
    let by_txn: HashMap<&str, &RecurringTimer> = j.timers.iter().map(|t| (t.spec.txn, t)).collect();
    let mut out = Vec::new();
    for row in &j.fires {
        let parsed = row.txn.split_once('@').and_then(|(txn, tick)| {
            let t = by_txn.get(txn)?;
            let tick = chrono::DateTime::parse_from_rfc3339(tick).ok()?;
            Some((*t, tick.timestamp_micros()))
        });
        match parsed {
            Some((timer, tick_us)) if row.partition == timer.spec.key => out.push(Fire {
                timer,
                tick_us,
                row,
            }),
            _ => r.violation(
                "recurring-phantom",
                format!(
                    "{} in {} is no tick of a recurring timer",
                    row.txn, row.partition
                ),
            ),
        }
    }
    out
}

fn no_tick_twice(r: &mut Report, fires: &[Fire<'_>]) {
    let mut seen = HashSet::new();
    let mut ticks: HashMap<&str, (i64, Vec<i64>)> = HashMap::new();
    for f in fires {
        if !seen.insert(f.row.txn.as_str()) {
            r.violation("recurring-doubled", format!("{} stored twice", f.row.txn));
            continue;
        }
        ticks
            .entry(f.timer.spec.key)
            .or_insert_with(|| (f.timer.spec.period_ms, Vec::new()))
            .1
            .push(f.tick_us);
        let spec = &f.timer.spec;
        let on_grid = match (spec.interval_ms, f.timer.first_us) {
            (Some(ms), Some(first)) if f.tick_us >= first => (f.tick_us - first) % (ms * 1000) == 0,
            // fired by a schedule attempt that got no answer, before the one that stood
            (Some(_), _) => true,
            (None, _) => f.tick_us % 60_000_000 == 0,
        };
        if !on_grid {
            r.violation(
                "recurring-off-grid",
                format!(
                    "{} is off the grid of {} (first tick {:?})",
                    f.row.txn, spec.key, f.timer.first_us
                ),
            );
        }
    }
    for (key, (period_ms, mut list)) in ticks {
        list.sort_unstable();
        if let Some(w) = list.windows(2).find(|w| w[1] - w[0] < period_ms * 1000) {
            r.violation(
                "recurring-doubled",
                format!(
                    "{key}: ticks {} and {} µs are closer than the period of {period_ms} ms",
                    w[0], w[1]
                ),
            );
        }
    }
}

fn never_early_nor_a_backlog(r: &mut Report, fires: &[Fire<'_>]) {
    for f in fires {
        let late = f.row.created_us - f.tick_us;
        if late < 0 {
            r.violation(
                "recurring-early",
                format!("{} stored {} µs before its tick", f.row.txn, -late),
            );
        } else if late >= f.timer.spec.period_ms * 1000 + BACKLOG_ALLOWANCE_US {
            r.violation(
                "recurring-backlog",
                format!(
                    "{} stored {late} µs after its tick: a later tick had passed (period {} ms)",
                    f.row.txn, f.timer.spec.period_ms
                ),
            );
        }
    }
}

fn kept_firing(r: &mut Report, j: &RecurringJournal, fires: &[Fire<'_>]) {
    for t in j.timers.iter().filter(|t| t.first_us.is_some()) {
        let life_ms = t.t_cancel.saturating_sub(t.t_scheduled) as i64 / 1000;
        let want = life_ms / t.spec.period_ms / 4;
        let got = fires
            .iter()
            .filter(|f| f.timer.spec.key == t.spec.key)
            .count() as i64;
        if got < want {
            r.violation(
                "recurring-lost",
                format!(
                    "{} fired {got} times in {life_ms} ms at a period of {} ms (want {want} at least)",
                    t.spec.key, t.spec.period_ms
                ),
            );
        }
    }
}

fn nothing_left(r: &mut Report, j: &RecurringJournal) {
    for t in j.timers.iter().filter(|t| t.cancelled.is_none()) {
        r.violation(
            "recurring-stuck",
            format!("the cancel of {} was never answered", t.spec.key),
        );
    }
    for key in &j.pending {
        r.violation(
            "recurring-stuck",
            format!("{key} still pending after its cancel"),
        );
    }
}

#[cfg(test)]
#[path = "recurring_tests.rs"]
mod tests;
