//! The checker's rules on small hand-made runs: a clean one, and one
//! violation of each kind.

use serde_json::Value;

use super::*;
use crate::dbstate::{CursorRow, DeadLetterRow, KeyRow, PartitionRow, StoredMessage};
use crate::journal::{
    AckEvent, AckItem, AckOutcome, Delivery, Handling, ItemKind, PopEvent, PushEvent, Told,
};
use crate::workload::{is_flaky, is_poison};
use serde_json::json;

const G: &str = "ga";
const P: &str = "p00";
const PID: &str = "00000000-0000-0000-0000-0000000000p0";

/// Transaction ids that are neither poison nor flaky for group `ga`.
fn plain_ids(n: usize) -> Vec<String> {
    (0..)
        .map(|i| format!("t{i}"))
        .filter(|t| !is_poison(G, P, t) && !is_flaky(G, P, t))
        .take(n)
        .collect()
}

fn payload(t: &str) -> Value {
    json!({ "txid": t })
}

fn push(t: &str, told: Told, at: u64) -> PushEvent {
    PushEvent {
        producer: 0,
        partition: P.into(),
        txid: t.into(),
        payload: payload(t),
        kind: ItemKind::Fresh,
        broker: 0,
        attempt: 0,
        pos: 0,
        t_sent: at,
        t_done: at + 1,
        told,
    }
}

fn delivery(t: &str) -> Delivery {
    Delivery {
        partition_id: PID.into(),
        partition: P.into(),
        txid: t.into(),
        message_id: format!("m-{t}"),
        lease_id: "l".into(),
        data: payload(t),
    }
}

fn pop(ts: &[&str], t_start: u64, t_end: u64) -> PopEvent {
    PopEvent {
        group: 0,
        consumer: 0,
        broker: 0,
        t_start,
        t_end,
        messages: ts.iter().map(|t| delivery(t)).collect(),
        handling: Handling::Acked,
    }
}

fn ack(t: &str, status: &'static str, outcome: AckOutcome, t_end: u64) -> AckEvent {
    acks(&[t], status, outcome, t_end)
}

fn acks(ts: &[&str], status: &'static str, outcome: AckOutcome, t_end: u64) -> AckEvent {
    AckEvent {
        group: 0,
        attempt: 0,
        consumer: 0,
        broker: 0,
        t_start: t_end - 1,
        t_end,
        late: false,
        extended_until: None,
        items: ts
            .iter()
            .map(|t| AckItem {
                partition_id: PID.into(),
                txid: (*t).into(),
                status,
                outcome: outcome.clone(),
            })
            .collect(),
    }
}

/// Three messages pushed, stored, delivered in one pop and acked.
fn clean() -> (Journal, DbState, Vec<String>) {
    let ids = plain_ids(3);
    let mut journal = Journal::default();
    journal.pushes.push(
        ids.iter()
            .enumerate()
            .map(|(i, t)| {
                push(
                    t,
                    Told::Queued {
                        message_id: format!("m-{t}"),
                    },
                    i as u64 * 10,
                )
            })
            .collect(),
    );
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    journal.pops.push(pop(&refs, 100, 110));
    journal
        .acks
        .push(acks(&refs, "completed", AckOutcome::Ok { dlq: false }, 120));
    let db = DbState {
        partitions: vec![PartitionRow {
            id: PID.into(),
            name: P.into(),
            next_offset: 4,
            low_offset: 1,
        }],
        messages: ids
            .iter()
            .enumerate()
            .map(|(i, t)| StoredMessage {
                partition_id: PID.into(),
                offset: i as i64 + 1,
                message_id: format!("m-{t}"),
                txid: t.clone(),
                payload: payload(t).to_string(),
                deleted: false,
            })
            .collect(),
        keys: ids
            .iter()
            .enumerate()
            .map(|(i, t)| KeyRow {
                partition_id: PID.into(),
                txid: t.clone(),
                offset: i as i64 + 1,
                message_id: format!("m-{t}"),
            })
            .collect(),
        cursors: vec![CursorRow {
            partition_id: PID.into(),
            group: G.into(),
            committed: 3,
            live_lease: false,
            lease_set: false,
        }],
        dead_letters: vec![],
    };
    (journal, db, ids)
}

