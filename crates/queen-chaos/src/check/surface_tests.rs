//! The timer and lock rules fed broken journals: each must fire, and a
//! clean journal must pass.

use super::{locks, timers, Report};
use crate::workload::locks::{Commit, CommitOutcome, Grant, LockJournal, LockRecord};
use crate::workload::timers::{
    FiredRow, TimerAnswer, TimerAsk, TimerDelivery, TimerJournal, TimerOp,
};

const EPOCH: i64 = 1_800_000_000_000_000;

fn sched(key: &str, txn: &str, delay_ms: i64, t_sent: u64, answer: TimerAnswer) -> TimerOp {
    TimerOp {
        key: key.into(),
        partition: "t0".into(),
        broker: 0,
        ask: TimerAsk::Schedule {
            txn: txn.into(),
            delay_ms,
        },
        t_sent,
        t_done: t_sent + 1000,
        answer,
    }
}

fn cancel(key: &str, t_sent: u64, answer: TimerAnswer) -> TimerOp {
    TimerOp {
        key: key.into(),
        partition: "t0".into(),
        broker: 1,
        ask: TimerAsk::Cancel,
        t_sent,
        t_done: t_sent + 1000,
        answer,
    }
}

fn ok(rescheduled: bool, mid: &str, deliver_at_us: i64) -> TimerAnswer {
    TimerAnswer::Scheduled {
        rescheduled,
        message_id: mid.into(),
        deliver_at_us,
    }
}

fn fired(txn: &str, mid: &str, offset: i64, created_us: i64) -> FiredRow {
    FiredRow {
        partition: "t0".into(),
        offset,
        txn: txn.into(),
        message_id: mid.into(),
        created_us,
    }
}

fn popped(txn: &str, mid: &str, t_end: u64) -> TimerDelivery {
    TimerDelivery {
        txn: txn.into(),
        message_id: mid.into(),
        partition: "t0".into(),
        t_end,
    }
}

/// k1: scheduled, fired, popped; k2: scheduled, rescheduled (the second one
/// fires); k3: scheduled then cancelled; k4: fired, then a cancel finds it
/// absent.
fn clean_timers() -> TimerJournal {
    TimerJournal {
        ops: vec![
            sched("k1", "a", 100, 0, ok(false, "m-a", EPOCH + 100_000)),
            sched("k2", "b", 5000, 0, ok(false, "m-b", EPOCH + 5_000_000)),
            sched("k2", "c", 200, 10_000, ok(true, "m-c", EPOCH + 210_000)),
            sched("k3", "d", 9000, 0, ok(false, "m-d", EPOCH + 9_000_000)),
            cancel("k3", 5_000, TimerAnswer::Cancelled { txn: "d".into() }),
            sched("k4", "e", 0, 0, ok(false, "m-e", EPOCH)),
            cancel("k4", 900_000, TimerAnswer::Absent),
        ],
        deliveries: vec![
            popped("a", "m-a", 150_000),
            popped("c", "m-c", 300_000),
            popped("e", "m-e", 20_000),
            popped("e", "m-e", 2_500_000),
        ],
        fired: vec![
            fired("a", "m-a", 1, EPOCH + 100_010),
            fired("c", "m-c", 2, EPOCH + 210_000),
            fired("e", "m-e", 3, EPOCH + 5),
        ],
        pending: vec![],
        dead: vec![],
    }
}

fn timer_kinds(j: &TimerJournal) -> Vec<&'static str> {
    let mut r = Report::default();
    timers::check(&mut r, j);
    r.violations.keys().copied().collect()
}

#[test]
fn a_clean_timer_history_passes() {
    let mut r = Report::default();
    timers::check(&mut r, &clean_timers());
    assert_eq!(r.violation_count(), 0, "{}", r.render());
}

#[test]
fn a_timer_fired_twice_is_doubled() {
    let mut j = clean_timers();
    j.fired.push(fired("a", "m-a", 7, EPOCH + 200_000));
    assert_eq!(timer_kinds(&j), ["timer-doubled"]);
}

#[test]
fn a_fire_before_deliver_at_is_early() {
    let mut j = clean_timers();
    j.fired[0].created_us = EPOCH + 99_999;
    assert_eq!(timer_kinds(&j), ["timer-early"]);
}

