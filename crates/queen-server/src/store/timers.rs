//! Timers (`POST/GET/DELETE /api/v1/timers`, the `timers` rider of
//! `/transaction`) and their firing.
//!
//! A schedule is an upsert on (queue, timer_key). Firing takes due rows with
//! `FOR UPDATE SKIP LOCKED`, appends each one's message through
//! `queen.push_batch` (its transactionId is the timer's txn, its id the
//! promised message id) and deletes the row, all in one transaction: a timer
//! fires once or not at all, whatever number of replicas sweep. A cancel that
//! meets a timer being fired waits for that transaction and then finds
//! nothing (`absent`), so `too_late` is never answered.
//!
//! A recurring timer (`store/recurrence.rs`) is re-armed by its fire instead
//! of deleted: the same transaction appends the tick's message and moves the
//! row to the next tick, so each tick fires once whatever number of replicas
//! sweep, and a cancel removes the schedule.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use uuid::Uuid;

use super::op::{with_op, DbOp};
use super::recurrence::Recurrence;
use super::timer_fire::{fire_one, DueTimer, FireOutcome};
use super::{col, Store, StoreError};

/// Advisory lock (transaction scope) that lets one replica sweep at a time.
const SWEEP_LOCK_KEY: i64 = 0x7175_6565_6e74_696d; // "queentim"

/// A validated schedule or reschedule.
#[derive(Debug, Clone)]
pub struct TimerSchedule {
    pub queue: String,
    pub timer_key: String,
    pub partition: String,
    pub delay_ms: i64,
    /// The first fire at this absolute time instead of `delay_ms` (a cron
    /// timer without `delayMs`: its first tick).
    pub first_at: Option<DateTime<Utc>>,
    /// Set for a recurring timer.
    pub recurrence: Option<Recurrence>,
    pub txn: String,
    pub message_id: Uuid,
    /// The message payload as JSON text (sealed when the queue encrypts).
    pub payload: String,
    pub encrypted: bool,
    pub producer_sub: Option<String>,
}

/// One timer write.
#[derive(Debug, Clone)]
pub enum TimerWrite {
    Schedule(TimerSchedule),
    Cancel {
        queue: String,
        timer_key: String,
        txn: Option<String>,
    },
}

impl TimerWrite {
    pub fn queue(&self) -> &str {
        match self {
            Self::Schedule(s) => &s.queue,
            Self::Cancel { queue, .. } => queue,
        }
    }

    pub fn timer_key(&self) -> &str {
        match self {
            Self::Schedule(s) => &s.timer_key,
            Self::Cancel { timer_key, .. } => timer_key,
        }
    }
}

/// The verdict of one timer write.
#[derive(Debug, Clone)]
pub enum TimerVerdict {
    Scheduled {
        rescheduled: bool,
        txn: String,
        message_id: Uuid,
        deliver_at: DateTime<Utc>,
    },
    Cancelled {
        txn: String,
    },
    Absent {
        txn: Option<String>,
    },
}

/// A pending timer as peek and list show it.
#[derive(Debug, Clone)]
pub struct TimerRow {
    pub queue: String,
    pub timer_key: String,
    pub partition: String,
    pub deliver_at: DateTime<Utc>,
    pub txn: String,
    pub message_id: Uuid,
    pub payload: Option<String>,
    pub encrypted: bool,
    pub producer_sub: Option<String>,
    pub attempts: i32,
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Recurring timers: the schedule as stored, the tick the next fire
    /// stands for, and the fires so far.
    pub interval_ms: Option<i64>,
    pub cron: Option<String>,
    pub timezone: Option<String>,
    pub catch_up: Option<String>,
    pub tick_at: Option<DateTime<Utc>>,
    pub fires: i64,
}

/// A message a sweep appended.
#[derive(Debug, Clone)]
pub struct FiredTimer {
    pub queue: String,
    pub partition: String,
    pub duplicate: bool,
}

/// One sweep: what fired, and when the next pending timer is due.
#[derive(Debug, Clone, Default)]
pub struct Sweep {
    pub fired: Vec<FiredTimer>,
    /// Fires that failed and were put back with a back-off.
    pub retrying: usize,
    /// Timers dead-lettered after their last failed fire.
    pub dead_lettered: usize,
    /// Recurring timers whose missed ticks were skipped (`catchUp: none`).
    pub skipped: usize,
    /// Due timers this sweep took (fired, retrying or dead-lettered).
    pub due: usize,
    /// `false` when another replica held the sweep lock.
    pub swept: bool,
    pub next_due_in_ms: Option<i64>,
}

