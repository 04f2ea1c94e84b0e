//! Pop: claiming a leased batch with `queen.claim_partition` (one partition)
//! or `queen.pop_queue` (wildcard, hint list first), and extending leases.
//! The common wildcard pop (hints known, one partition, no delay, window or
//! auto-ack) first tries one prepared statement, `sql/statements/consume_flight.sql`,
//! that claims and reads the range as stored, shared by the pops and acks
//! waiting at the same moment (consumer group commit, `flights.rs` and
//! `consume.rs`).

use chrono::{DateTime, Utc};
use tokio_postgres::Row;
use uuid::Uuid;

use super::consume::{ConsumeReq, ConsumeResp, PopAnswer, PopKey, PopMember};
use super::op::{with_op, DbOp};
use super::{col, QueueRow, Store, StoreError};

/// Flights a hinted pop tries before `queen.pop_queue` when they find no
/// free partition for it while releasing some (see `PopAnswer::NoPartition`).
const HINTED_FLIGHTS: usize = 2;

/// What a pop asks for; the queue's own options supply delay, window and lease time.
#[derive(Debug, Clone)]
pub struct ClaimRequest<'a> {
    pub queue: &'a QueueRow,
    /// `None` for the wildcard route.
    pub partition: Option<&'a str>,
    pub group: &'a str,
    pub batch: i32,
    pub max_partitions: i32,
    /// A random (v4) UUID fresh for each pop. A pop of several
    /// partitions holds them all under this id; a lease of one partition is
    /// stored as `queen.lease_mint` of its cursor row's key and this.
    pub lease_nonce: Uuid,
    pub auto_ack: bool,
    pub subscription_mode: &'a str,
    pub subscription_from: Option<&'a str>,
    pub holder: &'a str,
    /// Wildcard pops: partitions written to lately, tried before the walk.
    pub hints: &'a [String],
    /// Wildcard pops: whether the database may walk the queue when the
    /// hints do not fill the pop.
    pub walk: bool,
    /// A conflating consumer group: one message per partition, its newest.
    pub conflate: bool,
}

/// What a pop claimed.
#[derive(Debug, Default)]
pub struct Claim {
    pub messages: Vec<ClaimedMessage>,
    /// Wildcard pops: hinted partitions with nothing past the group's cursor.
    pub drained_hints: Vec<String>,
    /// Partitions whose expired lease this claim put on a retry hold (the
    /// queue's `retryDelay`), with the time to the hold's end: parked pops
    /// are woken then.
    pub retry_holds: Vec<(String, std::time::Duration)>,
    /// The lease the messages are held under, as stored (see
    /// `ClaimRequest::lease_nonce`); `None` when nothing was claimed.
    pub lease_id: Option<Uuid>,
    /// Claimed by the one-statement path (`sql/statements/consume_flight.sql`).
    pub by_statement: bool,
}

/// A message handed out by a pop.
#[derive(Debug, Clone)]
pub struct ClaimedMessage {
    pub partition_id: Uuid,
    pub partition_name: String,
    pub offset: i64,
    pub message_id: Uuid,
    pub transaction_id: String,
    pub trace_id: Option<Uuid>,
    pub payload: String,
    pub producer_sub: Option<String>,
    pub created_at: DateTime<Utc>,
    /// How many times the message has been handed to this consumer group,
    /// this delivery included (1 on the first).
    pub attempt: i32,
}

/// The result of a lease extension.
#[derive(Debug, Clone)]
pub struct LeaseExtension {
    pub expires_at: Option<DateTime<Utc>>,
    pub renewed: i32,
    /// Why nothing was extended.
    pub reason: Option<String>,
}

impl Store {
    /// Claims messages for a consumer group; see `queen.claim_partition`/`queen.pop_queue`.
    pub async fn claim(&self, req: &ClaimRequest<'_>) -> Result<Claim, StoreError> {
        if hinted_applies(req) {
            // a pop the statement found no partition for while its acks
            // released some rides the next flight once, which sees them
            for _ in 0..HINTED_FLIGHTS {
                let member = PopMember {
                    key: PopKey {
                        queue_id: req.queue.id,
                        queue_name: req.queue.name.clone(),
                        subscription_mode: req.subscription_mode.to_owned(),
                        subscription_from: req.subscription_from.map(str::to_owned),
                        group: req.group.to_owned(),
                        batch: req.batch,
                        lease_time: req.queue.options.lease_time,
                        holder: req.holder.to_owned(),
                    },
                    hints: req.hints.to_vec(),
                    lease_nonce: req.lease_nonce,
                };
                match self.consume_flights.call(ConsumeReq::Pop(member)).await? {
                    ConsumeResp::Pop(PopAnswer::Claimed(claim)) => return Ok(claim),
                    ConsumeResp::Pop(PopAnswer::NoPartition { released: true }) => continue,
                    ConsumeResp::Pop(PopAnswer::NoPartition { released: false })
                    | ConsumeResp::Pop(PopAnswer::Irregular)
                    | ConsumeResp::Ack(_) => break,
                }
            }
        }
        with_op!(self.db, DbOp::Pop, |client| {
            let o = &req.queue.options;
            let rows = match req.partition {
                Some(partition) => {
                    let stmt = client
                            .prepare_cached(
                                "SELECT pt.id AS partition_id, pt.name AS partition_name, m.*
                                 FROM queen.partitions pt,
                                      LATERAL queen.claim_partition(pt.id, $3, pt.name, $4, $5, $6, false, $7,
                                                                    $8, $9, $10, pt.name, $11, $12, $13, $14,
                                                                    $15, $16, $17, $18, $19) m
                                 WHERE pt.queue_id = $1 AND pt.name = $2",
                            )
                            .await?;
                    client
                        .query(
                            &stmt,
                            &[
                                &req.queue.id,
                                &partition,
                                &req.queue.name,
                                &req.group,
                                &req.batch,
                                &req.lease_nonce,
                                &o.lease_time,
                                &req.auto_ack,
                                &o.delayed_processing,
                                &o.window_buffer,
                                &req.subscription_mode,
                                &req.subscription_from,
                                &req.holder,
                                &req.conflate,
                                &o.ttl,
                                &o.dead_letter_queue,
                                &o.retry_delay,
                                &o.retry_backoff,
                                &o.retry_delay_max,
                            ],
                        )
                        .await?
                }
                None => {
                    let stmt = client
                            .prepare_cached(
                                "SELECT * FROM queen.pop_queue($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, true, $15, $16, $17, $18, $19, $20, $21)",
                            )
                            .await?;
                    client
                        .query(
                            &stmt,
                            &[
                                &req.queue.id,
                                &req.queue.name,
                                &req.group,
                                &req.batch,
                                &req.max_partitions,
                                &req.lease_nonce,
                                &o.lease_time,
                                &req.auto_ack,
                                &o.delayed_processing,
                                &o.window_buffer,
                                &req.subscription_mode,
                                &req.subscription_from,
                                &req.holder,
                                &req.hints,
                                &req.walk,
                                &req.conflate,
                                &o.ttl,
                                &o.dead_letter_queue,
                                &o.retry_delay,
                                &o.retry_backoff,
                                &o.retry_delay_max,
                            ],
                        )
                        .await?
                }
            };
            claim_from_rows(&rows)
        })
    }

