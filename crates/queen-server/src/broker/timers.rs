//! Timers: schedule, reschedule and cancel, and the sweep that fires them.

use std::time::Duration;

use queen_proto::{PartitionName, QueueName};
use uuid::Uuid;

use super::{Broker, BrokerError};
use crate::store::recurrence::Recurrence;
use crate::store::{Sweep, TimerSchedule, TimerVerdict, TimerWrite};

/// Timers one sweep fires at most; a full sweep is followed by another at once.
pub const SWEEP_BATCH: i64 = 500;
/// The sweeper looks at least this often, whatever this replica scheduled.
pub const SWEEP_PERIOD: Duration = Duration::from_secs(1);

/// One validated timer request.
#[derive(Debug, Clone)]
pub enum TimerReq {
    Schedule {
        queue: QueueName,
        timer_key: String,
        partition: PartitionName,
        delay_ms: i64,
        /// The first fire at this time instead of after `delay_ms` (a cron
        /// timer without `delayMs`).
        first_at: Option<chrono::DateTime<chrono::Utc>>,
        /// Set for a recurring timer.
        recurrence: Option<Recurrence>,
        txn: Option<String>,
        /// The message payload as JSON text.
        payload: String,
        producer_sub: Option<String>,
    },
    Cancel {
        queue: QueueName,
        timer_key: String,
        txn: Option<String>,
    },
}

impl Broker {
    /// The store's form of `reqs`: message ids minted, payloads sealed for
    /// queues that encrypt.
    pub(super) async fn prepare_timers(
        &self,
        reqs: Vec<TimerReq>,
    ) -> Result<Vec<TimerWrite>, BrokerError> {
        let mut out = Vec::with_capacity(reqs.len());
        for r in reqs {
            out.push(match r {
                TimerReq::Schedule {
                    queue,
                    timer_key,
                    partition,
                    delay_ms,
                    first_at,
                    recurrence,
                    txn,
                    payload,
                    producer_sub,
                } => {
                    let encrypted = self.cipher.is_some()
                        && self
                            .queue(queue.as_str())
                            .await?
                            .is_some_and(|q| q.options.encryption_enabled);
                    TimerWrite::Schedule(TimerSchedule {
                        queue: queue.as_str().to_owned(),
                        timer_key,
                        partition: partition.as_str().to_owned(),
                        delay_ms,
                        first_at,
                        recurrence,
                        txn: txn.unwrap_or_else(|| Uuid::now_v7().to_string()),
                        message_id: Uuid::now_v7(),
                        payload: self.seal(encrypted, &payload)?,
                        encrypted,
                        producer_sub,
                    })
                }
                TimerReq::Cancel {
                    queue,
                    timer_key,
                    txn,
                } => TimerWrite::Cancel {
                    queue: queue.as_str().to_owned(),
                    timer_key,
                    txn,
                },
            });
        }
        Ok(out)
    }

    /// Counts committed timer verdicts and sets the sweeper's alarm for the
    /// soonest timer this replica scheduled.
    pub(super) fn timers_done(&self, writes: &[TimerWrite], verdicts: &[TimerVerdict]) {
        for (w, v) in writes.iter().zip(verdicts) {
            let event = match v {
                TimerVerdict::Scheduled {
                    rescheduled: false, ..
                } => "scheduled",
                TimerVerdict::Scheduled { .. } => "rescheduled",
                TimerVerdict::Cancelled { .. } => "cancelled",
                TimerVerdict::Absent { .. } => "absent",
            };
            self.surfaces.timer_events.with_label_values(&[event]).inc();
            if let TimerWrite::Schedule(s) = w {
                let ms = match s.first_at {
                    Some(at) => (at - chrono::Utc::now()).num_milliseconds(),
                    None => s.delay_ms,
                };
                self.surfaces
                    .set_alarm(Duration::from_millis(ms.max(0) as u64));
            }
        }
    }

    /// Applies timer requests in one transaction (`POST /api/v1/timers`, the
    /// DELETE route).
    pub async fn timers(
        &self,
        reqs: Vec<TimerReq>,
    ) -> Result<(Vec<TimerWrite>, Vec<TimerVerdict>), BrokerError> {
        let writes = self.prepare_timers(reqs).await?;
        if writes.is_empty() {
            return Ok((writes, Vec::new()));
        }
        let verdicts = self.store.timers_call(&writes).await?;
        self.timers_done(&writes, &verdicts);
        Ok((writes, verdicts))
    }

    /// One pending timer.
    pub async fn timer_peek(
        &self,
        queue: &str,
        key: &str,
    ) -> Result<Option<crate::store::TimerRow>, BrokerError> {
        Ok(self.store.timer_peek(queue, key).await?)
    }

    /// A page of a queue's pending timers.
    pub async fn timer_list(
        &self,
        queue: &str,
        after: Option<&str>,
        limit: i64,
    ) -> Result<(Vec<crate::store::TimerRow>, bool), BrokerError> {
        Ok(self.store.timer_list(queue, after, limit).await?)
    }

    /// Fires due timers until none is left (or another replica sweeps), wakes
    /// the pops of what fired, and sets the alarm for the next one.
    pub async fn sweep_timers(&self) -> Result<usize, BrokerError> {
        let mut total = 0;
        loop {
            let Sweep {
                fired,
                retrying,
                dead_lettered,
                skipped,
                due,
                swept,
                next_due_in_ms,
            } = self.store.sweep_timers(SWEEP_BATCH).await?;
            let events = &self.surfaces.timer_events;
            events
                .with_label_values(&["fire_failed"])
                .inc_by(retrying as u64);
            events
                .with_label_values(&["dead_lettered"])
                .inc_by(dead_lettered as u64);
            events
                .with_label_values(&["skipped"])
                .inc_by(skipped as u64);
            total += fired.len();
            for f in &fired {
                let event = if f.duplicate { "duplicate" } else { "fired" };
                self.surfaces.timer_events.with_label_values(&[event]).inc();
                if !f.duplicate {
                    self.announce_messages(&f.queue, &f.partition);
                }
            }
            if let Some(ms) = next_due_in_ms {
                self.surfaces.set_alarm(Duration::from_millis(ms as u64));
            }
            if !swept {
                // another replica is sweeping: look again soon, not a period later
                self.surfaces.set_alarm(Duration::from_millis(100));
                return Ok(total);
            }
            if (due as i64) < SWEEP_BATCH {
                return Ok(total);
            }
        }
    }

    /// Sleeps until the next timer this replica knows of, or `SWEEP_PERIOD`.
    pub async fn wait_for_timers(&self) {
        self.surfaces.sleep_until_due(SWEEP_PERIOD).await;
    }
}
