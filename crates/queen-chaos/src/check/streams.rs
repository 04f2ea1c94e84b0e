//! Rules on the stream workload (a keyed count over the `chaos` queue, see
//! `workload/stream.rs`), from the stored source messages, the query's state
//! rows, the sink queue's messages and what every cycle was answered.
//!
//! The sink total is checked as the **sum of the emitted increments** per
//! (partition, key); the running totals the sink items carry are checked as
//! a chain (each is the previous plus its increment), so the last one equals
//! the count too.
//!
//! | rule | violation kind | function |
//! |---|---|---|
//! | the state count of (partition, key) is the number of stored source messages with that key | `stream-state` | [`state_count_is_the_source_count`] |
//! | the increments in the sink add up to that number | `stream-sink` | [`sink_increments_sum_to_the_source_count`] |
//! | each source message is counted by exactly one applied cycle, under its key | `stream-lost`, `stream-doubled` | [`every_source_message_counted_once`] |
//! | per (partition, key) the sink's running totals follow each other in offset order | `stream-sink` | [`running_totals_follow_each_other`] |
//! | a cycle answered `success` has its sink pushes stored | `stream-atomic` | [`committed_cycles_are_in_the_sink`] |
//! | a refused cycle wrote nothing | `stream-atomic` | [`refused_cycles_wrote_nothing`] |
//! | every sink item belongs to a cycle a worker sent | `stream-phantom` | [`sink_items_name_a_cycle`] |
//! | the query's group reached the end of every source partition | `drained` | [`stream_group_drained`] |

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::Value;

use super::Report;
use crate::dbstate::DbState;
use crate::workload::stream::{group, stream_key, CycleEvent, CycleOutcome, StateRow};

/// `(partition name, key)`.
type PKey = (String, String);

/// What the checker reads besides the cycles.
#[derive(Debug, Default)]
pub struct StreamFinal {
    pub state: Vec<StateRow>,
    /// The sink queue as stored.
    pub sink: DbState,
}

/// One sink message, its payload read.
#[derive(Debug, Clone)]
struct SinkItem {
    partition: String,
    offset: i64,
    message_id: String,
    key: String,
    inc: i64,
    total: i64,
    src: Vec<String>,
    cycle: String,
}

/// Runs every stream rule; `source` is the snapshot of the source queue.
pub fn check_streams(r: &mut Report, cycles: &[CycleEvent], source: &DbState, fin: &StreamFinal) {
    let name_of: HashMap<&str, &str> = source
        .partitions
        .iter()
        .map(|p| (p.id.as_str(), p.name.as_str()))
        .collect();
    let messages: Vec<(String, String)> = source
        .messages
        .iter()
        .filter(|m| !m.deleted)
        .map(|m| {
            let p = name_of.get(m.partition_id.as_str()).copied().unwrap_or("?");
            (p.to_owned(), m.txid.clone())
        })
        .collect();
    let mut expected: BTreeMap<PKey, i64> = BTreeMap::new();
    for (p, t) in &messages {
        *expected.entry((p.clone(), stream_key(p, t))).or_default() += 1;
    }
    let items = sink_items(r, &fin.sink);

    state_count_is_the_source_count(r, &expected, &fin.state);
    sink_increments_sum_to_the_source_count(r, &expected, &items);
    every_source_message_counted_once(r, &messages, &items);
    running_totals_follow_each_other(r, &items);
    committed_cycles_are_in_the_sink(r, cycles, &items);
    refused_cycles_wrote_nothing(r, cycles, &items);
    sink_items_name_a_cycle(r, cycles, &items);
    stream_group_drained(r, source);
    r.lines.extend(summary(cycles, &expected, fin, &items));
}

