//! The consumer group commit's flight (`flights.rs`): the hinted pops of one
//! queue and group and the whole-lease acks waiting at the same moment share
//! one `sql/statements/consume_flight.sql`, one statement and one transaction.

use chrono::{DateTime, Utc};
use tokio_postgres::Row;
use uuid::Uuid;

use super::flights::{Fly, Limits};
use super::op::{with_op, Db, DbOp};
use super::pop::{Claim, ClaimedMessage};
use super::{col, StoreError};

/// At most 64 pops and acks per statement, two statements in the air, a
/// second one only for 16 waiting requests (or a pop of another queue or
/// group): with 16 single-message consumers, 16 against 8 cut PostgreSQL's
/// CPU per pop+ack by a fifth (docs/benchmarks.md, "Consume path, part 4").
pub(super) const LIMITS: Limits = Limits {
    members: 64,
    inflight: 2,
    second: 16,
};

/// What the pops of one flight share.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PopKey {
    pub(super) queue_id: Uuid,
    /// With the subscription options: where a first contact of a consumer
    /// group starts (`queen.subscription_start`).
    pub(super) queue_name: String,
    pub(super) subscription_mode: String,
    pub(super) subscription_from: Option<String>,
    pub(super) group: String,
    pub(super) batch: i32,
    pub(super) lease_time: i32,
    pub(super) holder: String,
}

/// Most hinted partitions one statement looks at: the pops of a flight
/// mostly carry the same list (`broker/recent.rs` hands out 32), taken at
/// slightly different moments.
const MAX_FLIGHT_HINTS: usize = 64;

/// One hinted pop.
#[derive(Debug)]
pub(super) struct PopMember {
    pub(super) key: PopKey,
    /// Partition names to try, in order: the statement tries the union of
    /// its pops' lists.
    pub(super) hints: Vec<String>,
    /// The statement stores `queen.lease_mint` of the row's key and this.
    pub(super) lease_nonce: Uuid,
}

/// One ack request of every message of one lease, `completed`, in order.
#[derive(Debug)]
pub(super) struct AckMember {
    pub(super) group: String,
    pub(super) partition_id: Uuid,
    pub(super) lease_id: Uuid,
    pub(super) transaction_ids: Vec<String>,
}

/// The queue's and partition's names of an applied whole-lease ack.
#[derive(Debug, Clone)]
pub(super) struct LeaseAcked {
    pub(super) queue_name: String,
    pub(super) partition_name: String,
}

/// One request of a flight.
#[derive(Debug)]
pub(super) enum ConsumeReq {
    Pop(PopMember),
    Ack(AckMember),
}

/// Its answer. An ack: `Some` when the statement applied it, `None` when it
/// is anything else (then `queen.ack_batch` answers it).
#[derive(Debug)]
pub(super) enum ConsumeResp {
    Pop(PopAnswer),
    Ack(Option<LeaseAcked>),
}

/// What the statement did for one pop.
#[derive(Debug)]
pub(super) enum PopAnswer {
    /// It leased a partition to the pop and could hand the range out as read.
    Claimed(Claim),
    /// No free hinted partition with work was left for it in the statement's
    /// snapshot. `released`: the same statement released leases, which its
    /// pops could not see, so one more flight is worth trying before
    /// `queen.pop_queue`.
    NoPartition { released: bool },
    /// The range had a hole or an offset deleted one by one; its lease was
    /// cleared again and `queen.pop_queue` answers the pop.
    Irregular,
}

/// The flight: pops of one key and acks of any queue and group.
pub(super) struct ConsumeFly {
    pub(super) db: Db,
}

impl Fly for ConsumeFly {
    type Req = ConsumeReq;
    type Resp = ConsumeResp;
    type Key = PopKey;

    /// Acks join any flight.
    fn key(req: &ConsumeReq) -> Option<&PopKey> {
        match req {
            ConsumeReq::Pop(p) => Some(&p.key),
            ConsumeReq::Ack(_) => None,
        }
    }