#[test]
fn a_pop_before_the_delay_is_early_beyond_the_allowance() {
    let mut j = clean_timers();
    // sent at 0 with 100 ms: 98.9 ms is inside 1 ms + 0.1 %, 98.8 ms is not
    j.deliveries[0].t_end = 98_900;
    assert!(timer_kinds(&j).is_empty());
    j.deliveries[0].t_end = 98_800;
    assert_eq!(timer_kinds(&j), ["timer-early"]);
}

#[test]
fn an_answered_timer_that_never_fired_is_lost() {
    let mut j = clean_timers();
    j.fired.retain(|f| f.txn != "a");
    j.deliveries.retain(|d| d.txn != "a");
    assert_eq!(timer_kinds(&j), ["timer-lost"]);
}

#[test]
fn an_absent_cancel_means_the_timer_fired() {
    let mut j = clean_timers();
    j.fired.retain(|f| f.txn != "e");
    j.deliveries.retain(|d| d.txn != "e");
    assert_eq!(timer_kinds(&j), ["timer-lost"]);
}

#[test]
fn a_cancelled_or_replaced_timer_that_fired_is_extra() {
    let mut j = clean_timers();
    j.fired.push(fired("d", "m-d", 8, EPOCH + 9_000_000));
    j.deliveries.push(popped("d", "m-d", 9_100_000));
    assert_eq!(timer_kinds(&j), ["timer-extra"]);
    let mut j = clean_timers();
    j.fired.push(fired("b", "m-b", 8, EPOCH + 5_000_000));
    j.deliveries.push(popped("b", "m-b", 5_100_000));
    assert_eq!(timer_kinds(&j), ["timer-extra"]);
}

#[test]
fn a_cancel_naming_another_txn_or_a_wrong_reschedule_is_a_verdict_violation() {
    let mut j = clean_timers();
    j.ops[4].answer = TimerAnswer::Cancelled { txn: "zz".into() };
    assert_eq!(timer_kinds(&j), ["timer-verdict"]);
    let mut j = clean_timers();
    j.ops[0].answer = ok(true, "m-a", EPOCH + 100_000);
    assert_eq!(timer_kinds(&j), ["timer-verdict"]);
}

#[test]
fn an_unanswered_schedule_may_fire_once_but_not_twice() {
    let mut j = clean_timers();
    j.ops.push(sched(
        "k9",
        "u",
        0,
        0,
        TimerAnswer::NoAnswer("killed".into()),
    ));
    j.fired.push(fired("u", "m-u", 9, EPOCH + 5));
    j.deliveries.push(popped("u", "m-u", 50_000));
    assert!(timer_kinds(&j).is_empty());
    j.fired.push(fired("u", "m-u2", 10, EPOCH + 6));
    assert!(timer_kinds(&j).contains(&"timer-doubled"));
}

#[test]
fn phantom_wrong_id_undelivered_and_stuck_timers_are_caught() {
    let mut j = clean_timers();
    j.fired.push(fired("never", "m-x", 9, EPOCH));
    j.deliveries.push(popped("never", "m-x", 1));
    assert_eq!(timer_kinds(&j), ["timer-phantom"]);
    let mut j = clean_timers();
    j.fired[0].message_id = "m-other".into();
    assert!(timer_kinds(&j).contains(&"timer-phantom"));
    let mut j = clean_timers();
    j.deliveries.retain(|d| d.txn != "c");
    assert_eq!(timer_kinds(&j), ["timer-undelivered"]);
    let mut j = clean_timers();
    j.pending.push(("k5".into(), "f".into()));
    assert_eq!(timer_kinds(&j), ["timer-stuck"]);
}

fn grant(lock: &str, owner: &str, token: i64, t_sent: u64, t_done: u64) -> Grant {
    Grant {
        lock: lock.into(),
        owner: owner.into(),
        token,
        already: false,
        renew: false,
        broker: 0,
        t_sent,
        t_done,
    }
}

fn commit(txid: &str, worker: usize, token: i64, t_sent: u64, outcome: CommitOutcome) -> Commit {
    Commit {
        lock: "lock-a".into(),
        worker,
        token,
        txid: txid.into(),
        stale: false,
        broker: 0,
        t_sent,
        t_done: t_sent + 5_000,
        outcome,
    }
}

fn record(txid: &str, worker: i64, token: i64, offset: i64) -> LockRecord {
    LockRecord {
        lock: "lock-a".into(),
        offset,
        txid: txid.into(),
        worker,
        token,
    }
}