fn sink_items(r: &mut Report, sink: &DbState) -> Vec<SinkItem> {
    let name_of: HashMap<&str, &str> = sink
        .partitions
        .iter()
        .map(|p| (p.id.as_str(), p.name.as_str()))
        .collect();
    let mut out = Vec::new();
    for m in sink.messages.iter().filter(|m| !m.deleted) {
        let partition = name_of
            .get(m.partition_id.as_str())
            .copied()
            .unwrap_or("?")
            .to_owned();
        let v: Value = serde_json::from_str(&m.payload).unwrap_or(Value::Null);
        let src: Option<Vec<String>> = v["src"].as_array().map(|a| {
            a.iter()
                .filter_map(|t| t.as_str().map(str::to_owned))
                .collect()
        });
        match (
            v["key"].as_str(),
            v["inc"].as_i64(),
            v["total"].as_i64(),
            src,
            v["cycle"].as_str(),
        ) {
            (Some(key), Some(inc), Some(total), Some(src), Some(cycle)) => out.push(SinkItem {
                partition,
                offset: m.offset,
                message_id: m.message_id.clone(),
                key: key.to_owned(),
                inc,
                total,
                src,
                cycle: cycle.to_owned(),
            }),
            _ => r.violation(
                "stream-sink",
                format!(
                    "{partition}@{}: sink payload is not a count emit: {}",
                    m.offset, m.payload
                ),
            ),
        }
    }
    out.sort_by(|a, b| (&a.partition, a.offset).cmp(&(&b.partition, b.offset)));
    out
}

/// Rule: the state count of every (partition, key) is the number of stored
/// source messages of that partition with that key, and no other key holds a
/// count (`stream-state`).
fn state_count_is_the_source_count(
    r: &mut Report,
    expected: &BTreeMap<PKey, i64>,
    state: &[StateRow],
) {
    let mut held: HashMap<PKey, Option<i64>> = HashMap::new();
    for row in state {
        held.insert(
            (row.partition.clone(), row.key.clone()),
            row.value["count"].as_i64(),
        );
    }
    for ((p, k), n) in expected {
        match held.get(&(p.clone(), k.clone())) {
            Some(Some(c)) if c == n => {}
            Some(Some(c)) => r.violation(
                "stream-state",
                format!(
                    "{p} / {k}: state counts {c}, the source holds {n} messages with that key ({})",
                    if c > n { "doubled" } else { "lost" }
                ),
            ),
            Some(None) => r.violation(
                "stream-state",
                format!("{p} / {k}: state row holds no numeric count"),
            ),
            None => r.violation(
                "stream-state",
                format!("{p} / {k}: no state row, the source holds {n} messages with that key"),
            ),
        }
    }
    for (p, k) in held.keys() {
        if !expected.contains_key(&(p.clone(), k.clone())) {
            r.violation(
                "stream-state",
                format!("{p} / {k}: a state row for a key no source message has"),
            );
        }
    }
}

/// Rule: per (partition, key) the sink's increments add up to the number of
/// stored source messages with that key (`stream-sink`).
fn sink_increments_sum_to_the_source_count(
    r: &mut Report,
    expected: &BTreeMap<PKey, i64>,
    items: &[SinkItem],
) {
    let mut sums: BTreeMap<PKey, i64> = BTreeMap::new();
    for i in items {
        *sums
            .entry((i.partition.clone(), i.key.clone()))
            .or_default() += i.inc;
    }
    for (pk, n) in expected {
        let s = sums.get(pk).copied().unwrap_or(0);
        if s != *n {
            r.violation(
                "stream-sink",
                format!(
                    "{} / {}: sink increments sum to {s}, the source holds {n}",
                    pk.0, pk.1
                ),
            );
        }
    }
    for (pk, s) in &sums {
        if !expected.contains_key(pk) {
            r.violation(
                "stream-sink",
                format!(
                    "{} / {}: sink increments sum to {s} for a key no source message has",
                    pk.0, pk.1
                ),
            );
        }
    }
}

