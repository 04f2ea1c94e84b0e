//! Rules on what one consumer group was delivered: only stored messages, as
//! stored, in consecutive runs, every one of them at least once, and never
//! past an offset the group has not been given yet.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::Value;

use super::{secs, GroupCtx, GroupRow, Key, Report};
use crate::dbstate::StoredMessage;
use crate::journal::{Delivery, PopEvent};

/// What the group's pops delivered.
pub(super) struct Seen {
    /// Keys delivered at least once.
    pub(super) delivered: HashSet<Key>,
    /// Earliest start of a pop that delivered `(partition, offset)`.
    first_seen: HashMap<(String, i64), u64>,
    /// Per partition: `(t_start, t_end, first offset)` of every pop that delivered some of it.
    pub(super) pops_by_part: HashMap<String, Vec<(u64, u64, i64)>>,
}

/// Goes through the group's pops, applying the per-delivery and per-pop rules.
pub(super) fn check_deliveries(r: &mut Report, row: &mut GroupRow, ctx: &GroupCtx<'_>) -> Seen {
    let mut seen = Seen {
        delivered: HashSet::new(),
        first_seen: HashMap::new(),
        pops_by_part: HashMap::new(),
    };
    for pop in ctx.journal.pops.iter().filter(|p| p.group == ctx.gi) {
        let mut by_part: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
        for d in &pop.messages {
            row.deliveries += 1;
            let pname = ctx
                .name_of
                .get(d.partition_id.as_str())
                .copied()
                .unwrap_or("?");
            let key = (pname.to_owned(), d.txid.clone());
            let Some(m) = delivery_is_stored(r, row, ctx, pop, &key) else {
                continue;
            };
            delivery_names_its_partition(r, ctx, d, pname);
            delivery_has_the_stored_id(r, ctx, d, &key, m);
            delivery_payload_is_the_stored_one(r, ctx, d, &key, m);
            by_part.entry(pname).or_default().push(m.offset);
            let e = seen
                .first_seen
                .entry((pname.to_owned(), m.offset))
                .or_insert(pop.t_start);
            *e = (*e).min(pop.t_start);
            seen.delivered.insert(key);
        }
        for (pname, offs) in by_part {
            pop_offsets_are_consecutive(r, row, ctx, pop, pname, &offs);
            seen.pops_by_part
                .entry(pname.to_owned())
                .or_default()
                .push((pop.t_start, pop.t_end, offs[0]));
        }
    }
    row.distinct = seen.delivered.len() as u64;
    row.redelivered = (row.deliveries - row.phantom).saturating_sub(row.distinct);
    seen
}

/// Rule: nothing is delivered that is not stored (`phantom`). Returns the
/// stored message.
fn delivery_is_stored<'a>(
    r: &mut Report,
    row: &mut GroupRow,
    ctx: &GroupCtx<'a>,
    pop: &PopEvent,
    key: &Key,
) -> Option<&'a StoredMessage> {
    let found = ctx.stored.get(key).copied();
    if found.is_none() {
        row.phantom += 1;
        r.violation(
            "phantom",
            format!(
                "{}: delivered {}/{} at {}, which is not stored",
                ctx.gname,
                key.0,
                key.1,
                secs(pop.t_end)
            ),
        );
    }
    found
}

/// Rule: a delivery names the partition its partition id belongs to (`storage`).
fn delivery_names_its_partition(r: &mut Report, ctx: &GroupCtx<'_>, d: &Delivery, pname: &str) {
    if pname != d.partition {
        r.violation(
            "storage",
            format!(
                "{}: message {} says partition {} but its id is {pname}'s",
                ctx.gname, d.txid, d.partition
            ),
        );
    }
}

/// Rule: a delivery carries the message id of the stored message (`doubled`).
fn delivery_has_the_stored_id(
    r: &mut Report,
    ctx: &GroupCtx<'_>,
    d: &Delivery,
    key: &Key,
    m: &StoredMessage,
) {
    if m.message_id != d.message_id {
        r.violation(
            "doubled",
            format!(
                "{}: {}/{} delivered as message {} but {} is stored",
                ctx.gname, key.0, key.1, d.message_id, m.message_id
            ),
        );
    }
}