    /// Up to `limit` partitions of `queue_id` with messages for `group` and
    /// no live lease (`sql/statements/discover_partitions.sql`).
    pub async fn discover_partitions(
        &self,
        queue_id: Uuid,
        group: &str,
        limit: i32,
    ) -> Result<Vec<String>, StoreError> {
        with_op!(self.db, DbOp::Discover, |client| {
            let stmt = client
                .prepare_cached(include_str!("../../sql/statements/discover_partitions.sql"))
                .await?;
            let rows = client.query(&stmt, &[&queue_id, &group, &limit]).await?;
            rows.iter().map(|r| col(r, "name")).collect()
        })
    }

    /// The stored delivery policy of `group` on `queue` (true: conflation),
    /// registering the group with `conflation` when it has none
    /// (`queen.group_policy`).
    pub async fn group_policy(
        &self,
        queue: &str,
        group: &str,
        conflation: bool,
    ) -> Result<bool, StoreError> {
        with_op!(self.db, DbOp::GroupPolicy, |client| {
            let stmt = client
                .prepare_cached("SELECT queen.group_policy($1, $2, $3) AS conflation")
                .await?;
            let row = client
                .query_one(&stmt, &[&queue, &group, &conflation])
                .await?;
            col(&row, "conflation")
        })
    }

    /// Extends every unexpired partition lease held under `lease_id`.
    pub async fn extend_lease(
        &self,
        lease_id: Uuid,
        seconds: i32,
    ) -> Result<LeaseExtension, StoreError> {
        with_op!(self.db, DbOp::ExtendLease, |client| {
            let stmt = client
                .prepare_cached(
                    "SELECT expires_at, renewed, reason FROM queen.extend_lease($1, $2)",
                )
                .await?;
            let row = client.query_one(&stmt, &[&lease_id, &seconds]).await?;
            Ok(LeaseExtension {
                expires_at: col(&row, "expires_at")?,
                renewed: col(&row, "renewed")?,
                reason: col(&row, "reason")?,
            })
        })
    }
}

/// Whether a wildcard pop may try `consume_flight.sql` first: the conditions that
/// statement leaves to `queen.pop_queue` are all known before the call.
fn hinted_applies(req: &ClaimRequest<'_>) -> bool {
    let o = &req.queue.options;
    req.partition.is_none()
        && !req.conflate
        && !req.hints.is_empty()
        && req.max_partitions == 1
        && !req.auto_ack
        && o.delayed_processing <= 0
        && o.window_buffer <= 0
        && o.ttl <= 0
        && o.retry_delay <= 0
}

/// Messages and the marker rows (a partition name with no offset): a retry
/// hold's (`retry_after_ms` set), else, for wildcard pops, a drained hint.
fn claim_from_rows(rows: &[Row]) -> Result<Claim, StoreError> {
    let mut claim = Claim::default();
    for r in rows {
        let Some(offset) = col::<Option<i64>>(r, "msg_offset")? else {
            if let Some(ms) = col::<Option<i64>>(r, "retry_after_ms")? {
                let after = std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(0));
                claim.retry_holds.push((col(r, "partition_name")?, after));
            } else {
                claim.drained_hints.push(col(r, "partition_name")?);
            }
            continue;
        };
        if claim.lease_id.is_none() {
            claim.lease_id = col(r, "lease_id")?;
        }
        claim.messages.push(ClaimedMessage {
            partition_id: col(r, "partition_id")?,
            partition_name: col(r, "partition_name")?,
            offset,
            message_id: col(r, "message_id")?,
            transaction_id: col(r, "transaction_id")?,
            trace_id: col(r, "trace_id")?,
            payload: col(r, "payload")?,
            producer_sub: col(r, "producer_sub")?,
            created_at: col(r, "created_at")?,
            attempt: col(r, "attempt")?,
        });
    }
    Ok(claim)
}
