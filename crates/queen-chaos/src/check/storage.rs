//! Rules on what the tables hold: each key once, nothing nobody pushed,
//! payloads as pushed, dense offsets, and a dedup index that agrees with the
//! segments.

use std::collections::HashMap;

use serde_json::Value;

use super::{Key, NameOf, Report, Stored};
use crate::dbstate::{DbState, KeyRow, StoredMessage};
use crate::journal::PushEvent;

/// Indexes the stored messages by key, applying the per-message rules.
pub(super) fn check_stored_messages<'a>(
    r: &mut Report,
    db: &'a DbState,
    name_of: &NameOf<'_>,
    attempts: &HashMap<Key, Vec<&PushEvent>>,
) -> Stored<'a> {
    let mut stored: Stored<'a> = HashMap::new();
    for m in db.messages.iter().filter(|m| !m.deleted) {
        let pname = name_of.get(m.partition_id.as_str()).copied().unwrap_or("?");
        let key = (pname.to_owned(), m.txid.clone());
        key_is_stored_once(r, &mut stored, &key, m);
        let pushed = attempts.get(&key);
        stored_message_was_pushed(r, &key, m, pushed);
        stored_payload_is_the_pushed_one(r, &key, m, pushed);
    }
    stored
}

/// Rule: a key is stored once (`doubled`). The later copy is the one indexed.
fn key_is_stored_once<'a>(
    r: &mut Report,
    stored: &mut Stored<'a>,
    key: &Key,
    m: &'a StoredMessage,
) {
    if let Some(first) = stored.insert(key.clone(), m) {
        r.violation(
            "doubled",
            format!(
                "{}/{}: stored twice, at offsets {} and {} (message ids {} and {})",
                key.0, key.1, first.offset, m.offset, first.message_id, m.message_id
            ),
        );
    }
}

/// Rule: nothing is stored that no producer pushed (`phantom`).
fn stored_message_was_pushed(
    r: &mut Report,
    key: &Key,
    m: &StoredMessage,
    pushed: Option<&Vec<&PushEvent>>,
) {
    if pushed.is_none() {
        r.violation(
            "phantom",
            format!(
                "{}/{}: stored at offset {} but never pushed",
                key.0, key.1, m.offset
            ),
        );
    }
}

/// Rule: payloads are stored as the first push of the key carried them (`payload`).
fn stored_payload_is_the_pushed_one(
    r: &mut Report,
    key: &Key,
    m: &StoredMessage,
    pushed: Option<&Vec<&PushEvent>>,
) {
    let Some(evs) = pushed else {
        return;
    };
    let pushed = &evs[0].payload;
    let got: Value = serde_json::from_str(&m.payload).unwrap_or(Value::Null);
    if &got != pushed {
        r.violation(
            "payload",
            format!(
                "{}/{}: stored payload {got} differs from pushed {pushed}",
                key.0, key.1
            ),
        );
    }
}

/// Rule: a partition stores exactly the offsets `low_offset..next_offset` (`storage`).
pub(super) fn offsets_are_dense(r: &mut Report, db: &DbState) {
    let mut offsets: HashMap<&str, Vec<i64>> = HashMap::new();
    for m in db.messages.iter().filter(|m| !m.deleted) {
        offsets
            .entry(m.partition_id.as_str())
            .or_default()
            .push(m.offset);
    }
    for p in &db.partitions {
        let mut offs = offsets.remove(p.id.as_str()).unwrap_or_default();
        offs.sort_unstable();
        let want: Vec<i64> = (p.low_offset..p.next_offset).collect();
        if offs != want {
            r.violation(
                "storage",
                format!(
                    "partition {}: stored offsets are not exactly {}..{} ({} stored)",
                    p.name,
                    p.low_offset,
                    p.next_offset - 1,
                    offs.len()
                ),
            );
        }
    }
}

/// Rule: every stored message has its dedup index entry, naming the same
/// offset and message id, and there are no others (`storage`).
pub(super) fn dedup_index_matches_segments(r: &mut Report, db: &DbState, stored: &Stored<'_>) {
    let key_rows: HashMap<(&str, &str), &KeyRow> = db
        .keys
        .iter()
        .map(|k| ((k.partition_id.as_str(), k.txid.as_str()), k))
        .collect();
    for ((pname, txid), m) in stored {
        match key_rows.get(&(m.partition_id.as_str(), txid.as_str())) {
            Some(k) if k.offset == m.offset && k.message_id == m.message_id => {}
            Some(k) => r.violation(
                "storage",
                format!(
                    "{pname}/{txid}: dedup index says offset {} id {}, segment says offset {} id {}",
                    k.offset, k.message_id, m.offset, m.message_id
                ),
            ),
            None => r.violation(
                "storage",
                format!("{pname}/{txid}: stored at offset {} without a dedup index entry", m.offset),
            ),
        }
    }
    if db.keys.len() != stored.len() {
        r.violation(
            "storage",
            format!(
                "{} dedup index entries for {} stored messages",
                db.keys.len(),
                stored.len()
            ),
        );
    }
}
