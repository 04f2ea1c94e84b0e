//! What this replica did per queue and per minute, and its share of the
//! cluster totals, counted in memory until the stats job adds them to
//! PostgreSQL (`store/activity.rs`). The reference's per-queue series
//! (`queen_queue_*_per_minute{queue}`) and cluster counters
//! (`queen_cluster_*_total`) are read back from there at the scrape
//! (`broker/reference_series.rs`), so every replica answers the same figures.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use chrono::{DateTime, Utc};

use super::Broker;
use crate::config::Config;
use crate::store::{
    AckItem, AckOutcome, AckStatus, ActivityFlush, AppendStatus, StoreError, TxOperation,
    TxOutcome, ACTIVITY_COLUMNS,
};

/// Minutes kept in memory while PostgreSQL cannot take them (an outage):
/// older ones are dropped (the per-minute figures of that time are lost, the
/// cluster totals are not: they are kept apart).
const MAX_PENDING_MINUTES: usize = 60;

/// Counts of one queue in one minute on this replica.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct QueueCounts {
    pub push_requests: i64,
    pub push_messages: i64,
    pub pop_requests: i64,
    pub pop_messages: i64,
    pub pop_empty: i64,
    /// Sum over the messages handed out of (pop time − push time), in ms.
    pub pop_lag_ms: i64,
    pub ack_requests: i64,
    pub ack_success: i64,
    pub ack_failed: i64,
    pub ack_dlq: i64,
    pub transactions: i64,
}

impl QueueCounts {
    /// The counts in the column order of `queen.queue_activity`
    /// ([`crate::store::ACTIVITY_COLUMNS`]).
    pub fn values(&self) -> [i64; ACTIVITY_COLUMNS.len()] {
        [
            self.push_requests,
            self.push_messages,
            self.pop_requests,
            self.pop_messages,
            self.pop_empty,
            self.pop_lag_ms,
            self.ack_requests,
            self.ack_success,
            self.ack_failed,
            self.ack_dlq,
            self.transactions,
        ]
    }

    fn add(&mut self, o: &Self) {
        self.push_requests += o.push_requests;
        self.push_messages += o.push_messages;
        self.pop_requests += o.pop_requests;
        self.pop_messages += o.pop_messages;
        self.pop_empty += o.pop_empty;
        self.pop_lag_ms += o.pop_lag_ms;
        self.ack_requests += o.ack_requests;
        self.ack_success += o.ack_success;
        self.ack_failed += o.ack_failed;
        self.ack_dlq += o.ack_dlq;
        self.transactions += o.transactions;
    }
}

/// The cluster counters, as `(name in queen.cluster_counters, delta)`; the
/// names are the Prometheus family without `queen_cluster_` and `_total`.
pub const CLUSTER_COUNTERS: [&str; 11] = [
    "push_messages",
    "push_requests",
    "pop_messages",
    "pop_requests",
    "ack_requests",
    "ack_success",
    "ack_failed",
    "ack_dlq",
    "ack_refused",
    "transactions",
    "db_errors",
];

/// How one ack ended, for the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckResult {
    /// `completed` applied: the cursor moved.
    Success,
    /// `failed` or `retry` applied: the message goes back for redelivery.
    Failed,
    /// Applied, and the message was dead-lettered.
    Dlq,
    /// Not applied (a lease no longer held, an unknown message).
    Refused,
}

#[derive(Debug, Default)]
struct Pending {
    /// Epoch minute → queue → counts.
    minutes: BTreeMap<i64, HashMap<String, QueueCounts>>,
    cluster: [i64; CLUSTER_COUNTERS.len()],
    /// The database error count already added to `cluster` (the store's
    /// counter is cumulative).
    db_errors_seen: u64,
}

/// One flush: the per-minute rows and the cluster deltas.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Drained {
    pub rows: Vec<(DateTime<Utc>, String, QueueCounts)>,
    pub cluster: [i64; CLUSTER_COUNTERS.len()],
}

impl Drained {
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty() && self.cluster.iter().all(|&n| n == 0)
    }
}

/// This replica's counts not yet in PostgreSQL.
#[derive(Debug, Default)]
pub struct Activity {
    pending: Mutex<Pending>,
}

fn epoch_minute(at: SystemTime) -> i64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs() / 60).unwrap_or(i64::MAX))
}

fn counter_index(name: &str) -> usize {
    CLUSTER_COUNTERS
        .iter()
        .position(|&n| n == name)
        .unwrap_or_else(|| unreachable!("cluster counter {name} is listed"))
}

impl Activity {
    /// Adds `f`'s changes to `queue`'s counts of the current minute and
    /// `cluster` to the cluster deltas.
    fn record(
        &self,
        queue: Option<&str>,
        f: impl FnOnce(&mut QueueCounts),
        cluster: &[(&str, i64)],
    ) {
        self.record_at(SystemTime::now(), queue, f, cluster);
    }