/// Worker 0 holds token 10 and commits twice; it stalls, worker 1 takes
/// token 12 at 3 s and commits; worker 0's late commit is refused.
fn clean_locks() -> LockJournal {
    LockJournal {
        grants: vec![
            grant("lock-a", "w0-r1", 10, 0, 10_000),
            grant("lock-a", "w1-r1", 12, 2_990_000, 3_000_000),
        ],
        commits: vec![
            commit("x1", 0, 10, 20_000, CommitOutcome::Committed),
            commit("x2", 0, 10, 100_000, CommitOutcome::Committed),
            commit("y1", 1, 12, 3_010_000, CommitOutcome::Committed),
            commit(
                "x3",
                0,
                10,
                3_500_000,
                CommitOutcome::Refused("kv_precondition".into()),
            ),
        ],
        records: vec![
            record("x1", 0, 10, 1),
            record("x2", 0, 10, 2),
            record("y1", 1, 12, 3),
        ],
    }
}

fn lock_kinds(j: &LockJournal) -> Vec<&'static str> {
    let mut r = Report::default();
    locks::check(&mut r, j);
    r.violations.keys().copied().collect()
}

#[test]
fn a_clean_lock_history_passes() {
    let mut r = Report::default();
    locks::check(&mut r, &clean_locks());
    assert_eq!(r.violation_count(), 0, "{}", r.render());
}

#[test]
fn a_token_that_does_not_rise_is_caught() {
    let mut j = clean_locks();
    j.grants[1].token = 10;
    // the late commit of token 10 now looks legitimate, the grant does not
    assert!(lock_kinds(&j).contains(&"lock-token"));
    let mut j = clean_locks();
    j.grants
        .push(grant("lock-a", "w2-r1", 11, 4_000_000, 4_010_000));
    assert_eq!(lock_kinds(&j), ["lock-token"]);
}

#[test]
fn a_stale_commit_after_a_higher_grant_is_caught_stored_or_answered() {
    // stored at offset 4 after token 12 was granted: fence and order
    let mut j = clean_locks();
    j.commits[3].outcome = CommitOutcome::NoAnswer("killed".into());
    j.records.push(record("x3", 0, 10, 4));
    // (it was also sent after its own permit expired)
    assert_eq!(lock_kinds(&j), ["lock-expired", "lock-fence", "lock-order"]);
    // answered committed but (wrongly) not stored: fence and commit
    let mut j = clean_locks();
    j.commits[3].outcome = CommitOutcome::Committed;
    assert_eq!(
        lock_kinds(&j),
        ["lock-commit", "lock-expired", "lock-fence"]
    );
}

#[test]
fn commit_answers_must_match_the_records() {
    let mut j = clean_locks();
    j.records.retain(|r| r.txid != "x2");
    assert_eq!(lock_kinds(&j), ["lock-commit"]);
    let mut j = clean_locks();
    j.records.push(record("zz", 3, 12, 4));
    assert_eq!(lock_kinds(&j), ["lock-commit"]);
    let mut j = clean_locks();
    j.records[2].token = 13;
    assert_eq!(lock_kinds(&j), ["lock-commit"]);
}

#[test]
fn records_going_back_to_a_lower_token_are_out_of_order() {
    let mut j = clean_locks();
    // the late commit landed before worker 1's (no fence: sent before any
    // higher grant in this variant), yet its offset is after token 12
    j.grants[1].t_done = 3_600_000;
    j.grants[1].t_sent = 3_590_000;
    j.commits[2].t_sent = 3_610_000;
    j.commits[3].t_sent = 1_500_000;
    j.commits[3].outcome = CommitOutcome::Committed;
    j.records.push(record("x3", 0, 10, 4));
    assert_eq!(lock_kinds(&j), ["lock-order"]);
}

#[test]
fn a_commit_after_the_permit_expired_is_caught() {
    let mut j = clean_locks();
    // worker 1's token 12 was answered at 3 s; a commit of it at 5.1 s
    // committed although nobody renewed it
    j.commits
        .push(commit("y2", 1, 12, 5_100_000, CommitOutcome::Committed));
    j.records.push(record("y2", 1, 12, 4));
    assert_eq!(lock_kinds(&j), ["lock-expired"]);
    // inside the lifetime and the allowance it is fine
    let mut j = clean_locks();
    j.commits
        .push(commit("y2", 1, 12, 5_004_000, CommitOutcome::Committed));
    j.records.push(record("y2", 1, 12, 4));
    assert!(lock_kinds(&j).is_empty());
}