pub(super) async fn timers_apply(
    client: &impl GenericClient,
    writes: &[TimerWrite],
) -> Result<Vec<TimerVerdict>, StoreError> {
    let mut out = Vec::with_capacity(writes.len());
    for w in writes {
        out.push(match w {
            TimerWrite::Schedule(s) => {
                let (interval_ms, cron, timezone) = s
                    .recurrence
                    .as_ref()
                    .map_or((None, None, None), Recurrence::stored);
                let catch_up = s.recurrence.as_ref().map(|r| r.catch_up.as_str());
                let row = client
                    .query_one(
                        "WITH first_fire AS (
                             SELECT coalesce($10::timestamptz, clock_timestamp()
                                 + make_interval(secs => $4::bigint / 1000.0)) AS at)
                         INSERT INTO queen.timers AS t (queue, timer_key, partition, deliver_at,
                             txn, message_id, payload, encrypted, producer_sub, attempts,
                             last_error, created_at, updated_at, interval_ms, cron, timezone,
                             catch_up, tick_at, fires)
                         SELECT $1, $2, $3, f.at, $5, $6, $7, $8, $9, 0, NULL, clock_timestamp(),
                             clock_timestamp(), $11, $12, $13, $14,
                             CASE WHEN $14::text IS NULL THEN NULL ELSE f.at END, 0
                         FROM first_fire f
                         ON CONFLICT (queue, timer_key) DO UPDATE
                            SET partition = EXCLUDED.partition, deliver_at = EXCLUDED.deliver_at,
                                txn = EXCLUDED.txn, message_id = EXCLUDED.message_id,
                                payload = EXCLUDED.payload, encrypted = EXCLUDED.encrypted,
                                producer_sub = EXCLUDED.producer_sub, attempts = 0,
                                last_error = NULL, updated_at = EXCLUDED.updated_at,
                                interval_ms = EXCLUDED.interval_ms, cron = EXCLUDED.cron,
                                timezone = EXCLUDED.timezone, catch_up = EXCLUDED.catch_up,
                                tick_at = EXCLUDED.tick_at, fires = 0
                         RETURNING (xmax <> 0) AS rescheduled, deliver_at",
                        &[
                            &s.queue,
                            &s.timer_key,
                            &s.partition,
                            &s.delay_ms,
                            &s.txn,
                            &s.message_id,
                            &s.payload,
                            &s.encrypted,
                            &s.producer_sub,
                            &s.first_at,
                            &interval_ms,
                            &cron,
                            &timezone,
                            &catch_up,
                        ],
                    )
                    .await?;
                TimerVerdict::Scheduled {
                    rescheduled: col(&row, "rescheduled")?,
                    txn: s.txn.clone(),
                    message_id: s.message_id,
                    deliver_at: col(&row, "deliver_at")?,
                }
            }
            TimerWrite::Cancel {
                queue,
                timer_key,
                txn,
            } => {
                let row = client
                    .query_opt(
                        "DELETE FROM queen.timers WHERE queue = $1 AND timer_key = $2
                         RETURNING txn",
                        &[queue, timer_key],
                    )
                    .await?;
                match row {
                    Some(r) => TimerVerdict::Cancelled {
                        txn: col(&r, "txn")?,
                    },
                    None => TimerVerdict::Absent { txn: txn.clone() },
                }
            }
        });
    }
    Ok(out)
}

fn timer_row(r: &tokio_postgres::Row, with_payload: bool) -> Result<TimerRow, StoreError> {
    Ok(TimerRow {
        queue: col(r, "queue")?,
        timer_key: col(r, "timer_key")?,
        partition: col(r, "partition")?,
        deliver_at: col(r, "deliver_at")?,
        txn: col(r, "txn")?,
        message_id: col(r, "message_id")?,
        payload: if with_payload {
            Some(col(r, "payload")?)
        } else {
            None
        },
        encrypted: col(r, "encrypted")?,
        producer_sub: col(r, "producer_sub")?,
        attempts: col(r, "attempts")?,
        last_error: col(r, "last_error")?,
        created_at: col(r, "created_at")?,
        updated_at: col(r, "updated_at")?,
        interval_ms: col(r, "interval_ms")?,
        cron: col(r, "cron")?,
        timezone: col(r, "timezone")?,
        catch_up: col(r, "catch_up")?,
        tick_at: col(r, "tick_at")?,
        fires: col(r, "fires")?,
    })
}