    fn record_at(
        &self,
        at: SystemTime,
        queue: Option<&str>,
        f: impl FnOnce(&mut QueueCounts),
        cluster: &[(&str, i64)],
    ) {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(queue) = queue {
            let minute = p.minutes.entry(epoch_minute(at)).or_default();
            match minute.get_mut(queue) {
                Some(c) => f(c),
                None => {
                    let mut c = QueueCounts::default();
                    f(&mut c);
                    minute.insert(queue.to_owned(), c);
                }
            }
            while p.minutes.len() > MAX_PENDING_MINUTES {
                p.minutes.pop_first();
            }
        }
        for &(name, n) in cluster {
            p.cluster[counter_index(name)] += n;
        }
    }

    /// A request that wrote `messages` new messages to `queue`.
    pub fn pushed(&self, queue: &str, messages: i64) {
        self.record(
            Some(queue),
            |c| {
                c.push_requests += 1;
                c.push_messages += messages;
            },
            &[("push_messages", messages)],
        );
    }

    /// One push request (whatever queues it wrote to).
    pub fn push_request(&self) {
        self.record(None, |_| {}, &[("push_requests", 1)]);
    }

    /// A pop of `queue` (`None`: a namespace pop that found nothing) that
    /// handed out messages pushed at `created` (none: answered empty).
    pub fn popped(&self, queue: Option<&str>, created: impl IntoIterator<Item = DateTime<Utc>>) {
        let now = Utc::now();
        let (mut n, mut lag) = (0i64, 0i64);
        for t in created {
            n += 1;
            lag += (now - t).num_milliseconds().max(0);
        }
        self.record(
            queue,
            |c| {
                c.pop_requests += 1;
                c.pop_messages += n;
                c.pop_empty += i64::from(n == 0);
                c.pop_lag_ms += lag;
            },
            &[("pop_requests", 1), ("pop_messages", n)],
        );
    }

    /// The acks one request applied, `(queue, result)` each (queue `None`
    /// when the ack was refused before a queue was known).
    pub fn acked<'a>(&self, acks: impl IntoIterator<Item = (Option<&'a str>, AckResult)>) {
        let mut by_queue: BTreeMap<Option<&str>, [i64; 4]> = BTreeMap::new();
        for (queue, result) in acks {
            by_queue.entry(queue).or_default()[result as usize] += 1;
        }
        let mut total = [0i64; 4];
        for (queue, n) in &by_queue {
            for (t, v) in total.iter_mut().zip(n) {
                *t += v;
            }
            if let Some(queue) = queue {
                self.record(
                    Some(queue),
                    |c| {
                        c.ack_requests += 1;
                        c.ack_success += n[AckResult::Success as usize];
                        c.ack_failed += n[AckResult::Failed as usize];
                        c.ack_dlq += n[AckResult::Dlq as usize];
                    },
                    &[],
                );
            }
        }
        self.record(
            None,
            |_| {},
            &[
                ("ack_requests", 1),
                ("ack_success", total[AckResult::Success as usize]),
                ("ack_failed", total[AckResult::Failed as usize]),
                ("ack_dlq", total[AckResult::Dlq as usize]),
                ("ack_refused", total[AckResult::Refused as usize]),
            ],
        );
    }

    /// A committed transaction that touched `queues` (each counted once).
    pub fn transaction<'a>(&self, queues: impl IntoIterator<Item = &'a str>) {
        let mut queues: Vec<&str> = queues.into_iter().collect();
        queues.sort_unstable();
        queues.dedup();
        for q in queues {
            self.record(Some(q), |c| c.transactions += 1, &[]);
        }
        self.record(None, |_| {}, &[("transactions", 1)]);
    }

    /// Takes everything counted so far, with the database errors counted
    /// since the last take (`db_errors_total` is the store's cumulative count).
    pub fn drain(&self, db_errors_total: u64) -> Drained {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let new_errors = db_errors_total.saturating_sub(p.db_errors_seen);
        p.db_errors_seen = db_errors_total;
        p.cluster[counter_index("db_errors")] += i64::try_from(new_errors).unwrap_or(i64::MAX);
        let minutes = std::mem::take(&mut p.minutes);
        let cluster = std::mem::take(&mut p.cluster);
        let rows = minutes
            .into_iter()
            .flat_map(|(m, queues)| {
                let at = DateTime::from_timestamp(m * 60, 0).unwrap_or_default();
                queues.into_iter().map(move |(q, c)| (at, q, c))
            })
            .collect();
        Drained { rows, cluster }
    }

    /// Puts back what a failed flush took, to go with the next one.
    pub fn restore(&self, d: Drained) {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        for (at, queue, counts) in d.rows {
            p.minutes
                .entry(at.timestamp() / 60)
                .or_default()
                .entry(queue)
                .or_default()
                .add(&counts);
        }
        while p.minutes.len() > MAX_PENDING_MINUTES {
            p.minutes.pop_first();
        }
        for (t, v) in p.cluster.iter_mut().zip(d.cluster) {
            *t += v;
        }
    }
}