fn run(journal: &Journal, db: &DbState) -> Report {
    check(journal, db, &[G.to_owned()], 2, &Extra::default())
}

fn kinds(r: &Report) -> Vec<&'static str> {
    r.violations.keys().copied().collect()
}

#[test]
fn a_clean_run_has_no_violation() {
    let (j, db, _) = clean();
    let r = run(&j, &db);
    assert_eq!(r.violation_count(), 0, "{}", r.render());
    assert_eq!(r.groups[0].distinct, 3);
}

#[test]
fn a_redelivery_is_counted_not_flagged() {
    let (mut j, db, ids) = clean();
    // the lease expired before the ack: the batch comes again, then the ack lands
    j.acks.clear();
    j.pops
        .push(pop(&[ids[1].as_str(), ids[2].as_str()], 115, 118));
    j.pops[1].messages.insert(0, delivery(&ids[0]));
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    j.acks
        .push(acks(&refs, "completed", AckOutcome::Ok { dlq: false }, 130));
    let r = run(&j, &db);
    assert_eq!(r.violation_count(), 0, "{}", r.render());
    assert_eq!(r.groups[0].redelivered, 3);
}

#[test]
fn a_message_never_delivered_is_lost_and_a_skip() {
    let (mut j, db, ids) = clean();
    j.pops[0] = pop(&[ids[0].as_str()], 100, 110);
    j.pops.push(pop(&[ids[2].as_str()], 111, 112));
    let r = run(&j, &db);
    assert!(r.violations.contains_key("lost"), "{}", r.render());
    assert!(r.violations.contains_key("order"), "{}", r.render());
}

#[test]
fn a_message_delivered_but_never_acked_is_lost() {
    let (mut j, db, ids) = clean();
    // delivered, abandoned, and the cursor moved past it anyway
    j.acks[0].items.remove(1);
    let r = run(&j, &db);
    assert_eq!(kinds(&r), vec!["lost"], "{}", r.render());
    assert!(r.violations["lost"][0].contains(&ids[1]));
    assert_eq!(r.groups[0].unacked, 1);
}

#[test]
fn out_of_order_inside_a_batch_is_a_reorder() {
    let (mut j, db, ids) = clean();
    j.pops[0] = pop(
        &[ids[0].as_str(), ids[2].as_str(), ids[1].as_str()],
        100,
        110,
    );
    let r = run(&j, &db);
    assert_eq!(kinds(&r), vec!["order"], "{}", r.render());
    assert_eq!(r.groups[0].reorders, 1);
}

#[test]
fn delivery_after_a_successful_ack_is_a_reorder() {
    let (mut j, db, ids) = clean();
    j.pops.push(pop(&[ids[2].as_str()], 200, 210));
    let r = run(&j, &db);
    assert_eq!(kinds(&r), vec!["order"], "{}", r.render());
}

#[test]
fn a_vouched_push_that_is_not_stored_is_lost() {
    let (mut j, db, _) = clean();
    j.pushes[0].push(push("gone", Told::Buffered, 50));
    let r = run(&j, &db);
    assert!(r.violations["lost"]
        .iter()
        .any(|v| v.contains("never stored")));
}

#[test]
fn an_unanswered_push_that_is_not_stored_is_fine() {
    let (mut j, db, _) = clean();
    j.pushes[0].push(push("maybe", Told::NoAnswer("reset".into()), 50));
    let r = run(&j, &db);
    assert_eq!(r.violation_count(), 0, "{}", r.render());
}

#[test]
fn a_stored_message_nobody_pushed_is_a_phantom() {
    let (j, mut db, _) = clean();
    db.partitions[0].next_offset = 5;
    db.messages.push(StoredMessage {
        partition_id: PID.into(),
        offset: 4,
        message_id: "m-x".into(),
        txid: "x".into(),
        payload: "{}".into(),
        deleted: false,
    });
    db.keys.push(KeyRow {
        partition_id: PID.into(),
        txid: "x".into(),
        offset: 4,
        message_id: "m-x".into(),
    });
    let r = run(&j, &db);
    assert!(r.violations.contains_key("phantom"), "{}", r.render());
    // and the group never got it, and its cursor is behind
    assert!(r.violations.contains_key("lost"));
    assert!(r.violations.contains_key("drained"));
}

