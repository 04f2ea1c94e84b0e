//! The replicas' activity counts behind the reference's Prometheus series
//! (migration V35): each replica adds what it counted per queue and minute
//! (`queen.queue_activity`) and its share of the cluster totals
//! (`queen.cluster_counters`), and says it is alive with its parked pops
//! (`queen.replica_presence`); a scrape reads the last complete minute, the
//! totals and the live replicas back.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::store::op::{with_op, DbOp};
use crate::store::{col, rows_into, Store, StoreError};

/// Per-minute rows older than this are deleted by the flush (the scrape
/// reads only the last complete minute).
const ACTIVITY_KEEP: &str = "15 minutes";

/// A crashed replica's presence row is deleted this long after it last wrote.
const PRESENCE_KEEP: &str = "1 hour";

/// One flush of a replica: its per-minute rows (one per minute and queue),
/// its cluster deltas, its parked pops per queue.
#[derive(Debug, Default)]
pub struct ActivityFlush<'a> {
    pub instance: Uuid,
    pub server_id: &'a str,
    pub minutes: Vec<DateTime<Utc>>,
    pub queues: Vec<String>,
    /// One column each, in the order of [`ACTIVITY_COLUMNS`].
    pub columns: [Vec<i64>; ACTIVITY_COLUMNS.len()],
    pub counters: Vec<(&'static str, i64)>,
    pub parked: Vec<(String, i32)>,
}

/// The count columns of `queen.queue_activity`.
pub const ACTIVITY_COLUMNS: [&str; 11] = [
    "push_requests",
    "push_messages",
    "pop_requests",
    "pop_messages",
    "pop_empty",
    "pop_lag_ms",
    "ack_requests",
    "ack_success",
    "ack_failed",
    "ack_dlq",
    "transactions",
];

/// One queue's figures over the last complete minute, all replicas together.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueueMinute {
    pub queue: String,
    pub push_messages: i64,
    pub pop_messages: i64,
    pub pop_empty: i64,
    /// Mean of (pop time − push time) over the messages handed out, in ms.
    pub pop_lag_ms: f64,
    /// Acks applied (every result but refused).
    pub acks: i64,
    pub transactions: i64,
    /// Pops parked on the queue now, over the live replicas.
    pub parked: i64,
}

/// What a scrape reads from PostgreSQL for the reference's series.
#[derive(Debug, Clone, Default)]
pub struct ClusterFigures {
    pub queues: Vec<QueueMinute>,
    /// `queen.cluster_counters`, by name.
    pub counters: Vec<(String, i64)>,
    /// Replicas that flushed within the freshness window.
    pub servers: i64,
    /// Dead letters stored.
    pub dlq_depth: i64,
}

impl Store {
    /// Database operations that failed on this replica since start (every
    /// class but `rejected`, a refusal by the SQL logic, and `not_ready`).
    pub fn db_errors_total(&self) -> u64 {
        const NOT_ERRORS: [&str; 2] = ["rejected", "not_ready"];
        self.db
            .collectors()
            .iter()
            .flat_map(|c| c.collect())
            .filter(|family| family.name() == "queen_db_op_errors_total")
            .flat_map(|family| family.get_metric().to_vec())
            .filter(|m| {
                !m.get_label()
                    .iter()
                    .any(|l| l.name() == "class" && NOT_ERRORS.contains(&l.value()))
            })
            .map(|m| m.get_counter().get_value() as u64)
            .sum()
    }

    /// Adds one replica's counts, in one transaction, and deletes per-minute
    /// rows and presence rows past their keep.
    pub async fn flush_activity(&self, f: &ActivityFlush<'_>) -> Result<(), StoreError> {
        let insert = format!(
            "INSERT INTO queen.queue_activity (minute, queue, server_id, {cols})
             SELECT u.minute, u.queue, $3, {ucols}
             FROM unnest($1::timestamptz[], $2::text[], {arrays}) AS u(minute, queue, {cols})
             ON CONFLICT (minute, queue, server_id) DO UPDATE SET {sets}",
            cols = ACTIVITY_COLUMNS.join(", "),
            ucols = ACTIVITY_COLUMNS.map(|c| format!("u.{c}")).join(", "),
            arrays = (0..ACTIVITY_COLUMNS.len())
                .map(|i| format!("${}::bigint[]", i + 4))
                .collect::<Vec<_>>()
                .join(", "),
            sets = ACTIVITY_COLUMNS
                .map(|c| format!("{c} = queen.queue_activity.{c} + excluded.{c}"))
                .join(", "),
        );
        let (names, deltas): (Vec<&str>, Vec<i64>) = f.counters.iter().copied().unzip();
        let (parked_queues, parked): (Vec<&str>, Vec<i32>) =
            f.parked.iter().map(|(q, n)| (q.as_str(), *n)).unzip();
        with_op!(self.db, DbOp::ReplicaStats, |client| {
            let tx = client.transaction().await?;
            if !f.queues.is_empty() {
                let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
                    vec![&f.minutes, &f.queues, &f.server_id];
                params.extend(
                    f.columns
                        .iter()
                        .map(|c| c as &(dyn tokio_postgres::types::ToSql + Sync)),
                );
                tx.execute(insert.as_str(), &params).await?;
            }
            if !names.is_empty() {
                // in name order, so two replicas take the row locks in one order
                tx.execute(
                    "INSERT INTO queen.cluster_counters (name, value)
                     SELECT u.name, u.value FROM unnest($1::text[], $2::bigint[]) AS u(name, value)
                     ORDER BY u.name
                     ON CONFLICT (name) DO UPDATE SET value = queen.cluster_counters.value + excluded.value",
                    &[&names, &deltas],
                )
                .await?;
            }
            tx.execute(
                "INSERT INTO queen.replica_presence (instance, server_id, seen_at, parked)
                 VALUES ($1, $2, now(), coalesce((SELECT jsonb_object_agg(u.queue, u.n)
                          FROM unnest($3::text[], $4::int[]) AS u(queue, n)), '{}'::jsonb))
                 ON CONFLICT (instance) DO UPDATE
                   SET server_id = excluded.server_id, seen_at = excluded.seen_at, parked = excluded.parked",
                &[&f.instance, &f.server_id, &parked_queues, &parked],
            )
            .await?;
            tx.execute(
                &format!(
                    "DELETE FROM queen.queue_activity WHERE minute < now() - interval '{ACTIVITY_KEEP}'"
                ),
                &[],
            )
            .await?;
            tx.execute(
                &format!(
                    "DELETE FROM queen.replica_presence WHERE seen_at < now() - interval '{PRESENCE_KEEP}'"
                ),
                &[],
            )
            .await?;
            tx.commit().await?;
            Ok(())
        })
    }

