//! The stream rules on small hand-made runs: a clean one (two cycles over
//! one partition), then one broken history per rule.

use std::collections::BTreeMap;

use serde_json::json;

use super::streams::{check_streams, StreamFinal};
use super::Report;
use crate::dbstate::{CursorRow, DbState, PartitionRow, StoredMessage};
use crate::workload::stream::{group, stream_key, CycleEvent, CycleOutcome, StateRow};

const P: &str = "p00";
const PID: &str = "00000000-0000-0000-0000-0000000000a0";
const SINK_PID: &str = "00000000-0000-0000-0000-0000000000b0";

/// Six source messages; the first and the last share a key, so the two
/// halves' cycles both touch it.
fn txids() -> Vec<String> {
    let id = |i: usize| format!("{P}-w0-{i:06}");
    let mut ids: Vec<String> = (0..5).map(id).collect();
    let first = stream_key(P, &ids[0]);
    let last = (5..)
        .map(id)
        .find(|t| stream_key(P, t) == first)
        .expect("some id shares the key");
    ids.push(last);
    ids
}

struct Run {
    source: DbState,
    cycles: Vec<CycleEvent>,
    fin: StreamFinal,
    /// Running count per key, as the sink pushes were built.
    totals: BTreeMap<String, i64>,
}

impl Run {
    /// The source partition holds every txid; nothing counted yet.
    fn new() -> Self {
        let ids = txids();
        let source = DbState {
            partitions: vec![PartitionRow {
                id: PID.into(),
                name: P.into(),
                next_offset: ids.len() as i64 + 1,
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
                    payload: json!({ "txid": t }).to_string(),
                    deleted: false,
                })
                .collect(),
            cursors: vec![CursorRow {
                partition_id: PID.into(),
                group: group(),
                committed: ids.len() as i64,
                live_lease: false,
                lease_set: false,
            }],
            ..DbState::default()
        };
        let fin = StreamFinal {
            state: Vec::new(),
            sink: DbState {
                partitions: vec![PartitionRow {
                    id: SINK_PID.into(),
                    name: P.into(),
                    next_offset: 1,
                    low_offset: 1,
                }],
                ..DbState::default()
            },
        };
        Self {
            source,
            cycles: Vec::new(),
            fin,
            totals: BTreeMap::new(),
        }
    }

    /// A cycle over `ts` as a worker sent it, with `outcome`; when `applied`,
    /// its sink pushes are stored and the running totals move.
    fn cycle(&mut self, id: &str, ts: &[String], outcome: CycleOutcome, applied: bool) {
        let mut by_key: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for t in ts {
            by_key.entry(stream_key(P, t)).or_default().push(t.clone());
        }
        let mut ids = Vec::new();
        for (k, src) in by_key {
            let total = self.totals.get(&k).copied().unwrap_or(0) + src.len() as i64;
            if applied {
                self.totals.insert(k.clone(), total);
                let mid = self.sink_push(json!({"key": k, "inc": src.len(), "total": total,
                                                "src": src, "cycle": id}));
                ids.push(mid);
            }
        }
        let outcome = match outcome {
            CycleOutcome::Committed { .. } => CycleOutcome::Committed { message_ids: ids },
            o => o,
        };
        self.cycles.push(CycleEvent {
            worker: 0,
            cycle: id.into(),
            partition_id: PID.into(),
            partition: P.into(),
            lease_id: "l".into(),
            txids: ts.to_vec(),
            brokers: vec![0],
            t_start: 0,
            t_end: 1,
            outcome,
        });
    }

    fn sink_push(&mut self, payload: serde_json::Value) -> String {
        let part = &mut self.fin.sink.partitions[0];
        let offset = part.next_offset;
        part.next_offset += 1;
        let mid = format!("s-{offset}");
        self.fin.sink.messages.push(StoredMessage {
            partition_id: SINK_PID.into(),
            offset,
            message_id: mid.clone(),
            txid: mid.clone(),
            payload: payload.to_string(),
            deleted: false,
        });
        mid
    }

    /// The state rows as the running totals say.
    fn settle_state(&mut self) {
        self.fin.state = self
            .totals
            .iter()
            .map(|(k, n)| StateRow {
                partition: P.into(),
                key: k.clone(),
                value: json!({ "count": n }),
            })
            .collect();
    }

    fn check(&self) -> Report {
        let mut r = Report::default();
        check_streams(&mut r, &self.cycles, &self.source, &self.fin);
        r
    }
}

fn committed() -> CycleOutcome {
    CycleOutcome::Committed {
        message_ids: Vec::new(),
    }
}

fn kinds(r: &Report) -> Vec<&'static str> {
    r.violations.keys().copied().collect()
}

/// Two cycles over the first and second half, both committed.
fn clean() -> Run {
    let ids = txids();
    let mut run = Run::new();
    run.cycle("c1", &ids[..3], committed(), true);
    run.cycle("c2", &ids[3..], committed(), true);
    run.settle_state();
    run
}