/// How an ack ended, from its outcome and the status the client sent.
pub fn ack_result(success: bool, dlq: bool, status: &AckStatus) -> AckResult {
    match (success, dlq) {
        (false, _) => AckResult::Refused,
        (true, true) => AckResult::Dlq,
        (true, false) if *status == AckStatus::Completed => AckResult::Success,
        (true, false) => AckResult::Failed,
    }
}

/// How recent a replica's presence row must be for it to count as live (and
/// its parked pops to count): three stats intervals and a margin.
pub fn fresh_secs(config: &Config) -> f64 {
    3.0 * config.jobs.stats_interval.as_secs_f64() + 5.0
}

impl Broker {
    /// Counts one request's pushes: the queue of each message it wrote.
    pub(super) fn count_pushed<'a>(&self, queued: impl IntoIterator<Item = &'a str>) {
        let mut by_queue: BTreeMap<&str, i64> = BTreeMap::new();
        for q in queued {
            *by_queue.entry(q).or_default() += 1;
        }
        self.activity.push_request();
        for (q, n) in by_queue {
            self.activity.pushed(q, n);
        }
    }

    /// Counts one pop: `queue` (`None` for a namespace pop answered empty)
    /// and the push times of the messages it handed out.
    pub(super) fn count_popped(
        &self,
        queue: Option<&str>,
        created: impl IntoIterator<Item = DateTime<Utc>>,
    ) {
        self.activity.popped(queue, created);
    }

    /// Counts one ack request: its outcomes, each with the status sent.
    pub(super) fn count_acked(&self, outcomes: &[AckOutcome], items: &[AckItem]) {
        self.activity.acked(outcomes.iter().map(|o| {
            let status = items
                .get(o.index)
                .map_or(&AckStatus::Completed, |i| &i.status);
            (
                o.queue_name.as_deref(),
                ack_result(o.success, o.dlq, status),
            )
        }));
    }

    /// Counts a committed transaction: its pushes, its acks, the queues it touched.
    pub(super) fn count_transaction(&self, outcomes: &[TxOutcome], ops: &[TxOperation]) {
        let mut pushed = Vec::new();
        let mut acks = Vec::new();
        let mut queues = Vec::new();
        for (o, op) in outcomes.iter().zip(ops) {
            match (o, op) {
                (TxOutcome::Pushed(a), TxOperation::Push { queue, .. }) => {
                    queues.push(queue.as_str());
                    if a.status == AppendStatus::Queued {
                        pushed.push(queue.as_str());
                    }
                }
                (TxOutcome::Acked(a), TxOperation::Ack { item, .. }) => {
                    if let Some(q) = a.queue_name.as_deref() {
                        queues.push(q);
                    }
                    acks.push((
                        a.queue_name.as_deref(),
                        ack_result(a.success, a.dlq, &item.status),
                    ));
                }
                _ => {}
            }
        }
        if !pushed.is_empty() {
            self.count_pushed(pushed);
        }
        if !acks.is_empty() {
            self.activity.acked(acks);
        }
        self.activity.transaction(queues);
    }

    /// Adds what this replica counted since its last flush to PostgreSQL,
    /// with its presence and parked pops; on failure keeps it for the next.
    pub async fn flush_activity(&self) -> Result<(), StoreError> {
        let drained = self.activity.drain(self.store.db_errors_total());
        let mut flush = ActivityFlush {
            instance: self.instance,
            server_id: &self.config.server_id,
            parked: self
                .waker
                .parked_counts()
                .into_iter()
                // the key of namespace pops, and ephemeral queues' keys
                .filter(|(q, _)| q != super::ANY_QUEUE_KEY && !q.starts_with('\0'))
                .map(|(q, n)| (q, i32::try_from(n).unwrap_or(i32::MAX)))
                .collect(),
            ..ActivityFlush::default()
        };
        for (minute, queue, counts) in &drained.rows {
            flush.minutes.push(*minute);
            flush.queues.push(queue.clone());
            for (column, v) in flush.columns.iter_mut().zip(counts.values()) {
                column.push(v);
            }
        }
        flush.counters = CLUSTER_COUNTERS
            .iter()
            .zip(drained.cluster)
            .filter(|(_, n)| *n != 0)
            .map(|(name, n)| (*name, n))
            .collect();
        let result = self.store.flush_activity(&flush).await;
        if result.is_err() {
            self.activity.restore(drained);
        }
        result
    }

    /// The last flush of a stopping broker, then its presence row deleted
    /// (it is no longer counted in `queen_servers`).
    pub async fn stop_activity(&self) -> Result<(), StoreError> {
        if !self.store.is_ready() {
            return Ok(());
        }
        self.flush_activity().await?;
        self.store.forget_presence(self.instance).await
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn cluster(d: &Drained, name: &str) -> i64 {
        d.cluster[counter_index(name)]
    }

    #[test]
    fn counts_land_in_their_queue_and_minute() {
        let a = Activity::default();
        let t0 = UNIX_EPOCH + Duration::from_secs(600 * 60 + 59);
        let t1 = t0 + Duration::from_secs(1);
        a.record_at(
            t0,
            Some("q"),
            |c| c.push_messages += 2,
            &[("push_messages", 2)],
        );
        a.record_at(
            t1,
            Some("q"),
            |c| c.push_messages += 3,
            &[("push_messages", 3)],
        );
        a.record_at(t1, Some("r"), |c| c.pop_empty += 1, &[]);
        let d = a.drain(0);
        let mut rows = d.rows.clone();
        rows.sort_by(|x, y| (x.0, &x.1).cmp(&(y.0, &y.1)));
        let minute = |m: i64| DateTime::from_timestamp(m * 60, 0).unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!((rows[0].0, rows[0].1.as_str()), (minute(600), "q"));
        assert_eq!(rows[0].2.push_messages, 2);
        assert_eq!((rows[1].0, rows[1].1.as_str()), (minute(601), "q"));
        assert_eq!(rows[1].2.push_messages, 3);
        assert_eq!(rows[2].2.pop_empty, 1);
        assert_eq!(cluster(&d, "push_messages"), 5);
        assert!(a.drain(0).is_empty(), "a drain takes everything");
    }

    #[test]
    fn acks_count_per_queue_and_result_and_requests_once() {
        let a = Activity::default();
        a.acked([
            (Some("q"), AckResult::Success),
            (Some("q"), AckResult::Dlq),
            (Some("r"), AckResult::Failed),
            (None, AckResult::Refused),
        ]);
        let d = a.drain(0);
        let q = d.rows.iter().find(|r| r.1 == "q").unwrap().2;
        let r = d.rows.iter().find(|r| r.1 == "r").unwrap().2;
        assert_eq!(
            (q.ack_requests, q.ack_success, q.ack_dlq, q.ack_failed),
            (1, 1, 1, 0)
        );
        assert_eq!((r.ack_requests, r.ack_failed), (1, 1));
        assert_eq!(cluster(&d, "ack_requests"), 1);
        assert_eq!(cluster(&d, "ack_success"), 1);
        assert_eq!(cluster(&d, "ack_failed"), 1);
        assert_eq!(cluster(&d, "ack_dlq"), 1);
        assert_eq!(cluster(&d, "ack_refused"), 1);
    }

    #[test]
    fn database_errors_count_what_is_new_since_the_last_drain() {
        let a = Activity::default();
        assert_eq!(cluster(&a.drain(4), "db_errors"), 4);
        assert_eq!(cluster(&a.drain(4), "db_errors"), 0);
        assert_eq!(cluster(&a.drain(7), "db_errors"), 3);
    }

    #[test]
    fn a_failed_flush_is_put_back_and_merged() {
        let a = Activity::default();
        a.pushed("q", 2);
        let d = a.drain(1);
        a.pushed("q", 1);
        a.restore(d);
        let d = a.drain(1);
        assert_eq!(d.rows.len(), 1);
        assert_eq!(d.rows[0].2.push_messages, 3);
        assert_eq!(d.rows[0].2.push_requests, 2);
        assert_eq!(cluster(&d, "push_messages"), 3);
        assert_eq!(cluster(&d, "db_errors"), 1);
    }

    #[test]
    fn an_outage_keeps_at_most_the_newest_minutes() {
        let a = Activity::default();
        for m in 0..(MAX_PENDING_MINUTES as u64 + 5) {
            let at = UNIX_EPOCH + Duration::from_secs(m * 60);
            a.record_at(at, Some("q"), |c| c.pop_empty += 1, &[("pop_requests", 1)]);
        }
        let d = a.drain(0);
        assert_eq!(d.rows.len(), MAX_PENDING_MINUTES);
        assert_eq!(d.rows[0].0.timestamp(), 5 * 60);
        assert_eq!(cluster(&d, "pop_requests"), MAX_PENDING_MINUTES as i64 + 5);
    }

    #[test]
    fn a_transaction_counts_each_queue_once() {
        let a = Activity::default();
        a.transaction(["q", "r", "q"]);
        let d = a.drain(0);
        assert_eq!(d.rows.len(), 2);
        assert!(d.rows.iter().all(|r| r.2.transactions == 1));
        assert_eq!(cluster(&d, "transactions"), 1);
    }
}
