//! The checker: from what producers were told, what every group received and
//! acked, and the final database state, it lists every violation of the
//! delivery guarantees and prints a summary table.
//!
//! A message is identified by its key `(partition, transactionId)`.
//!
//! | rule | violation kind |
//! |---|---|
//! | a push answered `queued`, `buffered` or `duplicate` is stored | `lost` |
//! | every stored message reaches every group at least once | `lost` |
//! | every message the group's cursor passed was acked by the group | `lost` |
//! | a key is stored once, with the message id its `queued` answer named | `doubled`, `dedup` |
//! | nothing is stored or delivered that no producer pushed | `phantom` |
//! | payloads arrive as pushed | `payload` |
//! | within a pop, a partition's messages are consecutive offsets | `order` |
//! | a pop never starts past an offset the group has not been given yet | `order` |
//! | a pop never delivers an offset whose ack had already succeeded | `order` |
//! | pushes answered `queued` one after another get increasing offsets | `order` |
//! | an ack inside an extended lease is not refused for the lease | `lease` |
//! | poison messages are in the group's DLQ exactly once; nothing else is, unless failed | `dlq` |
//! | a DLQ entry was written after exactly `retryLimit` counted failures | `dlq` |
//! | after the drain, every cursor is at the end and no lease is live | `drained`, `leased` |
//! | spools are empty and refused nothing; no broker exited by itself | `spool`, `broker` |

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;

use serde_json::Value;

use crate::dbstate::DbState;
use crate::journal::{AckOutcome, ItemKind, Journal, PushEvent, Told};
use crate::workload::{is_flaky, is_poison};

type Key = (String, String);

/// What the brokers reported about their spools at the end.
#[derive(Debug, Clone)]
pub struct SpoolState {
    pub broker: usize,
    pub pending: Option<u64>,
    pub failed: Option<u64>,
}

/// Everything besides the journal and the tables.
#[derive(Debug, Default)]
pub struct Extra {
    pub spools: Vec<SpoolState>,
    pub unexpected_exits: Vec<String>,
    /// The drain ended by its deadline, not because the system went quiet.
    pub drain_timed_out: bool,
    /// DLQ totals through `GET /api/v1/dlq`, per group (None when unreadable).
    pub dlq_api_totals: Vec<Option<u64>>,
}

#[derive(Debug, Default, Clone)]
pub struct GroupRow {
    pub name: String,
    pub deliveries: u64,
    pub distinct: u64,
    pub redelivered: u64,
    pub lost: u64,
    /// Delivered but never acked although the cursor passed it.
    pub unacked: u64,
    pub phantom: u64,
    pub reorders: u64,
    pub dlq: u64,
    pub dlq_expected: u64,
    pub late_acks_refused: u64,
    pub late_acks_accepted: u64,
}

#[derive(Debug, Default)]
pub struct Report {
    /// Violations by kind, in the order found.
    pub violations: BTreeMap<&'static str, Vec<String>>,
    pub groups: Vec<GroupRow>,
    pub lines: Vec<String>,
}

impl Report {
    fn violation(&mut self, kind: &'static str, detail: String) {
        self.violations.entry(kind).or_default().push(detail);
    }

    pub fn violation_count(&self) -> usize {
        self.violations.values().map(Vec::len).sum()
    }

    /// The summary table and the first violations of each kind.
    pub fn render(&self) -> String {
        let mut s = String::new();
        for l in &self.lines {
            let _ = writeln!(s, "{l}");
        }
        let _ = writeln!(
            s,
            "\n{:<10} {:>10} {:>9} {:>11} {:>6} {:>8} {:>8} {:>9} {:>6} {:>9} {:>12}",
            "group",
            "delivered",
            "distinct",
            "redelivered",
            "lost",
            "unacked",
            "phantom",
            "reorders",
            "dlq",
            "dlq-want",
            "late-acks"
        );
        for g in &self.groups {
            let _ = writeln!(
                s,
                "{:<10} {:>10} {:>9} {:>11} {:>6} {:>8} {:>8} {:>9} {:>6} {:>9} {:>12}",
                g.name,
                g.deliveries,
                g.distinct,
                g.redelivered,
                g.lost,
                g.unacked,
                g.phantom,
                g.reorders,
                g.dlq,
                g.dlq_expected,
                format!("{}✗/{}✓", g.late_acks_refused, g.late_acks_accepted)
            );
        }
        let _ = writeln!(s, "\nviolations: {}", self.violation_count());
        for (kind, list) in &self.violations {
            let _ = writeln!(s, "  {kind}: {}", list.len());
            for v in list.iter().take(12) {
                let _ = writeln!(s, "    - {v}");
            }
            if list.len() > 12 {
                let _ = writeln!(s, "    … {} more", list.len() - 12);
            }
        }
        s
    }
}

