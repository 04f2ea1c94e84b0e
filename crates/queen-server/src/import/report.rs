//! What an import did (or, in a dry run, would do), per queue, partition and
//! group, next to the source's counts; printed as text or as JSON.

use serde::Serialize;

/// Something of the source that is not imported, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    pub what: String,
    pub why: String,
}

/// One consumer group (or queue mode) on one partition.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupReport {
    pub group: String,
    /// `queue` (queue mode), `all`, `new` or `timestamp`.
    pub mode: String,
    /// Messages after the group's position in the source (leased ones included).
    pub source_unconsumed: i64,
    /// Of those, held by a live lease in the source: delivered again here.
    pub leased_redelivered: i64,
    /// Messages after the group's cursor here (`None` in a dry run).
    pub target_pending: Option<i64>,
}

/// One partition.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PartitionReport {
    pub name: String,
    pub source_messages: i64,
    /// Messages new to this broker: appended by this run (or, in a dry run,
    /// to be read from the source: the duplicates among them are not appended).
    pub imported: i64,
    /// Of `imported`, messages found behind the previous run's end: committed
    /// late in the source (reference-schema-0.15.md §4).
    pub late: i64,
    /// Messages of the partition here after the run (`None` in a dry run).
    pub target_messages: Option<i64>,
    pub groups: Vec<GroupReport>,
    pub source_dead_letters: i64,
    /// Dead-letter rows of the source repeating one (group, message): folded into one.
    pub dead_letters_folded: i64,
    pub target_dead_letters: Option<i64>,
    pub source_traces: i64,
    pub target_traces: Option<i64>,
}

impl PartitionReport {
    /// Whether this broker holds what the source holds: every message, and
    /// per group the same messages after its position (leases expired).
    pub fn matches(&self) -> bool {
        let Some(messages) = self.target_messages else {
            return true;
        };
        messages >= self.source_messages
            && self
                .groups
                .iter()
                .all(|g| g.target_pending.is_none_or(|p| p == g.source_unconsumed))
            && self
                .target_dead_letters
                .is_none_or(|d| d == self.source_dead_letters - self.dead_letters_folded)
            && self.target_traces.is_none_or(|t| t >= self.source_traces)
    }
}

/// One queue.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueReport {
    pub name: String,
    /// Options written (created or changed) by this run.
    pub options_written: bool,
    pub partitions: Vec<PartitionReport>,
}

/// The whole run.
#[derive(Debug, Clone, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub dry_run: bool,
    pub source: String,
    pub queues: Vec<QueueReport>,
    pub subscriptions_written: usize,
    /// Maintenance flags of the source, as set here.
    pub maintenance: Vec<(String, bool)>,
    pub skipped: Vec<Skipped>,
    pub totals: Totals,
}

/// Sums over every partition.
#[derive(Debug, Clone, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    pub partitions: usize,
    pub source_messages: i64,
    pub imported: i64,
    pub late: i64,
    pub leased_redelivered: i64,
    pub dead_letters: i64,
    pub traces: i64,
    /// Partitions whose counts here differ from the source's.
    pub mismatches: usize,
    pub seconds: f64,
}

impl Report {
    /// Fills `totals` from the partitions.
    pub fn sum(&mut self, seconds: f64) {
        let mut t = Totals {
            seconds,
            ..Totals::default()
        };
        for p in self.queues.iter().flat_map(|q| &q.partitions) {
            t.partitions += 1;
            t.source_messages += p.source_messages;
            t.imported += p.imported;
            t.late += p.late;
            t.leased_redelivered += p.groups.iter().map(|g| g.leased_redelivered).sum::<i64>();
            t.dead_letters += p.source_dead_letters - p.dead_letters_folded;
            t.traces += p.source_traces;
            t.mismatches += usize::from(!p.matches());
        }
        self.totals = t;
    }

    /// The report as text, one line per partition and per group.
    pub fn render(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let verb = if self.dry_run {
            "would import"
        } else {
            "imported"
        };
        let _ = writeln!(out, "source: {}", self.source);
        for q in &self.queues {
            let _ = writeln!(
                out,
                "queue {}{}",
                q.name,
                if q.options_written {
                    " (options written)"
                } else {
                    ""
                }
            );
            for p in &q.partitions {
                let here = p
                    .target_messages
                    .map_or(String::new(), |n| format!(", here {n}"));
                let flag = if p.matches() { "" } else { "  MISMATCH" };
                let _ = writeln!(
                    out,
                    "  partition {}: source {} messages, {verb} {}{}{here}; dead letters {}{}; traces {}{flag}",
                    p.name,
                    p.source_messages,
                    p.imported,
                    if p.late > 0 { format!(" ({} late)", p.late) } else { String::new() },
                    p.source_dead_letters - p.dead_letters_folded,
                    if p.dead_letters_folded > 0 {
                        format!(" ({} repeated rows folded)", p.dead_letters_folded)
                    } else {
                        String::new()
                    },
                    p.source_traces,
                );
                for g in &p.groups {
                    let _ = writeln!(
                        out,
                        "    group {} ({}): {} unconsumed in the source{}{}",
                        g.group,
                        g.mode,
                        g.source_unconsumed,
                        if g.leased_redelivered > 0 {
                            format!(", {} leased there: delivered again", g.leased_redelivered)
                        } else {
                            String::new()
                        },
                        g.target_pending
                            .map_or(String::new(), |n| format!(", {n} pending here")),
                    );
                }
            }
        }
        for (key, on) in &self.maintenance {
            let _ = writeln!(
                out,
                "maintenance flag {key}: {}",
                if *on { "on" } else { "off" }
            );
        }
        for s in &self.skipped {
            let _ = writeln!(out, "not imported: {}: {}", s.what, s.why);
        }
        let t = &self.totals;
        let _ = writeln!(
            out,
            "total: {} partitions, {} messages in the source, {verb} {} ({} late), {} leased messages to be delivered again, {} dead letters, {} traces, {} mismatches, {:.1} s",
            t.partitions, t.source_messages, t.imported, t.late, t.leased_redelivered,
            t.dead_letters, t.traces, t.mismatches, t.seconds
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partition(target: Option<i64>, pending: Option<i64>) -> PartitionReport {
        PartitionReport {
            name: "p".into(),
            source_messages: 5,
            imported: 5,
            late: 0,
            target_messages: target,
            groups: vec![GroupReport {
                group: "g".into(),
                mode: "all".into(),
                source_unconsumed: 3,
                leased_redelivered: 1,
                target_pending: pending,
            }],
            source_dead_letters: 2,
            dead_letters_folded: 1,
            target_dead_letters: target.map(|_| 1),
            source_traces: 0,
            target_traces: target.map(|_| 0),
        }
    }

    #[test]
    fn a_partition_matches_when_every_count_agrees() {
        assert!(partition(Some(5), Some(3)).matches());
        assert!(
            partition(None, None).matches(),
            "a dry run has nothing to compare"
        );
        assert!(!partition(Some(4), Some(3)).matches(), "a message missing");
        assert!(!partition(Some(5), Some(2)).matches(), "a group ahead");
        let mut r = Report {
            queues: vec![QueueReport {
                name: "q".into(),
                options_written: true,
                partitions: vec![partition(Some(5), Some(3)), partition(Some(5), Some(4))],
            }],
            ..Report::default()
        };
        r.sum(1.0);
        assert_eq!(r.totals.mismatches, 1);
        assert_eq!(r.totals.leased_redelivered, 2);
        assert_eq!(r.totals.dead_letters, 2);
        assert!(r.render().contains("MISMATCH"));
    }
}
