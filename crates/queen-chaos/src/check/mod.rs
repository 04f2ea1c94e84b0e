//! The checker: from what producers were told, what every group received and
//! acked, and the final database state, it lists every violation of the
//! delivery guarantees and prints a summary table.
//!
//! A message is identified by its key `(partition, transactionId)`. Each rule
//! is one function; [`check`] runs them in the order of this table.
//!
//! | rule | violation kind | function |
//! |---|---|---|
//! | a key is stored once | `doubled` | `storage::key_is_stored_once` |
//! | nothing is stored that no producer pushed | `phantom` | `storage::stored_message_was_pushed` |
//! | payloads are stored as pushed | `payload` | `storage::stored_payload_is_the_pushed_one` |
//! | a partition stores exactly its offsets `low..next`, each with its dedup index entry | `storage` | `storage::offsets_are_dense`, `storage::dedup_index_matches_segments` |
//! | a push answered `queued`, `buffered` or `duplicate` is stored | `lost` | `producers::vouched_push_is_stored` |
//! | a key is answered `queued` once, with the message id that is stored | `dedup` | `producers::answers_name_the_stored_message` |
//! | pushes answered `queued` one after another get increasing offsets | `order` | `producers::queued_pushes_get_increasing_offsets` |
//! | nothing is delivered that is not stored | `phantom` | `deliveries::delivery_is_stored` |
//! | a delivery names its partition and the stored message id | `storage`, `doubled` | `deliveries::delivery_names_its_partition`, `deliveries::delivery_has_the_stored_id` |
//! | payloads arrive as stored | `payload` | `deliveries::delivery_payload_is_the_stored_one` |
//! | within a pop, a partition's messages are consecutive offsets | `order` | `deliveries::pop_offsets_are_consecutive` |
//! | every stored (or vouched) message reaches every group at least once | `lost` | `deliveries::every_message_reaches_the_group` |
//! | a pop never starts past an offset the group has not been given yet | `order` | `deliveries::pops_never_skip` |
//! | an ack inside an extended lease is not refused for the lease | `lease` | `acks::extended_lease_accepts_the_ack` |
//! | every message the group's cursor passed was acked by the group | `lost` | `acks::passed_messages_were_acked` |
//! | a pop never delivers an offset whose ack had already succeeded | `order` | `acks::pops_never_go_back_past_an_ack` |
//! | a DLQ entry is the stored message, written after exactly `retryLimit` counted failures, of a message the group failed | `dlq` | `dlq::entry_is_the_stored_message`, `dlq::entry_follows_the_retry_limit`, `dlq::entry_was_failed_by_the_group` |
//! | a message is in the group's DLQ at most once; poison messages are there | `dlq` | `dlq::entries_are_unique`, `dlq::poison_is_dead_lettered` |
//! | `GET /api/v1/dlq` counts what the table holds | `dlq` | `dlq::api_total_matches_the_table` |
//! | after the drain no lease is live and every cursor is at the end | `leased`, `drained` | `final_state::no_lease_is_live`, `final_state::cursors_reached_the_end` |
//! | spools are empty and refused nothing; no broker exited by itself | `spool`, `broker` | `final_state::spools_are_empty`, `final_state::no_broker_exited` |
//! | the stream workload's keyed count is exact in state and sink | `stream-*` | `streams::check_streams` (its own table) |
//!
//! The timer, recurring-timer, lock-token and retry-delay workloads have
//! rule tables of their own in [`timers`], [`recurring`], [`locks`] and
//! [`retry_delay`]; `workload::surface` runs them after [`check`].

mod acks;
mod deliveries;
mod dlq;
mod final_state;
pub mod locks;
mod producers;
pub mod recurring;
pub mod retry_delay;
mod storage;
pub mod streams;
#[cfg(test)]
mod streams_tests;
#[cfg(test)]
mod surface_tests;
#[cfg(test)]
mod tests;
pub mod timers;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;

use crate::dbstate::{DbState, StoredMessage};
use crate::journal::{Journal, PushEvent, Told};

/// `(partition name, transactionId)`.
type Key = (String, String);

/// Partition names by id.
type NameOf<'a> = HashMap<&'a str, &'a str>;

/// Stored messages by key.
type Stored<'a> = HashMap<Key, &'a StoredMessage>;

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
    pub(crate) fn violation(&mut self, kind: &'static str, detail: String) {
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

/// What the per-group rules read.
struct GroupCtx<'a> {
    gi: usize,
    gname: &'a str,
    retry_limit: i32,
    journal: &'a Journal,
    db: &'a DbState,
    stored: &'a Stored<'a>,
    /// Keys every group must receive: stored, or vouched for by a broker.
    must: &'a HashSet<Key>,
    name_of: &'a NameOf<'a>,
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
    let name_of: NameOf<'_> = db
        .partitions
        .iter()
        .map(|p| (p.id.as_str(), p.name.as_str()))
        .collect();

    let pushes = producers::Pushes::collect(journal);
    let stored = storage::check_stored_messages(&mut r, db, &name_of, &pushes.attempts);
    storage::offsets_are_dense(&mut r, db);
    storage::dedup_index_matches_segments(&mut r, db, &stored);
    let answers = producers::check_answers(&mut r, &pushes.attempts, &stored);
    let producer_inversions =
        producers::queued_pushes_get_increasing_offsets(&mut r, journal, &stored);
    r.lines
        .extend(pushes.summary(&answers, &stored, db, producer_inversions));

    let mut must: HashSet<Key> = answers.vouched.clone();
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
        dlq::api_total_matches_the_table(&mut r, &row, extra.dlq_api_totals.get(gi));
        r.groups.push(row);
    }

    let stale = final_state::no_lease_is_live(&mut r, db, &name_of);
    final_state::cursors_reached_the_end(&mut r, db, groups);
    final_state::spools_are_empty(&mut r, &extra.spools);
    final_state::no_broker_exited(&mut r, &extra.unexpected_exits);
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

/// The rules about one consumer group: what it was delivered, what it acked,
/// and its dead letters.
fn check_group(r: &mut Report, row: &mut GroupRow, ctx: &GroupCtx<'_>) {
    let mut seen = deliveries::check_deliveries(r, row, ctx);
    deliveries::every_message_reaches_the_group(r, row, ctx, &seen);
    deliveries::pops_never_skip(r, row, ctx, &mut seen);
    let mut acked = acks::check_acks(r, row, ctx);
    acks::passed_messages_were_acked(r, row, ctx, &seen, &acked);
    acks::pops_never_go_back_past_an_ack(r, row, ctx, &seen, &mut acked);
    dlq::check_dead_letters(r, row, ctx, &acked.failed_sent);
}
