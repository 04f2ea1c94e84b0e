//! Rules on one consumer group's dead letters: each entry is a stored
//! message the group failed, written after exactly `retryLimit` counted
//! failures, at most once; poison messages are all there; the API agrees.

use std::collections::{HashMap, HashSet};

use super::{GroupCtx, GroupRow, Key, Report};
use crate::dbstate::DeadLetterRow;
use crate::workload::{is_flaky, is_poison};

/// Goes through the group's DLQ rows, applying the per-entry rules, then the
/// rules on the group's DLQ as a whole.
pub(super) fn check_dead_letters(
    r: &mut Report,
    row: &mut GroupRow,
    ctx: &GroupCtx<'_>,
    failed_sent: &HashSet<Key>,
) {
    let mut dlq_keys: HashMap<Key, u64> = HashMap::new();
    for d in ctx.db.dead_letters.iter().filter(|d| d.group == ctx.gname) {
        row.dlq += 1;
        let pname = ctx
            .name_of
            .get(d.partition_id.as_str())
            .copied()
            .unwrap_or("?");
        let key = (pname.to_owned(), d.txid.clone());
        entry_is_the_stored_message(r, ctx, d, &key);
        entry_follows_the_retry_limit(r, ctx, d, &key);
        entry_was_failed_by_the_group(r, ctx, d, &key, failed_sent);
        *dlq_keys.entry(key).or_default() += 1;
    }
    entries_are_unique(r, ctx, &dlq_keys);
    poison_is_dead_lettered(r, row, ctx, &dlq_keys);
    let flaky_in_dlq = dlq_keys
        .keys()
        .filter(|(p, t)| is_flaky(ctx.gname, p, t))
        .count();
    if flaky_in_dlq > 0 {
        r.lines.push(format!(
            "  {}: {flaky_in_dlq} messages that failed only once reached the DLQ (the retry counter is per batch, so failures of neighbours add up)",
            ctx.gname
        ));
    }
}

/// Rule: a DLQ entry is the stored message at its offset (`dlq`).
fn entry_is_the_stored_message(r: &mut Report, ctx: &GroupCtx<'_>, d: &DeadLetterRow, key: &Key) {
    match ctx.stored.get(key) {
        Some(m) if m.offset == d.offset && m.message_id == d.message_id => {}
        _ => r.violation(
            "dlq",
            format!(
                "{}: DLQ entry {}/{} at offset {} does not match the stored message",
                ctx.gname, key.0, key.1, d.offset
            ),
        ),
    }
}

/// Rule: a DLQ entry was written after exactly `retryLimit` counted failures (`dlq`).
fn entry_follows_the_retry_limit(r: &mut Report, ctx: &GroupCtx<'_>, d: &DeadLetterRow, key: &Key) {
    if d.retry_count != ctx.retry_limit {
        r.violation(
            "dlq",
            format!(
                "{}: {}/{} dead-lettered with retry count {}, not after {} counted failures",
                ctx.gname, key.0, key.1, d.retry_count, ctx.retry_limit
            ),
        );
    }
}

/// Rule: nothing is in a group's DLQ unless the group failed it (`dlq`).
fn entry_was_failed_by_the_group(
    r: &mut Report,
    ctx: &GroupCtx<'_>,
    d: &DeadLetterRow,
    key: &Key,
    failed_sent: &HashSet<Key>,
) {
    if !failed_sent.contains(key) {
        r.violation(
            "dlq",
            format!(
                "{}: {}/{} is in the DLQ (retry count {}) but this group never failed it",
                ctx.gname, key.0, key.1, d.retry_count
            ),
        );
    }
}

/// Rule: a message is in the group's DLQ at most once (`dlq`).
fn entries_are_unique(r: &mut Report, ctx: &GroupCtx<'_>, dlq_keys: &HashMap<Key, u64>) {
    for (k, n) in dlq_keys {
        if *n > 1 {
            r.violation(
                "dlq",
                format!("{}: {}/{} is in the DLQ {n} times", ctx.gname, k.0, k.1),
            );
        }
    }
}

/// Rule: every stored poison message (one that always fails for this group)
/// is in the group's DLQ (`dlq`).
fn poison_is_dead_lettered(
    r: &mut Report,
    row: &mut GroupRow,
    ctx: &GroupCtx<'_>,
    dlq_keys: &HashMap<Key, u64>,
) {
    let mut poison: Vec<&Key> = ctx
        .stored
        .keys()
        .filter(|(p, t)| is_poison(ctx.gname, p, t))
        .collect();
    poison.sort();
    row.dlq_expected = poison.len() as u64;
    for k in poison {
        if !dlq_keys.contains_key(k) {
            r.violation(
                "dlq",
                format!(
                    "{}: {}/{} always fails but is not in the DLQ",
                    ctx.gname, k.0, k.1
                ),
            );
        }
    }
}

/// Rule: `GET /api/v1/dlq` reports as many entries as the table holds for
/// the group, when it could be read (`dlq`).
pub(super) fn api_total_matches_the_table(
    r: &mut Report,
    row: &GroupRow,
    api_total: Option<&Option<u64>>,
) {
    if let Some(Some(api)) = api_total {
        if *api != row.dlq {
            r.violation(
                "dlq",
                format!(
                    "{}: GET /api/v1/dlq reports {api} entries, the table holds {}",
                    row.name, row.dlq
                ),
            );
        }
    }
}