    fn op(req: &ConsumeReq) -> &'static str {
        match req {
            ConsumeReq::Pop(_) => "pop",
            ConsumeReq::Ack(_) => "ack",
        }
    }

    async fn fly(&self, reqs: &[ConsumeReq]) -> Result<Vec<ConsumeResp>, StoreError> {
        let (pops, acks) = split(reqs);
        let acks = AckArrays::new(acks)?;
        let key = pops.first().map(|(_, p)| &p.key);
        let nonces: Vec<Uuid> = pops.iter().map(|(_, p)| p.lease_nonce).collect();
        let hints = flight_hints(&pops);
        with_op!(self.db, DbOp::Consume, |client| {
            let stmt = client
                .prepare_cached(include_str!("../../sql/statements/consume_flight.sql"))
                .await?;
            let rows = client
                .query(
                    &stmt,
                    &[
                        &key.map(|k| k.queue_id),
                        &key.map(|k| k.group.as_str()),
                        &key.map_or(0, |k| k.batch),
                        &nonces,
                        &key.map_or(0, |k| k.lease_time),
                        &key.map(|k| k.holder.as_str()),
                        &hints,
                        &acks.groups,
                        &acks.partitions,
                        &acks.leases,
                        &acks.firsts,
                        &acks.counts,
                        &acks.txns,
                        &key.map(|k| k.queue_name.as_str()),
                        &key.map(|k| k.subscription_mode.as_str()),
                        &key.and_then(|k| k.subscription_from.as_deref()),
                    ],
                )
                .await?;
            let mut out: Vec<ConsumeResp> = reqs
                .iter()
                .map(|r| match r {
                    ConsumeReq::Pop(_) => ConsumeResp::Pop(PopAnswer::NoPartition {
                        released: !acks.order.is_empty(),
                    }),
                    ConsumeReq::Ack(_) => ConsumeResp::Ack(None),
                })
                .collect();
            // hinted partitions with nothing past the group's cursor: the
            // first pop the statement leased a partition to tells the
            // broker's hint list (recent.rs)
            let mut drained: Vec<String> = Vec::new();
            // a member's rows are adjacent: one per ack, one per segment of a pop
            for member_rows in rows.chunk_by(|a, b| member_of(a) == member_of(b)) {
                let first = &member_rows[0];
                let kind: &str = col(first, "kind")?;
                if kind == "drained" {
                    drained.push(col(first, "partition_name")?);
                    continue;
                }
                let k = usize::try_from(col::<i64>(first, "member")? - 1).ok();
                if kind == "ack" {
                    let index = k
                        .and_then(|k| acks.order.get(k).copied())
                        .ok_or_else(|| StoreError::internal("ack member out of range"))?;
                    out[index] = ConsumeResp::Ack(Some(LeaseAcked {
                        queue_name: col(first, "queue_name")?,
                        partition_name: col(first, "partition_name")?,
                    }));
                    continue;
                }
                let (index, pop) = k
                    .and_then(|k| pops.get(k).copied())
                    .ok_or_else(|| StoreError::internal("pop member out of range"))?;
                let lease_id: Uuid = col(first, "lease_id")?;
                out[index] = match messages_from_segments(member_rows)? {
                    Some(messages) => ConsumeResp::Pop(PopAnswer::Claimed(Claim {
                        messages,
                        drained_hints: std::mem::take(&mut drained),
                        lease_id: Some(lease_id),
                        by_statement: true,
                        retry_holds: Vec::new(),
                    })),
                    None => {
                        let partition_id: Uuid = col(first, "partition_id")?;
                        let stmt = client
                            .prepare_cached(
                                "UPDATE queen.log_consumers SET lease_expires_at = NULL
                                 WHERE partition_id = $1 AND consumer_group = $2 AND lease_id = $3",
                            )
                            .await?;
                        client
                            .execute(&stmt, &[&partition_id, &pop.key.group, &lease_id])
                            .await?;
                        ConsumeResp::Pop(PopAnswer::Irregular)
                    }
                };
            }
            Ok(out)
        })
    }
}

/// The hints of a flight: every pop's list, in the order of the first pop's,
/// then each later pop's new names, at most [`MAX_FLIGHT_HINTS`].
fn flight_hints<'a>(pops: &[(usize, &'a PopMember)]) -> Vec<&'a str> {
    let mut hints: Vec<&str> = Vec::new();
    let mut last: Option<&[String]> = None;
    for (_, p) in pops {
        // pops of one moment mostly carry the very same list
        if last == Some(p.hints.as_slice()) {
            continue;
        }
        last = Some(&p.hints);
        for name in &p.hints {
            if hints.len() == MAX_FLIGHT_HINTS {
                return hints;
            }
            if !hints.contains(&name.as_str()) {
                hints.push(name);
            }
        }
    }
    hints
}

/// Which member a row of the statement answers (`None` for a row whose
/// columns do not read; `col` then reports it).
fn member_of(row: &Row) -> Option<(&str, i64)> {
    Some((row.try_get("kind").ok()?, row.try_get("member").ok()?))
}

