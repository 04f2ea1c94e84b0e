//! Pop: claim a leased batch, optionally parking as a long poll until one is there.

use std::sync::Arc;
use std::time::Duration;

use queen_proto::{ConsumerGroup, PartitionName, QueueName};
use tokio::time::Instant;
use uuid::Uuid;

use super::{Broker, BrokerError, ANY_QUEUE_KEY};
use crate::backoff::Backoff;
use crate::config::SubscriptionMode;
use crate::store::{Claim, ClaimRequest, ClaimedMessage, StoreError};

/// What a pop reads from.
#[derive(Debug, Clone)]
pub enum PopTarget {
    /// One queue; `partition: None` is the wildcard route.
    Queue {
        queue: QueueName,
        partition: Option<PartitionName>,
    },
    /// Every queue of a namespace (and task, when given).
    Namespace {
        namespace: Option<String>,
        task: Option<String>,
    },
}

/// A validated pop request.
#[derive(Debug, Clone)]
pub struct PopRequest {
    pub target: PopTarget,
    pub group: ConsumerGroup,
    pub batch: u32,
    pub max_partitions: u32,
    pub wait: bool,
    pub timeout: Duration,
    pub auto_ack: bool,
    pub subscription_mode: SubscriptionMode,
    pub subscription_from: Option<String>,
}

/// What a pop produced.
#[derive(Debug)]
pub enum PopOutcome {
    /// Messages of one queue (payloads decrypted), with the lease id (empty
    /// with autoAck) and partitions claimed.
    Messages {
        queue: String,
        messages: Vec<ClaimedMessage>,
        lease_id: String,
        partitions_claimed: usize,
    },
    /// Nothing to deliver (HTTP 204).
    Empty,
    /// The database failed; the clients expect `200 {"success": false}` then.
    Failed(StoreError),
}

impl Broker {
    /// Pops for `req`. With `wait`, parks until a message is claimable or the
    /// timeout elapses, re-checking on every wake and on a bounded interval.
    pub async fn pop(&self, req: &PopRequest) -> Result<PopOutcome, BrokerError> {
        let deadline = Instant::now() + req.timeout;
        let mut backoff = Backoff::for_long_poll(&self.config.pop);
        let wake_key = match &req.target {
            PopTarget::Queue { queue, .. } => queue.as_str(),
            PopTarget::Namespace { .. } => ANY_QUEUE_KEY,
        };
        loop {
            // register for wakes before checking, so a push in between is not missed
            let notify = self.waker.subscribe(wake_key);
            let notified = notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();

            let outcome = if self.flags.pop_maintenance() {
                PopOutcome::Empty
            } else {
                self.pop_once(req).await
            };
            match outcome {
                PopOutcome::Messages { ref messages, .. } => {
                    self.metrics.popped.inc_by(messages.len() as u64);
                    return Ok(outcome);
                }
                PopOutcome::Failed(ref e) => {
                    // logged here, once per attempt; the caller answers without logging
                    tracing::debug!(error = %e, "pop failed");
                    if !req.wait || Instant::now() >= deadline {
                        return Ok(outcome);
                    }
                }
                PopOutcome::Empty => {
                    if !req.wait || Instant::now() >= deadline {
                        return Ok(PopOutcome::Empty);
                    }
                }
            }
            let pause = backoff
                .next_delay()
                .min(deadline.saturating_duration_since(Instant::now()));
            tokio::select! {
                _ = &mut notified => {}
                _ = tokio::time::sleep(pause) => {}
                _ = self.shutdown.cancelled() => return Ok(PopOutcome::Empty),
            }
        }
    }

    /// Looks up, in the background, the partitions of `queue` with work for
    /// `group`, which join the list wildcard pops try first (`recent.rs`).
    fn discover_partitions(&self, queue: &crate::store::QueueRow, group: &str) {
        self.metrics.pop_discoveries.inc();
        let (store, recent) = (Arc::clone(&self.store), Arc::clone(&self.recent));
        let (queue_id, queue, group) = (queue.id, queue.name.clone(), group.to_owned());
        let limit = i32::try_from(super::recent::DISCOVER_LIMIT).unwrap_or(i32::MAX);
        tokio::spawn(async move {
            match store.discover_partitions(queue_id, &group, limit).await {
                Ok(found) => recent.discovered(&queue, &found),
                // only hints: the walks go on finding the work meanwhile
                Err(e) => tracing::debug!(error = %e, queue, "partition discovery failed"),
            }
        });
    }