    /// Deletes this process's presence row (a broker that stops).
    pub async fn forget_presence(&self, instance: Uuid) -> Result<(), StoreError> {
        with_op!(self.db, DbOp::ReplicaStats, |client| {
            client
                .execute(
                    "DELETE FROM queen.replica_presence WHERE instance = $1",
                    &[&instance],
                )
                .await?;
            Ok(())
        })
    }

    /// The figures of the reference's series: per queue the last complete
    /// minute (by the database clock) with the pops parked now, at most
    /// `max_queues` queues, busiest first; the cluster counters; the replicas
    /// seen within `fresh_secs`; the dead letters stored.
    pub async fn cluster_figures(
        &self,
        max_queues: i64,
        fresh_secs: f64,
    ) -> Result<ClusterFigures, StoreError> {
        with_op!(self.db, DbOp::Stats, |client| {
            let rows = client
                .query(
                    "WITH act AS (
                         SELECT queue, sum(push_messages) AS push, sum(pop_messages) AS pop,
                                sum(pop_empty) AS empty, sum(pop_lag_ms) AS lag_ms,
                                sum(ack_success + ack_failed + ack_dlq) AS acks,
                                sum(transactions) AS tx
                         FROM queen.queue_activity
                         WHERE minute = date_trunc('minute', now()) - interval '1 minute'
                         GROUP BY queue
                     ), parked AS (
                         SELECT p.key AS queue, sum(p.value::bigint) AS parked
                         FROM queen.replica_presence r, jsonb_each_text(r.parked) AS p
                         WHERE r.seen_at > now() - make_interval(secs => $2)
                         GROUP BY p.key
                     )
                     SELECT coalesce(a.queue, p.queue) AS queue,
                            coalesce(a.push, 0)::bigint AS push, coalesce(a.pop, 0)::bigint AS pop,
                            coalesce(a.empty, 0)::bigint AS empty,
                            coalesce(a.lag_ms / nullif(a.pop, 0), 0)::double precision AS lag_ms,
                            coalesce(a.acks, 0)::bigint AS acks, coalesce(a.tx, 0)::bigint AS tx,
                            coalesce(p.parked, 0)::bigint AS parked
                     FROM act a FULL JOIN parked p ON p.queue = a.queue
                     ORDER BY coalesce(a.push, 0) + coalesce(a.pop, 0) + coalesce(a.acks, 0)
                              + coalesce(a.empty, 0) + coalesce(a.tx, 0) + coalesce(p.parked, 0) DESC,
                              1
                     LIMIT $1",
                    &[&max_queues, &fresh_secs],
                )
                .await?;
            let queues = rows_into(&rows, |r| {
                Ok(QueueMinute {
                    queue: col(r, "queue")?,
                    push_messages: col(r, "push")?,
                    pop_messages: col(r, "pop")?,
                    pop_empty: col(r, "empty")?,
                    pop_lag_ms: col(r, "lag_ms")?,
                    acks: col(r, "acks")?,
                    transactions: col(r, "tx")?,
                    parked: col(r, "parked")?,
                })
            })?;
            let rows = client
                .query("SELECT name, value FROM queen.cluster_counters", &[])
                .await?;
            let counters = rows_into(&rows, |r| Ok((col(r, "name")?, col(r, "value")?)))?;
            let row = client
                .query_one(
                    "SELECT (SELECT count(*) FROM queen.replica_presence
                             WHERE seen_at > now() - make_interval(secs => $1)) AS servers,
                            (SELECT count(*) FROM queen.dead_letters) AS dlq",
                    &[&fresh_secs],
                )
                .await?;
            Ok(ClusterFigures {
                queues,
                counters,
                servers: col(&row, "servers")?,
                dlq_depth: col(&row, "dlq")?,
            })
        })
    }
}
