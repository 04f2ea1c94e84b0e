//! Rules on what producers were told: a vouched push is stored, `queued` is
//! said once and names the stored message, and answers of one partition come
//! in offset order.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::{describe_told, secs, Key, Report, Stored};
use crate::dbstate::DbState;
use crate::journal::{ItemKind, Journal, PushEvent, Told};

/// Every push event per key, in producer order, and what was sent.
pub(super) struct Pushes<'a> {
    pub(super) attempts: HashMap<Key, Vec<&'a PushEvent>>,
    items_sent: u64,
    /// First tries by kind: fresh, repeated transactionId, repeated inside a request.
    kinds: [u64; 3],
    told_counts: BTreeMap<&'static str, u64>,
}

/// Keys a broker vouched for, and keys that never got an answer.
pub(super) struct Answers {
    pub(super) vouched: HashSet<Key>,
    unanswered: u64,
}

impl<'a> Pushes<'a> {
    pub(super) fn collect(journal: &'a Journal) -> Self {
        let mut pushes = Self {
            attempts: HashMap::new(),
            items_sent: 0,
            kinds: [0; 3],
            told_counts: BTreeMap::new(),
        };
        for log in &journal.pushes {
            for e in log {
                pushes
                    .attempts
                    .entry((e.partition.clone(), e.txid.clone()))
                    .or_default()
                    .push(e);
                let label = match e.told {
                    Told::Queued { .. } => "queued",
                    Told::Duplicate { .. } => "duplicate",
                    Told::Buffered => "buffered",
                    Told::Failed(_) => "failed",
                    Told::NoAnswer(_) => "unanswered",
                };
                *pushes.told_counts.entry(label).or_default() += 1;
                if e.attempt == 0 {
                    pushes.items_sent += 1;
                    pushes.kinds[match e.kind {
                        ItemKind::Fresh => 0,
                        ItemKind::Repeat => 1,
                        ItemKind::InRequestRepeat => 2,
                    }] += 1;
                }
            }
        }
        pushes
    }

    /// The report's lines about pushes.
    pub(super) fn summary(
        &self,
        answers: &Answers,
        stored: &Stored<'_>,
        db: &DbState,
        producer_inversions: u64,
    ) -> [String; 3] {
        [
            format!(
                "pushes: {} items sent ({} fresh, {} repeated transactionIds, {} repeated inside a request)",
                self.items_sent, self.kinds[0], self.kinds[1], self.kinds[2]
            ),
            format!(
                "  answers: {}",
                self.told_counts
                    .iter()
                    .map(|(k, v)| format!("{k} {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            format!(
                "  pushed (answered queued/buffered/duplicate): {} messages; stored: {} in {} partitions; never answered: {}; producer-order inversions: {producer_inversions}",
                answers.vouched.len(),
                stored.len(),
                db.partitions.iter().filter(|p| p.next_offset > 1).count(),
                answers.unanswered
            ),
        ]
    }
}

/// Applies the per-key rules on answers.
pub(super) fn check_answers(
    r: &mut Report,
    attempts: &HashMap<Key, Vec<&PushEvent>>,
    stored: &Stored<'_>,
) -> Answers {
    let mut answers = Answers {
        vouched: HashSet::new(),
        unanswered: 0,
    };
    for (key, evs) in attempts {
        if vouched_push_is_stored(r, key, evs, stored) {
            answers.vouched.insert(key.clone());
        } else if !evs.iter().any(|e| matches!(e.told, Told::Failed(_))) {
            answers.unanswered += 1;
        }
        answers_name_the_stored_message(r, key, evs, stored);
    }
    answers
}

/// Rule: a push answered `queued`, `buffered` or `duplicate` is stored
/// (`lost`). Returns whether a broker vouched for the key.
fn vouched_push_is_stored(
    r: &mut Report,
    key: &Key,
    evs: &[&PushEvent],
    stored: &Stored<'_>,
) -> bool {
    if !evs.iter().any(|e| e.told.vouches()) {
        return false;
    }
    if !stored.contains_key(key) {
        r.violation(
            "lost",
            format!(
                "{}/{}: never stored; the producer was told: {}",
                key.0,
                key.1,
                describe_told(evs)
            ),
        );
    }
    true
}

/// Rule: a key is answered `queued` once, and `queued` and `duplicate` name
/// the message that is stored; the first push of a new key is never a
/// `duplicate` (`dedup`).
fn answers_name_the_stored_message(
    r: &mut Report,
    key: &Key,
    evs: &[&PushEvent],
    stored: &Stored<'_>,
) {
    let stored_id = stored.get(key).map(|m| m.message_id.as_str());
    let mut queued_before = false;
    for e in evs {
        match &e.told {
            Told::Queued { message_id } => {
                if queued_before {
                    r.violation(
                        "dedup",
                        format!(
                            "{}/{}: answered queued more than once: {}",
                            key.0,
                            key.1,
                            describe_told(evs)
                        ),
                    );
                }
                queued_before = true;
                if stored_id.is_some_and(|s| s != message_id) {
                    r.violation(
                        "dedup",
                        format!(
                            "{}/{}: answered queued as {message_id} but {} is stored",
                            key.0,
                            key.1,
                            stored_id.unwrap_or_default()
                        ),
                    );
                }
            }
            Told::Duplicate { message_id } => {
                if e.kind == ItemKind::Fresh && e.attempt == 0 {
                    r.violation(
                        "dedup",
                        format!(
                            "{}/{}: first push of a new transactionId answered duplicate (broker {} at {})",
                            key.0,
                            key.1,
                            e.broker,
                            secs(e.t_done)
                        ),
                    );
                }
                let nil = message_id.is_empty() || message_id.starts_with("00000000-");
                if !nil && stored_id.is_some_and(|s| s != message_id) {
                    r.violation(
                        "dedup",
                        format!(
                            "{}/{}: duplicate answer names {message_id} but {} is stored",
                            key.0,
                            key.1,
                            stored_id.unwrap_or_default()
                        ),
                    );
                }
            }
            _ => {}
        }
    }
}

/// Rule: pushes answered `queued` one after another, by one producer to one
/// partition, get increasing offsets (`order`). Returns the inversions.
pub(super) fn queued_pushes_get_increasing_offsets(
    r: &mut Report,
    journal: &Journal,
    stored: &Stored<'_>,
) -> u64 {
    let mut inversions = 0u64;
    for log in &journal.pushes {
        let mut last: HashMap<&str, (i64, &PushEvent)> = HashMap::new();
        for e in log {
            if !matches!(e.told, Told::Queued { .. }) {
                continue;
            }
            let Some(m) = stored.get(&(e.partition.clone(), e.txid.clone())) else {
                continue;
            };
            if let Some((prev_off, prev)) = last.get(e.partition.as_str()) {
                if m.offset <= *prev_off {
                    inversions += 1;
                    r.violation(
                        "order",
                        format!(
                            "{}: {} answered queued at {} got offset {}, before {} answered queued at {} (offset {})",
                            e.partition,
                            e.txid,
                            secs(e.t_done),
                            m.offset,
                            prev.txid,
                            secs(prev.t_done),
                            prev_off
                        ),
                    );
                }
            }
            last.insert(e.partition.as_str(), (m.offset, e));
        }
    }
    inversions
}
