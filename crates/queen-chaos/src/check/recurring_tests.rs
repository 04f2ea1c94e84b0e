use super::*;
use crate::workload::recurring::SPECS;

const FIRST: i64 = 1_767_225_600_000_000; // 2026-01-01T00:00:00Z

fn tick_txn(txn: &str, us: i64) -> String {
    let t = chrono::DateTime::from_timestamp_micros(us).unwrap();
    format!(
        "{txn}@{}",
        t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
    )
}

/// A clean journal: the 700 ms timer fired its first 40 ticks, 30 ms late each.
fn journal() -> RecurringJournal {
    let timers = SPECS
        .iter()
        .map(|s| RecurringTimer {
            spec: s.clone(),
            first_us: (s.key == "r-700").then_some(FIRST),
            cancelled: Some(true),
            t_scheduled: 0,
            t_cancel: 28_000_000,
        })
        .collect();
    let fires = (0..40)
        .map(|k| {
            let tick = FIRST + k * 700_000;
            RecurringFire {
                partition: "r-700".into(),
                txn: tick_txn("rc-700", tick),
                created_us: tick + 30_000,
            }
        })
        .collect();
    RecurringJournal {
        timers,
        fires,
        pending: Vec::new(),
    }
}

fn kinds(j: &RecurringJournal) -> Vec<&'static str> {
    let mut r = Report::default();
    check(&mut r, j);
    r.violations.keys().copied().collect()
}

#[test]
fn a_clean_run_passes() {
    assert_eq!(kinds(&journal()), Vec::<&str>::new());
}

#[test]
fn a_tick_twice_an_early_fire_and_a_replayed_backlog_are_found() {
    let mut j = journal();
    j.fires.push(j.fires[3].clone());
    assert_eq!(kinds(&j), ["recurring-doubled"]);

    let mut j = journal();
    j.fires[5].created_us = FIRST + 5 * 700_000 - 1;
    assert_eq!(kinds(&j), ["recurring-early"]);

    // a broker back after an outage fires every missed tick one by one
    let mut j = journal();
    for f in &mut j.fires[10..20] {
        f.created_us = FIRST + 20 * 700_000 + BACKLOG_ALLOWANCE_US;
    }
    assert_eq!(kinds(&j), ["recurring-backlog"]);

    // two ticks closer than the period (a re-arm that lost the grid)
    let mut j = journal();
    let tick = FIRST + 3 * 700_000 + 100_000;
    j.fires.push(RecurringFire {
        partition: "r-700".into(),
        txn: tick_txn("rc-700", tick),
        created_us: tick + 1,
    });
    assert_eq!(kinds(&j), ["recurring-doubled", "recurring-off-grid"]);
}

#[test]
fn phantoms_silence_and_leftovers_are_found() {
    let mut j = journal();
    j.fires[0].partition = "r-1300".into();
    j.fires.push(RecurringFire {
        partition: "r-700".into(),
        txn: "rc-700".into(),
        created_us: FIRST,
    });
    assert_eq!(kinds(&j), ["recurring-phantom"]);

    let mut j = journal();
    j.fires.truncate(5);
    assert_eq!(kinds(&j), ["recurring-lost"], "40 ticks of life, 5 fires");

    let mut j = journal();
    j.timers[1].cancelled = None;
    j.pending.push("r-cron".into());
    assert_eq!(kinds(&j), ["recurring-stuck"]);

    // a cron fire off the minute
    let mut j = journal();
    j.fires.push(RecurringFire {
        partition: "r-cron".into(),
        txn: tick_txn("rc-cron", FIRST + 1_000_000),
        created_us: FIRST + 1_000_001,
    });
    assert_eq!(kinds(&j), ["recurring-off-grid"]);
}
