//! Rules on the state after the drain: no live lease, every cursor at the
//! end of its partition, empty spools, and no broker that exited by itself.

use std::collections::HashMap;

use super::{NameOf, Report, SpoolState};
use crate::dbstate::{CursorRow, DbState};

/// Rule: no lease is live after the drain (`leased`). Returns how many
/// expired leases are still set, for the summary.
pub(super) fn no_lease_is_live(r: &mut Report, db: &DbState, name_of: &NameOf<'_>) -> u64 {
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
    stale
}

/// Rule: every group's cursor on every written partition is at its last
/// offset (`drained`).
pub(super) fn cursors_reached_the_end(r: &mut Report, db: &DbState, groups: &[String]) {
    let cursor_of: HashMap<(&str, &str), &CursorRow> = db
        .cursors
        .iter()
        .map(|c| ((c.partition_id.as_str(), c.group.as_str()), c))
        .collect();
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
}

/// Rule: every broker's spool is empty and refused nothing (`spool`).
pub(super) fn spools_are_empty(r: &mut Report, spools: &[SpoolState]) {
    for s in spools {
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
}

/// Rule: no broker exited by itself (`broker`).
pub(super) fn no_broker_exited(r: &mut Report, unexpected_exits: &[String]) {
    for e in unexpected_exits {
        r.violation("broker", e.clone());
    }
}