/// Rule: payloads arrive as stored (`payload`).
fn delivery_payload_is_the_stored_one(
    r: &mut Report,
    ctx: &GroupCtx<'_>,
    d: &Delivery,
    key: &Key,
    m: &StoredMessage,
) {
    let want: Value = serde_json::from_str(&m.payload).unwrap_or(Value::Null);
    if d.data != want {
        r.violation(
            "payload",
            format!(
                "{}: {}/{} delivered data {} but {want} is stored",
                ctx.gname, key.0, key.1, d.data
            ),
        );
    }
}

/// Rule: within a pop, a partition's messages are consecutive offsets (`order`).
fn pop_offsets_are_consecutive(
    r: &mut Report,
    row: &mut GroupRow,
    ctx: &GroupCtx<'_>,
    pop: &PopEvent,
    pname: &str,
    offs: &[i64],
) {
    if offs.windows(2).any(|w| w[1] != w[0] + 1) {
        row.reorders += 1;
        r.violation(
            "order",
            format!(
                "{}: one pop at {} delivered {pname} offsets {offs:?} (not consecutive)",
                ctx.gname,
                secs(pop.t_end)
            ),
        );
    }
}

/// Rule: every stored message, and every one a broker vouched for, reaches
/// the group at least once (`lost`).
pub(super) fn every_message_reaches_the_group(
    r: &mut Report,
    row: &mut GroupRow,
    ctx: &GroupCtx<'_>,
    seen: &Seen,
) {
    let mut lost: Vec<&Key> = ctx
        .must
        .iter()
        .filter(|k| !seen.delivered.contains(*k))
        .collect();
    lost.sort();
    row.lost = lost.len() as u64;
    for k in lost {
        let at = ctx.stored.get(k).map_or("not stored".to_owned(), |m| {
            format!("stored at offset {}", m.offset)
        });
        r.violation(
            "lost",
            format!("{}: {}/{} never delivered ({at})", ctx.gname, k.0, k.1),
        );
    }
}

/// Rule: a pop starting at offset s needs every earlier offset handed out by
/// a pop that started before this one ended (`order`). One report per
/// partition: every later pop repeats the same gap.
pub(super) fn pops_never_skip(
    r: &mut Report,
    row: &mut GroupRow,
    ctx: &GroupCtx<'_>,
    seen: &mut Seen,
) {
    for p in &ctx.db.partitions {
        let Some(pops) = seen.pops_by_part.get_mut(&p.name) else {
            continue;
        };
        pops.sort_unstable();
        let n = (p.next_offset.max(1)) as usize;
        // prefix[o] = latest "first delivery start" among offsets low..=o
        let mut prefix: Vec<u64> = vec![0; n + 1];
        let mut worst = 0u64;
        let mut worst_off = 0i64;
        let mut max_at: Vec<(u64, i64)> = vec![(0, 0); n + 1];
        for o in p.low_offset..p.next_offset {
            let first = seen
                .first_seen
                .get(&(p.name.clone(), o))
                .copied()
                .unwrap_or(u64::MAX);
            if first >= worst {
                worst = first;
                worst_off = o;
            }
            prefix[o as usize] = worst;
            max_at[o as usize] = (worst, worst_off);
        }
        for (t_start, t_end, first) in pops.iter() {
            if *first <= p.low_offset {
                continue;
            }
            let before = (*first - 1) as usize;
            if prefix[before] >= *t_end {
                row.reorders += 1;
                let (t, o) = max_at[before];
                let when = if t == u64::MAX {
                    "never".to_owned()
                } else {
                    format!("first at {}", secs(t))
                };
                r.violation(
                    "order",
                    format!(
                        "{}: a pop of {} during {}..{} started at offset {first}, but offset {o} was delivered {when}",
                        ctx.gname,
                        p.name,
                        secs(*t_start),
                        secs(*t_end)
                    ),
                );
                break;
            }
        }
    }
}