fn secs(us: u64) -> String {
    format!("{:.3}s", us as f64 / 1e6)
}

fn describe_told(events: &[&PushEvent]) -> String {
    events
        .iter()
        .map(|e| {
            let t = match &e.told {
                Told::Queued { .. } => "queued".to_owned(),
                Told::Duplicate { .. } => "duplicate".to_owned(),
                Told::Buffered => "buffered".to_owned(),
                Told::Failed(m) => format!("failed({m})"),
                Told::NoAnswer(m) => {
                    format!("no answer({})", m.chars().take(60).collect::<String>())
                }
            };
            format!("{t} by broker {} at {}", e.broker, secs(e.t_done))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Runs every check.
pub fn check(
    journal: &Journal,
    db: &DbState,
    groups: &[String],
    retry_limit: i32,
    extra: &Extra,
) -> Report {
    let mut r = Report::default();

    // ---- partitions and storage ----
    let name_of: HashMap<&str, &str> = db
        .partitions
        .iter()
        .map(|p| (p.id.as_str(), p.name.as_str()))
        .collect();

    // every push event per key, in producer order
    let mut attempts: HashMap<Key, Vec<&PushEvent>> = HashMap::new();
    let mut items_sent = 0u64;
    let mut kinds = [0u64; 3];
    let mut told_counts: BTreeMap<&'static str, u64> = BTreeMap::new();
    for log in &journal.pushes {
        for e in log {
            attempts
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
            *told_counts.entry(label).or_default() += 1;
            if e.attempt == 0 {
                items_sent += 1;
                kinds[match e.kind {
                    ItemKind::Fresh => 0,
                    ItemKind::Repeat => 1,
                    ItemKind::InRequestRepeat => 2,
                }] += 1;
            }
        }
    }

    // stored messages by key; offsets per partition
    let mut stored: HashMap<Key, &crate::dbstate::StoredMessage> = HashMap::new();
    let mut offsets: HashMap<&str, Vec<i64>> = HashMap::new();
    for m in db.messages.iter().filter(|m| !m.deleted) {
        let pname = name_of.get(m.partition_id.as_str()).copied().unwrap_or("?");
        offsets
            .entry(m.partition_id.as_str())
            .or_default()
            .push(m.offset);
        let key = (pname.to_owned(), m.txid.clone());
        if let Some(first) = stored.insert(key.clone(), m) {
            r.violation(
                "doubled",
                format!(
                    "{}/{}: stored twice, at offsets {} and {} (message ids {} and {})",
                    key.0, key.1, first.offset, m.offset, first.message_id, m.message_id
                ),
            );
        }
        match attempts.get(&key) {
            None => r.violation(
                "phantom",
                format!(
                    "{}/{}: stored at offset {} but never pushed",
                    key.0, key.1, m.offset
                ),
            ),
            Some(evs) => {
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
        }
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
    let key_rows: HashMap<(&str, &str), &crate::dbstate::KeyRow> = db
        .keys
        .iter()
        .map(|k| ((k.partition_id.as_str(), k.txid.as_str()), k))
        .collect();
    for ((pname, txid), m) in &stored {
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

    // ---- what producers were told ----
    let mut vouched: HashSet<Key> = HashSet::new();
    let mut unanswered_keys = 0u64;
    for (key, evs) in &attempts {
        if evs.iter().any(|e| e.told.vouches()) {
            vouched.insert(key.clone());
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
        } else if !evs.iter().any(|e| matches!(e.told, Told::Failed(_))) {
            unanswered_keys += 1;
        }
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
    // producer order: queued answers of one partition get increasing offsets
    let mut producer_inversions = 0u64;
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
                    producer_inversions += 1;
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

    r.lines.push(format!(
        "pushes: {items_sent} items sent ({} fresh, {} repeated transactionIds, {} repeated inside a request)",
        kinds[0], kinds[1], kinds[2]
    ));
    r.lines.push(format!(
        "  answers: {}",
        told_counts
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    r.lines.push(format!(
        "  pushed (answered queued/buffered/duplicate): {} messages; stored: {} in {} partitions; never answered: {unanswered_keys}; producer-order inversions: {producer_inversions}",
        vouched.len(),
        stored.len(),
        db.partitions.iter().filter(|p| p.next_offset > 1).count()
    ));

    // ---- per group ----
    let mut must: HashSet<Key> = vouched.clone();
    must.extend(stored.keys().cloned());
    for (gi, gname) in groups.iter().enumerate() {
        let mut row = GroupRow {
            name: gname.clone(),
            ..GroupRow::default()
        };
        let ctx = GroupCtx {
            gi,
            gname,
            retry_limit,
            journal,
            db,
            stored: &stored,
            must: &must,
            name_of: &name_of,
        };
        check_group(&mut r, &mut row, &ctx);
        if let Some(Some(api)) = extra.dlq_api_totals.get(gi) {
            if *api != row.dlq {
                r.violation(
                    "dlq",
                    format!(
                        "{gname}: GET /api/v1/dlq reports {api} entries, the table holds {}",
                        row.dlq
                    ),
                );
            }
        }
        r.groups.push(row);
    }

    // ---- final state ----
    let cursor_of: HashMap<(&str, &str), &crate::dbstate::CursorRow> = db
        .cursors
        .iter()
        .map(|c| ((c.partition_id.as_str(), c.group.as_str()), c))
        .collect();
    let mut stale = 0u64;
    for c in &db.cursors {
        if c.live_lease {
            r.violation(
                "leased",
                format!(
                    "{} / {}: a lease is still live after the drain",
                    name_of.get(c.partition_id.as_str()).copied().unwrap_or("?"),
                    c.group
                ),
            );
        } else if c.lease_set {
            stale += 1;
        }
    }
    for p in db.partitions.iter().filter(|p| p.next_offset > 1) {
        for g in groups {
            let committed = cursor_of
                .get(&(p.id.as_str(), g.as_str()))
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
    for s in &extra.spools {
        match (s.pending, s.failed) {
            (Some(0), Some(0)) => {}
            (Some(p), Some(f)) => r.violation(
                "spool",
                format!(
                    "broker {}: spool holds {p} records not replayed and refused {f} (failed/)",
                    s.broker
                ),
            ),
            _ => r.violation(
                "spool",
                format!("broker {}: spool state unreadable", s.broker),
            ),
        }
    }
    for e in &extra.unexpected_exits {
        r.violation("broker", e.clone());
    }
    if extra.drain_timed_out {
        r.lines
            .push("  drain: deadline reached before every cursor reached the end".to_owned());
    }
    r.lines.push(format!(
        "  pops: {}, acks: {}, lease extensions: {} ({} accepted), expired leases left set: {stale}",
        journal.pops.len(),
        journal.acks.len(),
        journal.extends.0,
        journal.extends.1
    ));
    r
}

/// What the per-group checks read.
struct GroupCtx<'a> {
    gi: usize,
    gname: &'a str,
    retry_limit: i32,
    journal: &'a Journal,
    db: &'a DbState,
    stored: &'a HashMap<Key, &'a crate::dbstate::StoredMessage>,
    must: &'a HashSet<Key>,
    name_of: &'a HashMap<&'a str, &'a str>,
}

fn check_group(r: &mut Report, row: &mut GroupRow, ctx: &GroupCtx<'_>) {
    let GroupCtx {
        gi,
        gname,
        retry_limit,
        journal,
        db,
        stored,
        must,
        name_of,
    } = *ctx;
    // per partition: (t_start, t_end, first, last) of every pop; earliest start per offset
    let mut delivered: HashSet<Key> = HashSet::new();
    let mut first_seen: HashMap<(String, i64), u64> = HashMap::new();
    let mut pops_by_part: HashMap<String, Vec<(u64, u64, i64)>> = HashMap::new();
    for pop in journal.pops.iter().filter(|p| p.group == gi) {
        let mut by_part: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
        for d in &pop.messages {
            row.deliveries += 1;
            let pname = name_of.get(d.partition_id.as_str()).copied().unwrap_or("?");
            let key = (pname.to_owned(), d.txid.clone());
            let Some(m) = stored.get(&key) else {
                row.phantom += 1;
                r.violation(
                    "phantom",
                    format!(
                        "{gname}: delivered {}/{} at {}, which is not stored",
                        key.0,
                        key.1,
                        secs(pop.t_end)
                    ),
                );
                continue;
            };
            if pname != d.partition {
                r.violation(
                    "storage",
                    format!(
                        "{gname}: message {} says partition {} but its id is {pname}'s",
                        d.txid, d.partition
                    ),
                );
            }
            if m.message_id != d.message_id {
                r.violation(
                    "doubled",
                    format!(
                        "{gname}: {}/{} delivered as message {} but {} is stored",
                        key.0, key.1, d.message_id, m.message_id
                    ),
                );
            }
            let want: Value = serde_json::from_str(&m.payload).unwrap_or(Value::Null);
            if d.data != want {
                r.violation(
                    "payload",
                    format!(
                        "{gname}: {}/{} delivered data {} but {want} is stored",
                        key.0, key.1, d.data
                    ),
                );
            }
            by_part.entry(pname).or_default().push(m.offset);
            let e = first_seen
                .entry((pname.to_owned(), m.offset))
                .or_insert(pop.t_start);
            *e = (*e).min(pop.t_start);
            delivered.insert(key);
        }
        for (pname, offs) in by_part {
            if offs.windows(2).any(|w| w[1] != w[0] + 1) {
                row.reorders += 1;
                r.violation(
                    "order",
                    format!("{gname}: one pop at {} delivered {pname} offsets {offs:?} (not consecutive)", secs(pop.t_end)),
                );
            }
            pops_by_part.entry(pname.to_owned()).or_default().push((
                pop.t_start,
                pop.t_end,
                offs[0],
            ));
        }
    }
    row.distinct = delivered.len() as u64;
    row.redelivered = (row.deliveries - row.phantom).saturating_sub(row.distinct);

    // at least once
    let mut lost: Vec<&Key> = must.iter().filter(|k| !delivered.contains(*k)).collect();
    lost.sort();
    row.lost = lost.len() as u64;
    for k in lost {
        let at = stored.get(k).map_or("not stored".to_owned(), |m| {
            format!("stored at offset {}", m.offset)
        });
        r.violation(
            "lost",
            format!("{gname}: {}/{} never delivered ({at})", k.0, k.1),
        );
    }

    // never skip: a pop starting at offset s needs every earlier offset handed
    // out by a pop that started before this one ended
    for p in &db.partitions {
        let Some(pops) = pops_by_part.get_mut(&p.name) else {
            continue;
        };
        pops.sort_unstable();
        let n = (p.next_offset.max(1)) as usize;
        // prefix_max[o] = latest "first delivery start" among offsets low..=o
        let mut prefix: Vec<u64> = vec![0; n + 1];
        let mut worst = 0u64;
        let mut worst_off = 0i64;
        let mut max_at: Vec<(u64, i64)> = vec![(0, 0); n + 1];
        for o in p.low_offset..p.next_offset {
            let first = first_seen
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
                        "{gname}: a pop of {} during {}..{} started at offset {first}, but offset {o} was delivered {when}",
                        p.name,
                        secs(*t_start),
                        secs(*t_end)
                    ),
                );
                // one report per partition: every later pop repeats the same gap
                break;
            }
        }
    }

    // never go back past a successful ack
    let offset_of = |pid: &str, txid: &str| -> Option<(String, i64)> {
        let pname = name_of.get(pid)?;
        stored
            .get(&((*pname).to_owned(), txid.to_owned()))
            .map(|m| ((*pname).to_owned(), m.offset))
    };
    let mut acked: HashMap<String, Vec<(u64, i64)>> = HashMap::new();
    let mut failed_sent: HashSet<Key> = HashSet::new();
    // keys whose completed (or dead-lettering) ack succeeded, or may have
    let mut processed: HashSet<Key> = HashSet::new();
    for a in journal.acks.iter().filter(|a| a.group == gi) {
        for it in &a.items {
            let Some((pname, off)) = offset_of(&it.partition_id, &it.txid) else {
                continue;
            };
            if it.status == "failed" {
                failed_sent.insert((pname.clone(), it.txid.clone()));
            }
            if a.late {
                match it.outcome {
                    AckOutcome::Ok { .. } => row.late_acks_accepted += 1,
                    AckOutcome::Refused(_) => row.late_acks_refused += 1,
                    AckOutcome::NoAnswer(_) => {}
                }
            }
            // a retry may follow a first try that committed without answering;
            // the partition can then be leased anew, and the retry is refused
            if let (Some(until), AckOutcome::Refused(e), 0) =
                (a.extended_until, &it.outcome, a.attempt)
            {
                if a.t_end < until && e.contains("lease") {
                    r.violation(
                        "lease",
                        format!(
                            "{gname}: ack of {pname}/{} answered at {} refused ({e}) although its lease was extended until at least {}",
                            it.txid,
                            secs(a.t_end),
                            secs(until)
                        ),
                    );
                }
            }
            if matches!(it.outcome, AckOutcome::NoAnswer(_))
                || matches!(it.outcome, AckOutcome::Ok { dlq } if dlq || it.status == "completed")
            {
                processed.insert((pname.clone(), it.txid.clone()));
            }
            let moved = match it.outcome {
                AckOutcome::Ok { dlq } => it.status == "completed" || dlq,
                _ => false,
            };
            if moved {
                acked.entry(pname).or_default().push((a.t_end, off));
            }
        }
    }
    // at least once processed: the cursor passed every message, so each one
    // must have been acked (completed or dead-lettered) by this group; a
    // message delivered but never acked was skipped
    let mut unacked: Vec<&Key> = must
        .iter()
        .filter(|k| delivered.contains(*k) && !processed.contains(*k))
        .collect();
    unacked.sort();
    row.unacked = unacked.len() as u64;
    for k in unacked {
        r.violation(
            "lost",
            format!(
                "{gname}: {}/{} delivered but never acked, yet the cursor passed it",
                k.0, k.1
            ),
        );
    }
    for (pname, acks) in &mut acked {
        acks.sort_unstable();
        let mut prefix = Vec::with_capacity(acks.len());
        let mut best = i64::MIN;
        for (t, off) in acks.iter() {
            best = best.max(*off);
            prefix.push((*t, best));
        }
        let Some(pops) = pops_by_part.get(pname) else {
            continue;
        };
        for (t_start, t_end, first) in pops {
            let n = prefix.partition_point(|(t, _)| t < t_start);
            if n == 0 {
                continue;
            }
            let (t_ack, max_acked) = prefix[n - 1];
            if *first <= max_acked {
                row.reorders += 1;
                r.violation(
                    "order",
                    format!(
                        "{gname}: a pop of {pname} during {}..{} delivered offset {first} again, after an ack up to offset {max_acked} had succeeded (by {})",
                        secs(*t_start),
                        secs(*t_end),
                        secs(t_ack)
                    ),
                );
            }
        }
    }

    // DLQ
    let mut dlq_keys: HashMap<Key, u64> = HashMap::new();
    for d in db.dead_letters.iter().filter(|d| d.group == gname) {
        row.dlq += 1;
        let pname = name_of.get(d.partition_id.as_str()).copied().unwrap_or("?");
        let key = (pname.to_owned(), d.txid.clone());
        match stored.get(&key) {
            Some(m) if m.offset == d.offset && m.message_id == d.message_id => {}
            _ => r.violation(
                "dlq",
                format!(
                    "{gname}: DLQ entry {}/{} at offset {} does not match the stored message",
                    key.0, key.1, d.offset
                ),
            ),
        }
        if d.retry_count != retry_limit {
            r.violation(
                "dlq",
                format!(
                    "{gname}: {}/{} dead-lettered with retry count {}, not after {retry_limit} counted failures",
                    key.0, key.1, d.retry_count
                ),
            );
        }
        if !failed_sent.contains(&key) {
            r.violation(
                "dlq",
                format!(
                    "{gname}: {}/{} is in the DLQ (retry count {}) but this group never failed it",
                    key.0, key.1, d.retry_count
                ),
            );
        }
        *dlq_keys.entry(key).or_default() += 1;
    }
    for (k, n) in &dlq_keys {
        if *n > 1 {
            r.violation(
                "dlq",
                format!("{gname}: {}/{} is in the DLQ {n} times", k.0, k.1),
            );
        }
    }
    let mut poison: Vec<&Key> = stored
        .keys()
        .filter(|(p, t)| is_poison(gname, p, t))
        .collect();
    poison.sort();
    row.dlq_expected = poison.len() as u64;
    for k in poison {
        if !dlq_keys.contains_key(k) {
            r.violation(
                "dlq",
                format!(
                    "{gname}: {}/{} always fails but is not in the DLQ",
                    k.0, k.1
                ),
            );
        }
    }
    let flaky_in_dlq = dlq_keys
        .keys()
        .filter(|(p, t)| is_flaky(gname, p, t))
        .count();
    if flaky_in_dlq > 0 {
        r.lines.push(format!(
            "  {gname}: {flaky_in_dlq} messages that failed only once reached the DLQ (the retry counter is per batch, so failures of neighbours add up)"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dbstate::{CursorRow, DeadLetterRow, KeyRow, PartitionRow, StoredMessage};
    use crate::journal::{AckEvent, AckItem, Delivery, Handling, PopEvent, PushEvent};
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
}