impl Store {
    /// Schedules and cancels in one transaction (`POST /api/v1/timers`).
    pub async fn timers_call(
        &self,
        writes: &[TimerWrite],
    ) -> Result<Vec<TimerVerdict>, StoreError> {
        with_op!(self.db, DbOp::Timers, |client| {
            let tx = client.transaction().await?;
            let out = timers_apply(&tx, writes).await?;
            tx.commit().await?;
            Ok(out)
        })
    }

    /// One pending timer.
    pub async fn timer_peek(
        &self,
        queue: &str,
        timer_key: &str,
    ) -> Result<Option<TimerRow>, StoreError> {
        with_op!(self.db, DbOp::Timers, |client| {
            client
                .query_opt(
                    "SELECT * FROM queen.timers WHERE queue = $1 AND timer_key = $2",
                    &[&queue, &timer_key],
                )
                .await?
                .map(|r| timer_row(&r, true))
                .transpose()
        })
    }

    /// A page of a queue's pending timers in key byte order, and whether more follow.
    pub async fn timer_list(
        &self,
        queue: &str,
        after: Option<&str>,
        limit: i64,
    ) -> Result<(Vec<TimerRow>, bool), StoreError> {
        with_op!(self.db, DbOp::Timers, |client| {
            let rows = client
                .query(
                    "SELECT * FROM queen.timers
                     WHERE queue = $1 AND ($2::text IS NULL OR timer_key > $2)
                     ORDER BY timer_key LIMIT $3",
                    &[&queue, &after, &(limit + 1)],
                )
                .await?;
            let more = rows.len() as i64 > limit;
            let page = rows
                .iter()
                .take(limit as usize)
                .map(|r| timer_row(r, false))
                .collect::<Result<Vec<_>, _>>()?;
            Ok((page, more))
        })
    }

    /// Fires up to `batch` due timers in one transaction, when no other
    /// replica is sweeping; also prunes expired KV rows.
    pub async fn sweep_timers(&self, batch: i64) -> Result<Sweep, StoreError> {
        with_op!(self.db, DbOp::TimerSweep, |client| {
            let tx = client.transaction().await?;
            let won: bool = col(
                &tx.query_one(
                    "SELECT pg_try_advisory_xact_lock($1) AS won",
                    &[&SWEEP_LOCK_KEY],
                )
                .await?,
                "won",
            )?;
            if !won {
                return Ok(Sweep::default());
            }
            let due = tx
                .query(
                    "SELECT queue, timer_key, partition, txn, message_id, payload, producer_sub,
                            attempts, interval_ms, cron, timezone, catch_up, tick_at,
                            clock_timestamp() AS now
                     FROM queen.timers WHERE deliver_at <= clock_timestamp()
                     ORDER BY deliver_at LIMIT $1 FOR UPDATE SKIP LOCKED",
                    &[&batch],
                )
                .await?;
            let mut fired = Vec::with_capacity(due.len());
            let (mut retrying, mut dead_lettered, mut skipped) = (0, 0, 0);
            for r in &due {
                let t = DueTimer::from_row(r)?;
                match fire_one(&tx, &t).await? {
                    FireOutcome::Fired { duplicate } => fired.push(FiredTimer {
                        queue: t.queue,
                        partition: t.partition,
                        duplicate,
                    }),
                    FireOutcome::Skipped => skipped += 1,
                    FireOutcome::Retrying { .. } => retrying += 1,
                    FireOutcome::DeadLettered => dead_lettered += 1,
                }
            }
            super::kv::prune_expired(&tx, 1000).await?;
            let next: Option<f64> = col(
                &tx.query_one(
                    "SELECT (extract(epoch FROM min(deliver_at) - clock_timestamp()) * 1000)::float8
                        AS next FROM queen.timers",
                    &[],
                )
                .await?,
                "next",
            )?;
            tx.commit().await?;
            Ok(Sweep {
                fired,
                retrying,
                dead_lettered,
                skipped,
                due: due.len(),
                swept: true,
                next_due_in_ms: next.map(|n| n.max(0.0) as i64),
            })
        })
    }
}