#[test]
fn a_key_stored_twice_is_doubled() {
    let (j, mut db, ids) = clean();
    db.partitions[0].next_offset = 5;
    db.messages.push(StoredMessage {
        partition_id: PID.into(),
        offset: 4,
        message_id: "m-again".into(),
        txid: ids[0].clone(),
        payload: payload(&ids[0]).to_string(),
        deleted: false,
    });
    let r = run(&j, &db);
    assert!(r.violations.contains_key("doubled"), "{}", r.render());
}

#[test]
fn a_second_queued_answer_is_a_dedup_miss() {
    let (mut j, db, ids) = clean();
    let mut again = push(
        &ids[0],
        Told::Queued {
            message_id: "m-other".into(),
        },
        60,
    );
    again.kind = ItemKind::Repeat;
    j.pushes[0].push(again);
    let r = run(&j, &db);
    assert!(r.violations.contains_key("dedup"), "{}", r.render());
}

#[test]
fn queued_answers_must_get_increasing_offsets() {
    let (mut j, db, _) = clean();
    j.pushes[0].swap(0, 1);
    let r = run(&j, &db);
    assert!(r.violations.contains_key("order"), "{}", r.render());
}

#[test]
fn dlq_entries_must_be_failed_once_and_unique() {
    let (j, mut db, ids) = clean();
    let row = DeadLetterRow {
        partition_id: PID.into(),
        group: G.into(),
        offset: 1,
        message_id: format!("m-{}", ids[0]),
        txid: ids[0].clone(),
        retry_count: 1,
    };
    db.dead_letters = vec![row.clone(), row];
    let r = run(&j, &db);
    let dlq = &r.violations["dlq"];
    assert!(dlq.iter().any(|v| v.contains("never failed")), "{dlq:?}");
    assert!(dlq.iter().any(|v| v.contains("2 times")), "{dlq:?}");
    assert!(dlq.iter().any(|v| v.contains("retry count 1")), "{dlq:?}");
}

#[test]
fn a_poison_message_outside_the_dlq_is_flagged() {
    let poison = (0..)
        .map(|i| format!("x{i}"))
        .find(|t| is_poison(G, P, t))
        .unwrap();
    let (mut j, mut db, _) = clean();
    db.partitions[0].next_offset = 5;
    db.messages.push(StoredMessage {
        partition_id: PID.into(),
        offset: 4,
        message_id: format!("m-{poison}"),
        txid: poison.clone(),
        payload: payload(&poison).to_string(),
        deleted: false,
    });
    db.keys.push(KeyRow {
        partition_id: PID.into(),
        txid: poison.clone(),
        offset: 4,
        message_id: format!("m-{poison}"),
    });
    db.cursors[0].committed = 4;
    j.pushes[0].push(push(
        &poison,
        Told::Queued {
            message_id: format!("m-{poison}"),
        },
        40,
    ));
    j.pops.push(pop(&[poison.as_str()], 130, 140));
    j.acks.push(ack(
        &poison,
        "failed",
        AckOutcome::NoAnswer("reset".into()),
        150,
    ));
    let r = run(&j, &db);
    assert_eq!(kinds(&r), vec!["dlq"], "{}", r.render());
    assert_eq!(r.groups[0].dlq_expected, 1);
}

#[test]
fn live_leases_and_lagging_cursors_are_flagged() {
    let (j, mut db, _) = clean();
    db.cursors[0].live_lease = true;
    db.cursors[0].committed = 2;
    let r = run(&j, &db);
    assert!(r.violations.contains_key("leased"));
    assert!(r.violations.contains_key("drained"));
}

#[test]
fn an_ack_refused_inside_an_extended_lease_is_flagged() {
    let (mut j, db, ids) = clean();
    let mut a = ack(
        &ids[2],
        "completed",
        AckOutcome::Refused("Invalid or expired lease".into()),
        115,
    );
    a.extended_until = Some(1_000);
    j.acks.insert(0, a);
    let r = run(&j, &db);
    assert_eq!(kinds(&r), vec!["lease"], "{}", r.render());
}
