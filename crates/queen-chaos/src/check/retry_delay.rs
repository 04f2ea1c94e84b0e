//! The retry-delay rules: from every pop answer and ack of the retry
//! workload (harness clock), the messages stored (offset order) and the
//! group's cursors after the drain.
//!
//! The harness clock brackets the database's: a failed delivery's hold
//! starts after that delivery's pop was sent (at the failed ack, or at the
//! lease's expiry), and a redelivery's pop read the database clock before
//! its answer came. So the time from the send of the last delivery answered
//! before a redelivery was sent, to that redelivery's answer, is at least the
//! hold before it, whichever delivery failed (one whose answer was lost
//! included). Its head says the attempt: the hold was the wait of the
//! attempt before it.
//!
//! | rule | violation kind | function |
//! |---|---|---|
//! | a delivery whose first message is on attempt n ≥ 2 comes no earlier than `retryDelay × retryBackoff^(n−2)` (capped) after the one before it was sent, within 5 ms | `retry-early` | `never_early` |
//! | a delivery starts at most one past the last message acked completed before its answer, and runs in offset order: nothing overtakes a failed message | `retry-overtaken` | `fifo` |
//! | a message delivered again says a higher `deliveryAttempt` than its delivery before | `retry-attempt` | `attempts_grow` |
//! | every answered push is stored, every stored message was delivered, and no cursor of the group is short of its partition's end after the drain | `retry-lost` | `nothing_lost` |

use std::collections::{HashMap, HashSet};

use super::Report;
use crate::workload::retry_delay::{wait_ms, RetryJournal, RetryPop};

/// What the two clocks may disagree by over a hold, in µs.
pub const SLACK_US: i64 = 5_000;

pub fn check(r: &mut Report, j: &RetryJournal) {
    let by_partition = pops_by_partition(j);
    let redelivered = never_early(r, &by_partition);
    fifo(r, j, &by_partition);
    attempts_grow(r, j);
    nothing_lost(r, j);
    r.lines.push(format!(
        "retry delays: {} deliveries, {redelivered} after a failed one, {} failed acks, {} stored",
        j.pops.len(),
        j.acks.iter().filter(|a| !a.completed).count(),
        j.stored.len()
    ));
}

/// Each partition's pops, by the time their answers came.
fn pops_by_partition(j: &RetryJournal) -> HashMap<&str, Vec<&RetryPop>> {
    let mut out: HashMap<&str, Vec<&RetryPop>> = HashMap::new();
    for p in &j.pops {
        out.entry(p.partition.as_str()).or_default().push(p);
    }
    for list in out.values_mut() {
        list.sort_by_key(|p| p.t_done);
    }
    out
}

/// The last pop of `list` answered before `at` was sent.
fn before<'a>(list: &[&'a RetryPop], at: &RetryPop) -> Option<&'a RetryPop> {
    list.iter()
        .copied()
        .filter(|p| p.t_done < at.t_sent)
        .max_by_key(|p| p.t_done)
}

/// Returns how many redeliveries it held to their wait.
fn never_early(r: &mut Report, by_partition: &HashMap<&str, Vec<&RetryPop>>) -> usize {
    let mut n = 0;
    for list in by_partition.values() {
        for d2 in list {
            let Some((head, attempt)) = d2.messages.first() else {
                continue;
            };
            if *attempt < 2 {
                continue;
            }
            let Some(d1) = before(list, d2) else {
                continue;
            };
            n += 1;
            let gap = d2.t_done as i64 - d1.t_sent as i64;
            let want = (wait_ms(attempt - 1) * 1000.0) as i64;
            if gap + SLACK_US < want {
                r.violation(
                    "retry-early",
                    format!(
                        "{head} (attempt {attempt}) in {} came {gap} µs after the delivery before it was sent, before the {want} µs wait",
                        d2.partition
                    ),
                );
            }
        }
    }
    n
}

fn fifo(r: &mut Report, j: &RetryJournal, by_partition: &HashMap<&str, Vec<&RetryPop>>) {
    let mut pos: HashMap<(&str, &str), i64> = HashMap::new();
    let mut next: HashMap<&str, i64> = HashMap::new();
    for (p, t) in &j.stored {
        let k = next.entry(p.as_str()).or_default();
        pos.insert((p.as_str(), t.as_str()), *k);
        *k += 1;
    }
    for (partition, list) in by_partition {
        for d in list {
            let positions: Vec<Option<i64>> = d
                .messages
                .iter()
                .map(|(t, _)| pos.get(&(*partition, t.as_str())).copied())
                .collect();
            if positions.iter().any(Option::is_none) {
                r.violation(
                    "retry-overtaken",
                    format!(
                        "a delivery of {partition} holds a message not stored there: {:?}",
                        d.messages
                    ),
                );
                continue;
            }
            let positions: Vec<i64> = positions.into_iter().flatten().collect();
            if positions.windows(2).any(|w| w[1] != w[0] + 1) {
                r.violation(
                    "retry-overtaken",
                    format!(
                        "a delivery of {partition} is out of offset order: {:?}",
                        d.messages
                    ),
                );
            }
            let frontier = j
                .acks
                .iter()
                .filter(|a| a.completed && a.partition == *partition && a.t_sent < d.t_done)
                .filter_map(|a| pos.get(&(*partition, a.txid.as_str())))
                .max()
                .copied()
                .unwrap_or(-1);
            if positions[0] > frontier + 1 {
                r.violation(
                    "retry-overtaken",
                    format!(
                        "{} in {partition} was delivered while the message before it was not acked completed",
                        d.messages[0].0
                    ),
                );
            }
        }
    }
}

fn attempts_grow(r: &mut Report, j: &RetryJournal) {
    let mut seen: HashMap<&str, Vec<(&RetryPop, i64)>> = HashMap::new();
    for p in &j.pops {
        for (t, a) in &p.messages {
            seen.entry(t.as_str()).or_default().push((p, *a));
        }
    }
    for (txid, list) in seen {
        for (d2, a2) in &list {
            if *a2 < 1 {
                r.violation(
                    "retry-attempt",
                    format!("{txid} delivered with attempt {a2}"),
                );
            }
            let prior = list
                .iter()
                .filter(|(d1, _)| d1.t_done < d2.t_sent)
                .max_by_key(|(d1, _)| d1.t_done);
            if let Some((_, a1)) = prior {
                if a2 <= a1 {
                    r.violation(
                        "retry-attempt",
                        format!("{txid} delivered again with attempt {a2} after attempt {a1}"),
                    );
                }
            }
        }
    }
}

fn nothing_lost(r: &mut Report, j: &RetryJournal) {
    let stored: HashSet<&str> = j.stored.iter().map(|(_, t)| t.as_str()).collect();
    let delivered: HashSet<&str> = j
        .pops
        .iter()
        .flat_map(|p| p.messages.iter().map(|(t, _)| t.as_str()))
        .collect();
    for t in &j.pushed {
        if !stored.contains(t.as_str()) {
            r.violation("retry-lost", format!("{t} was answered but is not stored"));
        }
    }
    for (p, t) in &j.stored {
        if !delivered.contains(t.as_str()) {
            r.violation("retry-lost", format!("{t} of {p} was never delivered"));
        }
    }
    for (p, left) in &j.behind {
        r.violation(
            "retry-lost",
            format!("the group's cursor on {p} is {left} short of the end after the drain"),
        );
    }
}

#[cfg(test)]
#[path = "retry_delay_tests.rs"]
mod tests;
