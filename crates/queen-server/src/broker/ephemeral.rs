//! Ephemeral queues (issue 21): the use cases over `store/ephemeral.rs`, and
//! the long poll of their pops. Every replica serves every queue: the rings
//! live in PostgreSQL (UNLOGGED tables), so there is no owner to route to. A
//! push wakes pops parked here and, through a mesh hint, on the peers.

use std::time::Duration;

use queen_proto::mesh::{Frame, MessageAvailable};
use serde_json::Value;
use tokio::time::Instant;

use super::{Broker, BrokerError};
use crate::backoff::Backoff;
use crate::store::{
    EphemeralAck, EphemeralCollected, EphemeralMessage, EphemeralSettings, EphemeralStatus,
};

/// A validated ephemeral pop.
#[derive(Debug, Clone)]
pub struct EphemeralPop {
    pub queue: String,
    pub partition: Option<String>,
    /// `__QUEUE_MODE__` when the request named none.
    pub group: String,
    pub batch: i32,
    pub auto_ack: bool,
    pub wait: bool,
    pub timeout: Duration,
}

/// Why an ephemeral push appended nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EphemeralRefusal {
    /// Over maxLength or maxBytes with policy `reject`.
    QueueFull,
    /// Over the broker-wide bound of ephemeral bytes (`EPHEMERAL_MAX_BYTES`).
    OverBudget,
}

/// The waker key (and mesh hint queue name) of an ephemeral queue; the NUL
/// keeps it apart from every durable queue name.
fn wake_key(queue: &str) -> String {
    format!("\u{0}ephemeral/{queue}")
}

impl Broker {
    /// Stores a declaration; answers the effective options.
    pub async fn ephemeral_configure(
        &self,
        queue: &str,
        options: &Value,
    ) -> Result<EphemeralSettings, BrokerError> {
        Ok(self.store.ephemeral_configure(queue, options).await?)
    }

    /// Appends messages to one ring, all or nothing.
    pub async fn ephemeral_push(
        &self,
        queue: &str,
        partition: &str,
        payloads: &[String],
    ) -> Result<Result<i32, EphemeralRefusal>, BrokerError> {
        let pushed = self
            .store
            .ephemeral_push(
                queue,
                partition,
                payloads,
                self.config.jobs.ephemeral_max_bytes,
            )
            .await?;
        self.reads_metrics
            .eph_evicted
            .inc_by(u64::try_from(pushed.evicted).unwrap_or(0));
        if pushed.refused {
            self.reads_metrics.eph_refused.inc();
            return Ok(Err(EphemeralRefusal::QueueFull));
        }
        if pushed.over_budget {
            self.reads_metrics.eph_refused.inc();
            return Ok(Err(EphemeralRefusal::OverBudget));
        }
        self.reads_metrics
            .eph_pushed
            .inc_by(u64::try_from(pushed.pushed).unwrap_or(0));
        if pushed.pushed > 0 {
            self.ephemeral_wake(queue, partition);
        }
        Ok(Ok(pushed.pushed))
    }

    /// Wakes pops of `queue` parked here and on the peers.
    fn ephemeral_wake(&self, queue: &str, partition: &str) {
        let key = wake_key(queue);
        self.waker.notify(&key);
        self.announce(Frame::MessageAvailable(MessageAvailable {
            queue: key,
            partition: partition.to_owned(),
        }));
    }

    /// Pops; with `wait`, parks until messages arrive or the timeout.
    pub async fn ephemeral_pop(
        &self,
        req: &EphemeralPop,
    ) -> Result<Vec<EphemeralMessage>, BrokerError> {
        let deadline = Instant::now() + req.timeout;
        let mut backoff = Backoff::for_long_poll(&self.config.pop);
        let key = wake_key(&req.queue);
        loop {
            let notify = self.waker.subscribe(&key);
            let notified = notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let messages = self
                .store
                .ephemeral_pop(
                    &req.queue,
                    req.partition.as_deref(),
                    &req.group,
                    req.batch,
                    req.auto_ack,
                )
                .await?;
            if !messages.is_empty() || !req.wait || Instant::now() >= deadline {
                self.reads_metrics.eph_popped.inc_by(messages.len() as u64);
                return Ok(messages);
            }
            let pause = backoff
                .next_delay()
                .min(deadline.saturating_duration_since(Instant::now()));
            tokio::select! {
                _ = &mut notified => {}
                _ = tokio::time::sleep(pause) => {}
                _ = self.shutdown.cancelled() => return Ok(Vec::new()),
            }
        }
    }

    /// Acks; one outcome per ack. Redelivered messages wake parked pops.
    pub async fn ephemeral_ack(
        &self,
        queue: &str,
        group: &str,
        acks: &[EphemeralAck],
    ) -> Result<Vec<String>, BrokerError> {
        let outcomes = self.store.ephemeral_ack(queue, group, acks).await?;
        for (ack, outcome) in acks.iter().zip(&outcomes) {
            self.reads_metrics
                .eph_acks
                .with_label_values(&[outcome.as_str()])
                .inc();
            if outcome == "redelivered" {
                self.ephemeral_wake(queue, &ack.partition);
            }
        }
        Ok(outcomes)
    }

    /// Drops every message of a queue; answers how many.
    pub async fn ephemeral_reset(&self, queue: &str) -> Result<i64, BrokerError> {
        Ok(self.store.ephemeral_reset(queue).await?)
    }

    /// Forgets a queue and its declaration; answers (deleted, declared).
    pub async fn ephemeral_delete(&self, queue: &str) -> Result<(bool, bool), BrokerError> {
        Ok(self.store.ephemeral_delete(queue).await?)
    }

    /// The status of one queue; `None` when it does not exist.
    pub async fn ephemeral_status(
        &self,
        queue: &str,
    ) -> Result<Option<EphemeralStatus>, BrokerError> {
        Ok(self.store.ephemeral_status(queue).await?)
    }

    /// The status of every queue, sorted by name (a few statements, not one per queue).
    pub async fn ephemeral_queues(&self) -> Result<Vec<EphemeralStatus>, BrokerError> {
        Ok(self.store.ephemeral_statuses().await?)
    }

    /// One sweep of the ephemeral collector (`jobs/ephemeral.rs`): idle
    /// implicit queues forgotten, byte counts refreshed.
    pub async fn ephemeral_collect(&self) -> Result<EphemeralCollected, BrokerError> {
        let idle = i32::try_from(self.config.jobs.ephemeral_idle.as_secs()).unwrap_or(i32::MAX);
        Ok(self.store.ephemeral_collect(idle).await?)
    }
}