/// The acks of a flight as the statement's arrays, in cursor-row order (so
/// two flights lock rows the same way); `order[k]` is the request index of
/// the statement's member k + 1.
struct AckArrays<'a> {
    order: Vec<usize>,
    groups: Vec<&'a str>,
    partitions: Vec<Uuid>,
    leases: Vec<Uuid>,
    firsts: Vec<i32>,
    counts: Vec<i32>,
    txns: Vec<&'a str>,
}

/// The pops and the acks of a flight, each with its request index.
type Indexed<'a, T> = Vec<(usize, &'a T)>;

fn split(reqs: &[ConsumeReq]) -> (Indexed<'_, PopMember>, Indexed<'_, AckMember>) {
    let (mut pops, mut acks) = (Vec::new(), Vec::new());
    for (i, r) in reqs.iter().enumerate() {
        match r {
            ConsumeReq::Pop(p) => pops.push((i, p)),
            ConsumeReq::Ack(a) => acks.push((i, a)),
        }
    }
    (pops, acks)
}

impl<'a> AckArrays<'a> {
    fn new(mut acks: Indexed<'a, AckMember>) -> Result<Self, StoreError> {
        acks.sort_by_key(|(_, a)| (a.partition_id, a.group.as_str()));
        let n = acks.len();
        let mut arrays = Self {
            order: Vec::with_capacity(n),
            groups: Vec::with_capacity(n),
            partitions: Vec::with_capacity(n),
            leases: Vec::with_capacity(n),
            firsts: Vec::with_capacity(n),
            counts: Vec::with_capacity(n),
            txns: Vec::new(),
        };
        for (i, a) in acks {
            arrays.order.push(i);
            arrays.groups.push(a.group.as_str());
            arrays.partitions.push(a.partition_id);
            arrays.leases.push(a.lease_id);
            arrays.firsts.push(int(arrays.txns.len() + 1)?);
            arrays.counts.push(int(a.transaction_ids.len())?);
            arrays
                .txns
                .extend(a.transaction_ids.iter().map(String::as_str));
        }
        Ok(arrays)
    }
}

/// Zips one pop member's rows of `consume_flight` (one per segment, arrays sliced to
/// the leased range) into messages; `None` unless they cover the range from
/// its start to its end without a gap and no offset of it was deleted one by
/// one.
fn messages_from_segments(rows: &[Row]) -> Result<Option<Vec<ClaimedMessage>>, StoreError> {
    let Some(first) = rows.first() else {
        return Ok(None);
    };
    let start: i64 = col(first, "range_start")?;
    let end: i64 = col(first, "range_end")?;
    let partition_id: Uuid = col(first, "partition_id")?;
    let partition_name: String = col(first, "partition_name")?;
    // the delivery attempt: the head's count up to attempt_end, else first
    let attempts: i32 = col(first, "attempts")?;
    let attempt_end: i64 = col(first, "attempt_end")?;
    let mut messages = Vec::with_capacity(usize::try_from(end - start + 1).unwrap_or(0));
    let mut next = start;
    for r in rows {
        if col::<bool>(r, "has_deleted")? || col::<i64>(r, "first_offset")? != next {
            return Ok(None);
        }
        let ids: Vec<Uuid> = col(r, "message_ids")?;
        let txns: Vec<String> = col(r, "transaction_ids")?;
        let traces: Vec<Option<Uuid>> = col(r, "trace_ids")?;
        let payloads: Vec<String> = col(r, "payloads")?;
        let subs: Option<Vec<Option<String>>> = col(r, "producer_subs")?;
        let created_at: DateTime<Utc> = col(r, "created_at")?;
        let n = ids.len();
        if txns.len() != n
            || traces.len() != n
            || payloads.len() != n
            || subs.as_ref().is_some_and(|s| s.len() != n)
        {
            return Ok(None);
        }
        let mut subs = subs.map(Vec::into_iter);
        for (((message_id, transaction_id), trace_id), payload) in
            ids.into_iter().zip(txns).zip(traces).zip(payloads)
        {
            messages.push(ClaimedMessage {
                partition_id,
                partition_name: partition_name.clone(),
                offset: next,
                message_id,
                transaction_id,
                trace_id,
                payload,
                producer_sub: subs.as_mut().and_then(Iterator::next).flatten(),
                created_at,
                attempt: if attempts > 0 && next <= attempt_end {
                    attempts + 1
                } else {
                    1
                },
            });
            next += 1;
        }
    }
    Ok((next == end + 1).then_some(messages))
}

fn int(n: usize) -> Result<i32, StoreError> {
    i32::try_from(n).map_err(|_| StoreError::internal("ack flight too large"))
}
