//! Firing one due timer inside the sweep's transaction, and what a failed
//! fire does to it.
//!
//! Each fire runs under a savepoint, so a timer whose message the database
//! refuses does not take the rest of the sweep down with it. A failed fire
//! leaves the timer pending (and cancellable): a transient failure (a
//! serialization conflict, a deadlock, a statement or lock timeout) moves it
//! 1 s later without spending an attempt; any other refusal spends one and
//! backs off `min(1 s · 2^attempts, 60 s)`, counting the attempts before this
//! one. The fifth permanent failure dead-letters it into its destination
//! queue's DLQ under the group `__timer__` and removes it. When the database
//! itself goes away the error ends the whole sweep: its transaction is
//! gone, nothing was spent, and the next sweep tries again.
//!
//! A recurring timer fires as the tick `recurrence.rs` picks, under the
//! transactionId of that tick (`fire_txn`), and is then re-armed at its
//! next tick with a fresh message id instead of deleted; a fire skipped by
//! `catchUp: none` only re-arms it. Its fifth permanent failure
//! dead-letters that tick's message and re-arms the timer as well.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use uuid::Uuid;

use super::push::append_bounded;
use super::queues::ensure_queue_with;
use super::recurrence::{fire_txn, Recurrence};
use super::{col, full_queue_error, AppendStatus, NewMessage, StoreError};

/// Permanent failures after which a timer is dead-lettered.
pub const MAX_FIRE_ATTEMPTS: i32 = 5;
/// The consumer group of timer dead letters.
pub const TIMER_DLQ_GROUP: &str = "__timer__";
/// Longest back-off after a permanent failure, in seconds.
const MAX_BACKOFF_SECS: i64 = 60;

/// A due timer as the sweep read it.
#[derive(Debug, Clone)]
pub(super) struct DueTimer {
    pub queue: String,
    pub timer_key: String,
    pub partition: String,
    pub txn: String,
    pub message_id: Uuid,
    pub payload: String,
    pub producer_sub: Option<String>,
    pub attempts: i32,
    /// Set for a recurring timer, with the tick it is armed for.
    pub recurrence: Option<(Recurrence, DateTime<Utc>)>,
    /// The database clock when the sweep took it.
    pub now: DateTime<Utc>,
}

impl DueTimer {
    pub fn from_row(r: &tokio_postgres::Row) -> Result<Self, StoreError> {
        Ok(Self {
            queue: col(r, "queue")?,
            timer_key: col(r, "timer_key")?,
            partition: col(r, "partition")?,
            txn: col(r, "txn")?,
            message_id: col(r, "message_id")?,
            payload: col(r, "payload")?,
            producer_sub: col(r, "producer_sub")?,
            attempts: col(r, "attempts")?,
            recurrence: recurrence_of(r)?,
            now: col(r, "now")?,
        })
    }
}

fn recurrence_of(
    r: &tokio_postgres::Row,
) -> Result<Option<(Recurrence, DateTime<Utc>)>, StoreError> {
    let (interval_ms, cron, timezone, catch_up): (
        Option<i64>,
        Option<String>,
        Option<String>,
        Option<String>,
    ) = (
        col(r, "interval_ms")?,
        col(r, "cron")?,
        col(r, "timezone")?,
        col(r, "catch_up")?,
    );
    let tick_at: Option<DateTime<Utc>> = col(r, "tick_at")?;
    let stored = Recurrence::from_stored(
        interval_ms,
        cron.as_deref(),
        timezone.as_deref(),
        catch_up.as_deref(),
    );
    Ok(match (stored, tick_at) {
        (Ok(Some(rec)), Some(tick)) => Some((rec, tick)),
        (Ok(_), _) => None,
        (Err(e), _) => {
            // validated when scheduled; only a parser that changed its mind
            // gets here: the timer fires once more and is done
            tracing::warn!(error = %e, "stored timer schedule no longer parses; firing it as one-shot");
            None
        }
    })
}

/// What the fire of a due timer is: the transactionId of its message, and
/// for a recurring timer the tick it re-arms at.
struct Plan {
    txn: String,
    rearm_at: Option<DateTime<Utc>>,
}

/// `None`: a recurring timer whose missed ticks are skipped; it only
/// re-arms, at the returned tick.
fn plan(t: &DueTimer) -> Result<Plan, DateTime<Utc>> {
    let Some((rec, armed)) = &t.recurrence else {
        return Ok(Plan {
            txn: t.txn.clone(),
            rearm_at: None,
        });
    };
    match rec.due(*armed, t.now) {
        Some(d) => match d.fire_as {
            Some(tick) => Ok(Plan {
                txn: fire_txn(&t.txn, tick),
                rearm_at: Some(d.next),
            }),
            None => Err(d.next),
        },
        // no tick follows: this fire is its last
        None => Ok(Plan {
            txn: fire_txn(&t.txn, *armed),
            rearm_at: None,
        }),
    }
}

