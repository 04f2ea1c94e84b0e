use super::*;
use crate::workload::retry_delay::RetryAck;

fn pop(t_sent: u64, t_done: u64, messages: &[(&str, i64)]) -> RetryPop {
    RetryPop {
        partition: "p0".into(),
        t_sent,
        t_done,
        messages: messages
            .iter()
            .map(|(t, a)| ((*t).to_owned(), *a))
            .collect(),
    }
}

fn ack(txid: &str, completed: bool, t_sent: u64) -> RetryAck {
    RetryAck {
        partition: "p0".into(),
        txid: txid.into(),
        completed,
        t_sent,
    }
}

/// A clean run: m0 fails once (250 ms wait), then fails again (500 ms),
/// then m0 and m1 complete.
fn journal() -> RetryJournal {
    RetryJournal {
        pops: vec![
            pop(0, 2_000, &[("m0", 1), ("m1", 1)]),
            pop(260_000, 262_000, &[("m0", 2), ("m1", 2)]),
            pop(770_000, 772_000, &[("m0", 3), ("m1", 3)]),
        ],
        acks: vec![
            ack("m0", false, 3_000),
            ack("m0", false, 263_000),
            ack("m0", true, 773_000),
            ack("m1", true, 773_000),
        ],
        pushed: vec!["m0".into(), "m1".into()],
        stored: vec![("p0".into(), "m0".into()), ("p0".into(), "m1".into())],
        behind: Vec::new(),
    }
}

fn kinds(j: &RetryJournal) -> Vec<&'static str> {
    let mut r = Report::default();
    check(&mut r, j);
    r.violations.keys().copied().collect()
}

#[test]
fn a_clean_run_passes() {
    assert_eq!(kinds(&journal()), Vec::<&str>::new());
}

#[test]
fn a_redelivery_before_its_wait_is_caught() {
    let mut j = journal();
    // the second failure's 500 ms wait ends at 762 ms at the earliest
    j.pops[2] = pop(400_000, 402_000, &[("m0", 3), ("m1", 3)]);
    assert_eq!(kinds(&j), ["retry-early"]);
    // a delivery whose answer was lost failed in between: attempt 3 waits
    // the 500 ms after attempt 2, counted from the last delivery seen
    let mut j = journal();
    j.pops.remove(1);
    j.pops[0] = pop(0, 2_000, &[("m0", 1), ("m1", 1)]);
    j.pops[1] = pop(200_000, 201_000, &[("m0", 3), ("m1", 3)]);
    assert_eq!(kinds(&j), ["retry-early"]);
}

#[test]
fn a_message_overtaking_a_failed_one_is_caught() {
    let mut j = journal();
    j.pops[1] = pop(260_000, 262_000, &[("m1", 2)]);
    assert!(kinds(&j).contains(&"retry-overtaken"), "{:?}", kinds(&j));
}

#[test]
fn an_attempt_that_did_not_grow_and_a_lost_message_are_caught() {
    let mut j = journal();
    j.pops[1].messages[1].1 = 1;
    assert_eq!(kinds(&j), ["retry-attempt"]);
    let mut j = journal();
    j.stored.push(("p0".into(), "m2".into()));
    j.behind.push(("p0".into(), 1));
    assert_eq!(kinds(&j), ["retry-lost"]);
}