    /// One attempt to claim messages.
    async fn pop_once(&self, req: &PopRequest) -> PopOutcome {
        match &req.target {
            PopTarget::Queue { queue, partition } => {
                self.claim_from(queue.as_str(), partition.as_ref(), req)
                    .await
            }
            PopTarget::Namespace { namespace, task } => {
                let queues = match self
                    .store
                    .queues_in_namespace(namespace.as_deref(), task.as_deref())
                    .await
                {
                    Ok(q) => q,
                    Err(e) => return PopOutcome::Failed(e),
                };
                for queue in queues {
                    let outcome = self.claim_from(&queue, None, req).await;
                    if !matches!(outcome, PopOutcome::Empty) {
                        return outcome;
                    }
                }
                PopOutcome::Empty
            }
        }
    }

    async fn claim_from(
        &self,
        queue: &str,
        partition: Option<&PartitionName>,
        req: &PopRequest,
    ) -> PopOutcome {
        let queue = match self.queue(queue).await {
            Ok(Some(q)) => q,
            Ok(None) => return PopOutcome::Empty,
            Err(e) => return PopOutcome::Failed(e),
        };
        // random: the stored id of a one-partition lease keeps its last 8
        // bytes (queen.lease_mint), which tell two leases of one row apart
        let lease_nonce = Uuid::new_v4();
        // wildcard pops try the partitions written to lately first
        let hints = partition
            .is_none()
            .then(|| self.recent.hints_for_pop(&queue.name, req.group.as_str()));
        if hints
            .as_ref()
            .is_some_and(|h| h.names.is_empty() && !h.walk)
        {
            // nothing listed for this group, and its walks lately found nothing
            return PopOutcome::Empty;
        }
        let claim = ClaimRequest {
            queue: &queue,
            partition: partition.map(PartitionName::as_str),
            group: req.group.as_str(),
            batch: i32::try_from(req.batch).unwrap_or(i32::MAX),
            max_partitions: i32::try_from(req.max_partitions).unwrap_or(i32::MAX),
            lease_nonce,
            auto_ack: req.auto_ack,
            subscription_mode: req.subscription_mode.as_str(),
            subscription_from: req.subscription_from.as_deref(),
            holder: &self.config.server_id,
            hints: hints.as_ref().map_or(&[], |h| h.names.as_slice()),
            walk: hints.as_ref().is_none_or(|h| h.walk),
        };
        let claimed = self.store.claim(&claim).await;
        if claimed.as_ref().is_ok_and(|c| c.by_statement) {
            self.metrics
                .consume_statement
                .with_label_values(&["pop"])
                .inc();
        }
        if let (Ok(c), Some(h)) = (&claimed, &hints) {
            self.metrics
                .pop_hints_drained
                .inc_by(c.drained_hints.len() as u64);
            let learned = self.recent.learn(&queue.name, req.group.as_str(), h, c);
            if learned.walked {
                self.metrics.pop_walks.inc();
            }
            if learned.unlisted && self.recent.discovery_due(&queue.name, req.group.as_str()) {
                self.discover_partitions(&queue, req.group.as_str());
            }
        }
        match claimed {
            Ok(c) if c.messages.is_empty() => PopOutcome::Empty,
            Ok(Claim {
                mut messages,
                lease_id,
                ..
            }) => {
                for m in &mut messages {
                    m.payload =
                        super::crypto::open(self.cipher.as_ref(), std::mem::take(&mut m.payload));
                }
                let mut partitions: Vec<Uuid> = messages.iter().map(|m| m.partition_id).collect();
                partitions.dedup();
                PopOutcome::Messages {
                    queue: queue.name,
                    partitions_claimed: partitions.len(),
                    lease_id: match lease_id {
                        Some(id) if !req.auto_ack => id.to_string(),
                        _ => String::new(),
                    },
                    messages,
                }
            }
            Err(e) => PopOutcome::Failed(e),
        }
    }
}