/// What became of one due timer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FireOutcome {
    /// Appended (`duplicate`: its txn was already in the partition, nothing appended).
    Fired { duplicate: bool },
    /// Failed; pending again after a back-off.
    Retrying { transient: bool },
    /// Failed for the last time; now in the DLQ.
    DeadLettered,
    /// A recurring timer's missed ticks skipped (`catchUp: none`); re-armed.
    Skipped,
}

/// Seconds until the next try after a failure: 1 s for a transient one
/// (no attempt spent), `min(2^attempts, 60)` after a permanent one, where
/// `attempts` counts the permanent failures before this one.
pub fn backoff_secs(attempts_before: i32, transient: bool) -> i64 {
    if transient {
        1
    } else {
        1i64.checked_shl(attempts_before.clamp(0, 30) as u32)
            .unwrap_or(MAX_BACKOFF_SECS)
            .min(MAX_BACKOFF_SECS)
    }
}

/// True when a failed fire is worth retrying without spending an attempt.
fn is_transient(e: &StoreError) -> bool {
    matches!(e, StoreError::Conflict(_) | StoreError::Timeout(_))
}

/// True when the error ends the whole sweep (the database is away or the
/// transaction cannot go on).
fn ends_the_sweep(e: &StoreError) -> bool {
    e.is_unavailable()
}

async fn append(client: &impl GenericClient, t: &DueTimer, txn: &str) -> Result<bool, StoreError> {
    let (namespace, task) = match queen_proto::QueueName::new(&t.queue) {
        Ok(q) => q.derived_namespace_task(),
        Err(_) => (String::new(), String::new()),
    };
    let row = ensure_queue_with(client, &t.queue, &namespace, &task).await?;
    let msg = NewMessage {
        queue_id: row.id,
        partition: t.partition.clone(),
        message_id: t.message_id,
        transaction_id: txn.to_owned(),
        trace_id: None,
        payload: t.payload.clone(),
        producer_sub: t.producer_sub.clone(),
    };
    // a queue at its maxSize refuses the fire: a permanent failure (fire_one)
    let bounded = [row.options.max_size > 0];
    let outcome = append_bounded(client, std::slice::from_ref(&msg), false, &bounded, None).await?;
    match outcome.first().map(|o| o.status) {
        Some(AppendStatus::Full(max_size)) => {
            Err(StoreError::rejected(full_queue_error(&t.queue, max_size)))
        }
        status => Ok(status == Some(AppendStatus::Duplicate)),
    }
}

/// Removes a one-shot timer, or moves a recurring one to the tick
/// `rearm_at` with a fresh message id (`fired`: count this fire).
async fn done(
    client: &impl GenericClient,
    t: &DueTimer,
    rearm_at: Option<DateTime<Utc>>,
    fired: bool,
) -> Result<(), StoreError> {
    match rearm_at {
        None => {
            client
                .execute(
                    "DELETE FROM queen.timers WHERE queue = $1 AND timer_key = $2",
                    &[&t.queue, &t.timer_key],
                )
                .await?
        }
        Some(at) => {
            client
                .execute(
                    "UPDATE queen.timers
                        SET tick_at = $3, deliver_at = $3, message_id = $4, attempts = 0,
                            last_error = NULL, fires = fires + $5, updated_at = clock_timestamp()
                      WHERE queue = $1 AND timer_key = $2",
                    &[
                        &t.queue,
                        &t.timer_key,
                        &at,
                        &Uuid::now_v7(),
                        &i64::from(fired),
                    ],
                )
                .await?
        }
    };
    Ok(())
}