/// Rule: every stored source message is in the `src` list of exactly one
/// sink item, the one of its key; a message counted twice means a cycle was
/// applied twice (or overlapped another), one counted never means a cycle
/// was lost (`stream-doubled`, `stream-lost`).
fn every_source_message_counted_once(
    r: &mut Report,
    messages: &[(String, String)],
    items: &[SinkItem],
) {
    let mut counted: HashMap<(&str, &str), Vec<&SinkItem>> = HashMap::new();
    for i in items {
        for t in &i.src {
            counted
                .entry((i.partition.as_str(), t.as_str()))
                .or_default()
                .push(i);
        }
    }
    let stored: HashSet<(&str, &str)> = messages
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    for (p, t) in messages {
        match counted.get(&(p.as_str(), t.as_str())).map(Vec::as_slice) {
            None | Some([]) => r.violation(
                "stream-lost",
                format!("{p}/{t}: no applied cycle counted this source message"),
            ),
            Some([one]) => {
                let want = stream_key(p, t);
                if one.key != want {
                    r.violation(
                        "stream-doubled",
                        format!("{p}/{t}: counted under {} instead of {want}", one.key),
                    );
                }
            }
            Some(many) => r.violation(
                "stream-doubled",
                format!(
                    "{p}/{t}: counted {} times, by cycles {}",
                    many.len(),
                    many.iter()
                        .map(|i| format!("{}@{}", i.cycle, i.offset))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ),
        }
    }
    for ((p, t), by) in &counted {
        if !stored.contains(&(*p, *t)) {
            r.violation(
                "stream-doubled",
                format!(
                    "{p}/{t}: counted by cycle {} but no such source message is stored",
                    by[0].cycle
                ),
            );
        }
    }
}

/// Rule: per (partition, key), in sink offset order, each item's `total` is
/// the previous item's plus its `inc`, and `inc` is the number of messages
/// it lists (`stream-sink`). Cycles of one partition commit one after the
/// other, so a cycle that read stale state or was applied twice breaks it.
fn running_totals_follow_each_other(r: &mut Report, items: &[SinkItem]) {
    let mut prev: HashMap<(&str, &str), i64> = HashMap::new();
    for i in items {
        if i.inc != i.src.len() as i64 {
            r.violation(
                "stream-sink",
                format!(
                    "{} / {} @{}: inc {} but {} messages listed",
                    i.partition,
                    i.key,
                    i.offset,
                    i.inc,
                    i.src.len()
                ),
            );
        }
        let before = prev
            .insert((i.partition.as_str(), i.key.as_str()), i.total)
            .unwrap_or(0);
        if i.total != before + i.inc {
            r.violation(
                "stream-sink",
                format!(
                    "{} / {} @{}: running total {} after {before}, with inc {} (cycle {})",
                    i.partition, i.key, i.offset, i.total, i.inc, i.cycle
                ),
            );
        }
    }
}

/// Rule: a cycle answered `success: true` has every sink push it was
/// answered with stored, carrying its cycle id, and nothing else
/// (`stream-atomic`).
fn committed_cycles_are_in_the_sink(r: &mut Report, cycles: &[CycleEvent], items: &[SinkItem]) {
    let mut by_cycle: HashMap<&str, HashSet<&str>> = HashMap::new();
    for i in items {
        by_cycle
            .entry(i.cycle.as_str())
            .or_default()
            .insert(i.message_id.as_str());
    }
    for c in cycles {
        let CycleOutcome::Committed { message_ids } = &c.outcome else {
            continue;
        };
        let stored = by_cycle.get(c.cycle.as_str()).cloned().unwrap_or_default();
        let answered: HashSet<&str> = message_ids.iter().map(String::as_str).collect();
        if stored != answered {
            r.violation(
                "stream-atomic",
                format!(
                    "cycle {} ({}, worker {}, answered at {:.3}s): answered with {} sink messages, {} stored ({} in common)",
                    c.cycle,
                    c.partition,
                    c.worker,
                    c.t_end as f64 / 1e6,
                    answered.len(),
                    stored.len(),
                    stored.intersection(&answered).count()
                ),
            );
        }
    }
}

/// Rule: a cycle refused with no attempt left unanswered wrote no sink
/// push (and so, the cycle being one transaction, nothing) (`stream-atomic`).
fn refused_cycles_wrote_nothing(r: &mut Report, cycles: &[CycleEvent], items: &[SinkItem]) {
    let written: HashSet<&str> = items.iter().map(|i| i.cycle.as_str()).collect();
    for c in cycles {
        if let CycleOutcome::Refused { status, code } = &c.outcome {
            if written.contains(c.cycle.as_str()) {
                r.violation(
                    "stream-atomic",
                    format!(
                        "cycle {} ({}, worker {}): refused ({status} {code}) but its sink pushes are stored",
                        c.cycle, c.partition, c.worker
                    ),
                );
            }
        }
    }
}

/// Rule: every sink item names a cycle some worker sent (`stream-phantom`).
fn sink_items_name_a_cycle(r: &mut Report, cycles: &[CycleEvent], items: &[SinkItem]) {
    let sent: HashSet<&str> = cycles.iter().map(|c| c.cycle.as_str()).collect();
    for i in items {
        if !sent.contains(i.cycle.as_str()) {
            r.violation(
                "stream-phantom",
                format!(
                    "{}@{}: sink item of cycle {}, which no worker sent",
                    i.partition, i.offset, i.cycle
                ),
            );
        }
    }
}

/// Rule: the query's consumer group is at the end of every written source
/// partition after the drain (`drained`).
fn stream_group_drained(r: &mut Report, source: &DbState) {
    let g = group();
    for p in source.partitions.iter().filter(|p| p.next_offset > 1) {
        let committed = source
            .cursors
            .iter()
            .find(|c| c.partition_id == p.id && c.group == g)
            .map(|c| c.committed);
        if committed != Some(p.next_offset - 1) {
            r.violation(
                "drained",
                format!(
                    "{} / {g}: cursor at {} but the last offset is {}",
                    p.name,
                    committed.map_or("none".to_owned(), |c| c.to_string()),
                    p.next_offset - 1
                ),
            );
        }
    }
}

fn summary(
    cycles: &[CycleEvent],
    expected: &BTreeMap<PKey, i64>,
    fin: &StreamFinal,
    items: &[SinkItem],
) -> Vec<String> {
    let committed = cycles
        .iter()
        .filter(|c| matches!(c.outcome, CycleOutcome::Committed { .. }))
        .count();
    let mut refused: BTreeMap<String, u64> = BTreeMap::new();
    for c in cycles {
        if let CycleOutcome::Refused { status, code } = &c.outcome {
            *refused.entry(format!("{status} {code}")).or_default() += 1;
        }
    }
    let unknown = cycles
        .iter()
        .filter(|c| matches!(c.outcome, CycleOutcome::Unknown(_)))
        .count();
    let cross = cycles.iter().filter(|c| c.brokers.len() > 1).count();
    let mut per_key: BTreeMap<&str, (i64, i64, i64)> = BTreeMap::new();
    for ((_, k), n) in expected {
        per_key.entry(k).or_default().0 += n;
    }
    for s in &fin.state {
        per_key.entry(&s.key).or_default().1 += s.value["count"].as_i64().unwrap_or(0);
    }
    for i in items {
        per_key.entry(&i.key).or_default().2 += i.inc;
    }
    let keys: Vec<String> = per_key
        .iter()
        .map(|(k, (src, st, sk))| format!("{k} {src}/{st}/{sk}"))
        .collect();
    vec![
        format!(
            "  streams: {} cycles sent: {committed} committed, {} refused ({}), {unknown} without a definite answer, {cross} retried on another broker; {} sink items",
            cycles.len(),
            refused.values().sum::<u64>(),
            refused
                .iter()
                .map(|(k, n)| format!("{k}: {n}"))
                .collect::<Vec<_>>()
                .join(", "),
            items.len()
        ),
        format!(
            "  streams: per key source/state/sink: {}",
            keys.join(", ")
        ),
    ]
}