#[test]
fn a_clean_stream_run_has_no_violation() {
    let r = clean().check();
    assert_eq!(r.violation_count(), 0, "{}", r.render());
}

#[test]
fn a_refused_cycle_that_wrote_nothing_is_fine() {
    let ids = txids();
    let mut run = Run::new();
    run.cycle(
        "c0",
        &ids[..3],
        CycleOutcome::Refused {
            status: 409,
            code: "stale_lease".into(),
        },
        false,
    );
    run.cycle("c1", &ids[..3], committed(), true);
    run.cycle("c2", &ids[3..], committed(), true);
    run.settle_state();
    let r = run.check();
    assert_eq!(r.violation_count(), 0, "{}", r.render());
}

#[test]
fn a_cycle_applied_twice_is_a_double_count() {
    let ids = txids();
    let mut run = Run::new();
    run.cycle("c1", &ids[..3], committed(), true);
    run.cycle("c2", &ids[3..], committed(), true);
    // the same cycle's work applied again (a replay the broker let through)
    run.cycle(
        "c2b",
        &ids[3..],
        CycleOutcome::Unknown("timeout".into()),
        true,
    );
    run.settle_state();
    let r = run.check();
    let k = kinds(&r);
    assert!(k.contains(&"stream-doubled"), "{k:?}");
    assert!(k.contains(&"stream-state"), "{k:?}");
    assert!(k.contains(&"stream-sink"), "{k:?}");
}

#[test]
fn a_cycle_answered_committed_but_not_applied_is_lost() {
    let ids = txids();
    let mut run = Run::new();
    run.cycle("c1", &ids[..3], committed(), true);
    run.cycle("c2", &ids[3..], committed(), false);
    run.settle_state();
    let r = run.check();
    let k = kinds(&r);
    for want in ["stream-lost", "stream-state", "stream-sink"] {
        assert!(k.contains(&want), "{want} missing from {k:?}");
    }
    // c2 had nothing to answer with here, so the atomic rule sees a match;
    // answered ids that are not stored are caught by it:
    let mut run = clean();
    if let CycleOutcome::Committed { message_ids } = &mut run.cycles[1].outcome {
        message_ids.push("s-99".into());
    }
    assert_eq!(kinds(&run.check()), ["stream-atomic"]);
}

#[test]
fn a_refused_cycle_whose_pushes_are_stored_breaks_atomicity() {
    let ids = txids();
    let mut run = Run::new();
    run.cycle("c1", &ids[..3], committed(), true);
    run.cycle(
        "c2",
        &ids[3..],
        CycleOutcome::Refused {
            status: 409,
            code: "stale_lease".into(),
        },
        true,
    );
    run.settle_state();
    assert_eq!(kinds(&run.check()), ["stream-atomic"]);
}

#[test]
fn a_state_row_that_disagrees_with_the_source_is_flagged() {
    let mut run = clean();
    run.fin.state[0].value = json!({"count": 99});
    assert_eq!(kinds(&run.check()), ["stream-state"]);
    let mut run = clean();
    run.fin.state.push(StateRow {
        partition: P.into(),
        key: "zz".into(),
        value: json!({"count": 1}),
    });
    assert_eq!(kinds(&run.check()), ["stream-state"]);
}

#[test]
fn a_cycle_that_read_stale_state_breaks_the_running_totals() {
    let ids = txids();
    let mut run = Run::new();
    run.cycle("c1", &ids[..3], committed(), true);
    // c2 computed its totals from an empty state
    run.totals.clear();
    run.cycle("c2", &ids[3..], committed(), true);
    // the state and the increments are what the source says, only the chain breaks
    run.totals.clear();
    for t in &ids {
        *run.totals.entry(stream_key(P, t)).or_default() += 1;
    }
    run.settle_state();
    let r = run.check();
    // the key both halves touch breaks the chain
    assert_eq!(kinds(&r), ["stream-sink"], "{}", r.render());
}

#[test]
fn sink_items_of_no_cycle_and_lagging_groups_are_flagged() {
    let mut run = clean();
    let t = txids()[0].clone();
    run.sink_push(json!({"key": "zz", "inc": 0, "total": 0, "src": [], "cycle": "ghost"}));
    run.source.cursors[0].committed -= 1;
    let k = kinds(&run.check());
    assert!(k.contains(&"stream-phantom"), "{k:?}");
    assert!(k.contains(&"drained"), "{k:?}");
    // a message listed under the wrong key
    let mut run = clean();
    let wrong = if stream_key(P, &t) == "k0" {
        "k1"
    } else {
        "k0"
    };
    run.fin.sink.messages[0].payload = json!({"key": wrong, "inc": 1, "total": 1,
        "src": [t], "cycle": "c1"})
    .to_string();
    assert!(kinds(&run.check()).contains(&"stream-doubled"));
}