/// Fires `t` under a savepoint; on failure records it as the module says.
pub(super) async fn fire_one(
    client: &impl GenericClient,
    t: &DueTimer,
) -> Result<FireOutcome, StoreError> {
    let plan = match plan(t) {
        Ok(p) => p,
        Err(next) => {
            done(client, t, Some(next), false).await?;
            return Ok(FireOutcome::Skipped);
        }
    };
    client.batch_execute("SAVEPOINT timer_fire").await?;
    let err = match append(client, t, &plan.txn).await {
        Ok(duplicate) => {
            client.batch_execute("RELEASE SAVEPOINT timer_fire").await?;
            done(client, t, plan.rearm_at, true).await?;
            return Ok(FireOutcome::Fired { duplicate });
        }
        Err(e) if ends_the_sweep(&e) => return Err(e),
        Err(e) => e,
    };
    client
        .batch_execute("ROLLBACK TO SAVEPOINT timer_fire; RELEASE SAVEPOINT timer_fire")
        .await?;
    let transient = is_transient(&err);
    let message = err.to_string();
    tracing::warn!(queue = %t.queue, timer_key = %t.timer_key, attempts = t.attempts,
                   transient, error = %message, "timer fire failed");
    let attempts = if transient {
        t.attempts
    } else {
        t.attempts + 1
    };
    if attempts >= MAX_FIRE_ATTEMPTS {
        client.batch_execute("SAVEPOINT timer_dlq").await?;
        match dead_letter(client, t, &plan.txn, attempts, &message).await {
            Ok(()) => {
                client.batch_execute("RELEASE SAVEPOINT timer_dlq").await?;
                done(client, t, plan.rearm_at, false).await?;
                return Ok(FireOutcome::DeadLettered);
            }
            Err(e) if ends_the_sweep(&e) => return Err(e),
            Err(e) => {
                client
                    .batch_execute("ROLLBACK TO SAVEPOINT timer_dlq; RELEASE SAVEPOINT timer_dlq")
                    .await?;
                tracing::warn!(queue = %t.queue, timer_key = %t.timer_key, error = %e,
                               "timer dead-letter failed; trying again later");
            }
        }
    }
    client
        .execute(
            "UPDATE queen.timers
                SET attempts = $3, last_error = $4, updated_at = clock_timestamp(),
                    deliver_at = clock_timestamp() + make_interval(secs => $5::bigint)
              WHERE queue = $1 AND timer_key = $2",
            &[
                &t.queue,
                &t.timer_key,
                &attempts.min(MAX_FIRE_ATTEMPTS - 1),
                &message,
                &backoff_secs(t.attempts, transient).max(if attempts >= MAX_FIRE_ATTEMPTS {
                    MAX_BACKOFF_SECS
                } else {
                    0
                }),
            ],
        )
        .await?;
    Ok(FireOutcome::Retrying { transient })
}

/// Writes `t` into the DLQ of its destination partition under `__timer__`.
/// The DLQ keeps one row per (partition, group, offset), and a timer has no
/// offset: the first timer dead letter of a partition takes offset −1, the
/// next −2, and so on.
async fn dead_letter(
    client: &impl GenericClient,
    t: &DueTimer,
    txn: &str,
    attempts: i32,
    error: &str,
) -> Result<(), StoreError> {
    let (namespace, task) = match queen_proto::QueueName::new(&t.queue) {
        Ok(q) => q.derived_namespace_task(),
        Err(_) => (String::new(), String::new()),
    };
    let queue = ensure_queue_with(client, &t.queue, &namespace, &task).await?;
    client
        .execute(
            "INSERT INTO queen.partitions (id, queue_id, name) VALUES (gen_random_uuid(), $1, $2)
             ON CONFLICT (queue_id, name) DO NOTHING",
            &[&queue.id, &t.partition],
        )
        .await?;
    client
        .execute(
            "INSERT INTO queen.dead_letters (partition_id, consumer_group, msg_offset, message_id,
                 transaction_id, trace_id, payload, producer_sub, error_message, retry_count,
                 original_created_at)
             SELECT pt.id, $3,
                    least(-1, coalesce((SELECT min(d.msg_offset) FROM queen.dead_letters d
                                         WHERE d.partition_id = pt.id AND d.consumer_group = $3), 0) - 1),
                    $4, $5, NULL, $6, $7, $8, $9, tm.created_at
               FROM queen.partitions pt
               JOIN queen.timers tm ON tm.queue = $10 AND tm.timer_key = $11
              WHERE pt.queue_id = $1 AND pt.name = $2",
            &[
                &queue.id,
                &t.partition,
                &TIMER_DLQ_GROUP,
                &t.message_id,
                &txn,
                &t.payload,
                &t.producer_sub,
                &error,
                &attempts,
                &t.queue,
                &t.timer_key,
            ],
        )
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_a_minute_and_transient_failures_wait_a_second() {
        let got: Vec<i64> = (0..8).map(|a| backoff_secs(a, false)).collect();
        assert_eq!(got, [1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(backoff_secs(3, true), 1);
        assert_eq!(backoff_secs(1000, false), 60);
    }
}
