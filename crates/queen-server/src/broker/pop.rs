//! Pop: claim a leased batch, optionally parking as a long poll until one is there.

use std::sync::Arc;
use std::time::Duration;

use queen_proto::responses::{AutopilotEcho, PopEcho};
use queen_proto::{ConsumerGroup, PartitionName, QueueName};
use tokio::time::Instant;
use uuid::Uuid;

use super::autopilot::{self, Sizing};
use super::{Broker, BrokerError, ANY_QUEUE_KEY};
use crate::backoff::Backoff;
use crate::config::{AutopilotMode, SubscriptionMode};
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
    /// The batch the client named; `None` when it left it unset (absent or 0).
    pub batch: Option<u32>,
    /// The sweep width the client named; `None` when it left it unset.
    pub max_partitions: Option<u32>,
    /// `autopilot=true`: the broker sizes the knobs left unset.
    pub autopilot: bool,
    /// `conflation=true`: the pop asks for last-value delivery for its group.
    pub conflation: bool,
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
    /// with autoAck), partitions claimed and how the pop was served.
    Messages {
        queue: String,
        messages: Vec<ClaimedMessage>,
        lease_id: String,
        partitions_claimed: usize,
        echo: PopEcho,
    },
    /// Nothing to deliver (HTTP 204, or 200 when the echo has something to say).
    Empty(PopEcho),
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

            let mut outcome = if self.flags.pop_maintenance() {
                PopOutcome::Empty(self.maintenance_echo(req).await)
            } else {
                self.pop_once(req).await
            };
            match outcome {
                PopOutcome::Messages {
                    ref queue,
                    ref mut messages,
                    ..
                } => {
                    self.metrics.popped.inc_by(messages.len() as u64);
                    self.count_popped(Some(queue), messages.iter().map(|m| m.created_at));
                    for m in messages.iter_mut() {
                        m.payload = self.deliverable(
                            queue,
                            &m.partition_name,
                            &m.transaction_id,
                            std::mem::take(&mut m.payload),
                        )?;
                    }
                    return Ok(outcome);
                }
                PopOutcome::Failed(ref e) => {
                    // logged here, once per attempt; the caller answers without logging
                    tracing::debug!(error = %e, "pop failed");
                    if !req.wait || Instant::now() >= deadline {
                        return Ok(outcome);
                    }
                }
                PopOutcome::Empty(_) => {
                    if !req.wait || Instant::now() >= deadline {
                        let queue = match &req.target {
                            PopTarget::Queue { queue, .. } => Some(queue.as_str()),
                            PopTarget::Namespace { .. } => None,
                        };
                        self.count_popped(queue, []);
                        return Ok(outcome);
                    }
                }
            }
            let pause = backoff
                .next_delay()
                .min(deadline.saturating_duration_since(Instant::now()));
            tokio::select! {
                _ = &mut notified => {}
                _ = tokio::time::sleep(pause) => {}
                _ = self.shutdown.cancelled() => return Ok(PopOutcome::Empty(PopEcho::default())),
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
                    .namespace_queues(namespace.as_deref(), task.as_deref())
                    .await
                {
                    Ok(q) => q,
                    Err(e) => return PopOutcome::Failed(e),
                };
                // an empty answer says what the queues tried said together
                let mut echo = PopEcho::default();
                for queue in queues {
                    match self.claim_from(&queue, None, req).await {
                        PopOutcome::Empty(e) => echo = merge_empty(echo, e),
                        outcome => return outcome,
                    }
                }
                if req.conflation && !echo.conflation_conflict {
                    // no queue yet: nothing stored contradicts the request
                    echo.conflation = true;
                }
                PopOutcome::Empty(echo)
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
            Ok(None) => return PopOutcome::Empty(self.unknown_queue_echo(req)),
            Err(e) => return PopOutcome::Failed(e),
        };
        let policy = match self
            .group_policy(&queue.name, &req.group, req.conflation)
            .await
        {
            Ok(p) => p,
            Err(e) => return PopOutcome::Failed(e),
        };
        // a lane autopilot sizes counts its pops in flight and learns what they got
        let lane =
            (req.autopilot && !policy.conflate && self.autopilot.mode() != AutopilotMode::Off)
                .then(|| self.autopilot.enter(&queue.name, req.group.as_str()));
        // random: the stored id of a one-partition lease keeps its last 8
        // bytes (queen.lease_mint), which tell two leases of one row apart
        let lease_nonce = Uuid::new_v4();
        // wildcard pops try the partitions written to lately first
        let hints = partition
            .is_none()
            .then(|| self.recent.hints_for_pop(&queue.name, req.group.as_str()));
        let (sizing, autopilot_echo) =
            self.size(req, lane.as_ref(), policy.conflate, hints.as_ref());
        let echo = PopEcho {
            conflation: policy.conflate,
            conflation_conflict: policy.conflict,
            autopilot: autopilot_echo,
        };
        if hints
            .as_ref()
            .is_some_and(|h| h.names.is_empty() && !h.walk)
        {
            // nothing listed for this group, and its walks lately found nothing
            return PopOutcome::Empty(echo);
        }
        let claim = ClaimRequest {
            queue: &queue,
            partition: partition.map(PartitionName::as_str),
            group: req.group.as_str(),
            batch: i32::try_from(sizing.batch).unwrap_or(i32::MAX),
            max_partitions: i32::try_from(sizing.partitions).unwrap_or(i32::MAX),
            lease_nonce,
            auto_ack: req.auto_ack,
            subscription_mode: req.subscription_mode.as_str(),
            subscription_from: req.subscription_from.as_deref(),
            holder: &self.config.server_id,
            hints: hints.as_ref().map_or(&[], |h| h.names.as_slice()),
            walk: hints.as_ref().is_none_or(|h| h.walk),
            conflate: policy.conflate,
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
        if let Ok(c) = &claimed {
            // expired leases this claim put on a retry hold
            for (partition, after) in &c.retry_holds {
                self.announce_after(&queue.name, partition, *after);
            }
        }
        if let (Ok(c), Some(lane)) = (&claimed, &lane) {
            let partitions = c
                .messages
                .chunk_by(|a, b| a.partition_id == b.partition_id)
                .count();
            self.autopilot.delivered(lane, c.messages.len(), partitions);
        }
        match claimed {
            Ok(c) if c.messages.is_empty() => PopOutcome::Empty(echo),
            Ok(Claim {
                messages, lease_id, ..
            }) => {
                // payloads are opened by `pop`, which may refuse one (crypto.rs)
                PopOutcome::Messages {
                    queue: queue.name,
                    partitions_claimed: messages
                        .chunk_by(|a, b| a.partition_id == b.partition_id)
                        .count(),
                    echo,
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

    /// The batch and sweep width of one claim, and the autopilot object its
    /// answer carries. A conflating group gets one message from each of
    /// `partitions` partitions: the pinned width, else the pinned batch, else
    /// (autopilot asked) the widest sweep, else the default batch, within 1
    /// and 64; autopilot does not size it. Otherwise autopilot sizes the
    /// knobs left unset when the pop asked for it and `QUEEN_POP_AUTOPILOT`
    /// is on (shadow: chosen and counted, the defaults served, no echo).
    fn size(
        &self,
        req: &PopRequest,
        lane: Option<&autopilot::LaneGuard<'_>>,
        conflate: bool,
        hints: Option<&super::recent::Hints>,
    ) -> (Sizing, Option<AutopilotEcho>) {
        let defaults = Sizing {
            batch: req.batch.unwrap_or(self.config.pop.default_batch),
            partitions: req.max_partitions.unwrap_or(1),
        };
        if conflate {
            let width = if hints.is_none() {
                1
            } else {
                req.max_partitions
                    .or(req.batch)
                    .unwrap_or(if req.autopilot {
                        autopilot::MAX_PARTITIONS
                    } else {
                        self.config.pop.default_batch
                    })
                    .clamp(1, autopilot::MAX_PARTITIONS)
            };
            let sizing = Sizing {
                batch: width,
                partitions: width,
            };
            return (sizing, None);
        }
        // the pops autopilot sizes have a lane (`claim_from`)
        let Some(lane) = lane else {
            return (defaults, None);
        };
        let chosen = self.autopilot.choose(
            lane,
            req.batch,
            req.max_partitions,
            hints.map(|h| h.names.len()),
        );
        match self.autopilot.mode() {
            AutopilotMode::On => (
                chosen,
                Some(AutopilotEcho {
                    partitions: chosen.partitions,
                    batch: chosen.batch,
                    wait_ms: self.empty_wait_advice(req),
                }),
            ),
            AutopilotMode::Shadow | AutopilotMode::Off => (defaults, None),
        }
    }

    /// `waitMs` of the autopilot object: how long a non-waiting consumer
    /// should wait after an empty answer before it polls again, the first
    /// re-check interval of a parked long poll (a waiting pop re-polls at
    /// once and the client does not read it).
    fn empty_wait_advice(&self, req: &PopRequest) -> u64 {
        if req.wait {
            0
        } else {
            u64::try_from(self.config.pop.wait_initial_interval.as_millis()).unwrap_or(u64::MAX)
        }
    }

    /// The echo of a pop of a queue that does not exist: nothing is stored
    /// for its group, so a request for conflation is what would be stored.
    fn unknown_queue_echo(&self, req: &PopRequest) -> PopEcho {
        PopEcho {
            conflation: req.conflation && req.group.as_str() != queen_proto::names::QUEUE_MODE,
            ..PopEcho::default()
        }
    }

    /// The echo of a pop answered empty because pops are in maintenance:
    /// the group's policy when the pop asked for conflation on one queue.
    async fn maintenance_echo(&self, req: &PopRequest) -> PopEcho {
        if !req.conflation {
            return PopEcho::default();
        }
        if let PopTarget::Queue { queue, .. } = &req.target {
            if let Ok(p) = self.group_policy(queue.as_str(), &req.group, true).await {
                return PopEcho {
                    conflation: p.conflate,
                    conflation_conflict: p.conflict,
                    autopilot: None,
                };
            }
        }
        self.unknown_queue_echo(req)
    }
}

/// The echo of an empty namespace pop over several queues: conflation only
/// when every queue tried conflates, a conflict when any queue had one, the
/// first autopilot decision.
fn merge_empty(acc: PopEcho, next: PopEcho) -> PopEcho {
    PopEcho {
        conflation: next.conflation && (acc.conflation || acc == PopEcho::default()),
        conflation_conflict: acc.conflation_conflict || next.conflation_conflict,
        autopilot: acc.autopilot.or(next.autopilot),
    }
}
