//! The two flights of consumer group commit (`flights.rs`): hinted pops of
//! one queue and group share one `sql/statements/pop_hinted.sql`, whole-lease
//! acks one `sql/statements/ack_lease.sql`, each in one transaction.

use chrono::{DateTime, Utc};
use tokio_postgres::Row;
use uuid::Uuid;

use super::flights::{Fly, Limits};
use super::op::{with_op, Db, DbOp};
use super::pop::{Claim, ClaimedMessage};
use super::{col, StoreError};

/// Hinted pops: at most 32 per statement, two statements in the air, a
/// second one only for 8 waiting pops (or another queue or group).
pub(super) const POP_LIMITS: Limits = Limits {
    members: 32,
    inflight: 2,
    second: 8,
};
/// Whole-lease acks: at most 64 per statement, two in the air, a second one
/// only for 8 waiting acks.
pub(super) const ACK_LIMITS: Limits = Limits {
    members: 64,
    inflight: 2,
    second: 8,
};

/// What the pops of one flight share.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PopKey {
    pub(super) queue_id: Uuid,
    pub(super) group: String,
    pub(super) batch: i32,
    pub(super) lease_time: i32,
    pub(super) holder: String,
    pub(super) hints: Vec<String>,
}

/// One hinted pop.
#[derive(Debug)]
pub(super) struct PopMember {
    pub(super) key: PopKey,
    pub(super) lease_id: Uuid,
}

/// Hinted pops: `Some` for a member the statement leased a partition to and
/// could hand out as read; `None` (no partition left for it, or a range with
/// a hole or a deleted offset, whose lease is cleared again) sends the pop to
/// `queen.pop_queue`.
pub(super) struct PopFly {
    pub(super) db: Db,
}

impl Fly for PopFly {
    type Req = PopMember;
    type Resp = Option<Claim>;
    type Key = PopKey;

    fn key(req: &PopMember) -> &PopKey {
        &req.key
    }

    async fn fly(&self, reqs: &[PopMember]) -> Result<Vec<Option<Claim>>, StoreError> {
        let Some(first) = reqs.first() else {
            return Ok(Vec::new());
        };
        let key = &first.key;
        let lease_ids: Vec<Uuid> = reqs.iter().map(|r| r.lease_id).collect();
        with_op!(self.db, DbOp::Pop, |client| {
            let stmt = client
                .prepare_cached(include_str!("../../sql/statements/pop_hinted.sql"))
                .await?;
            let rows = client
                .query(
                    &stmt,
                    &[
                        &key.queue_id,
                        &key.group,
                        &key.batch,
                        &lease_ids,
                        &key.lease_time,
                        &key.holder,
                        &key.hints,
                    ],
                )
                .await?;
            let mut out: Vec<Option<Claim>> = reqs.iter().map(|_| None).collect();
            let mut at = 0;
            while at < rows.len() {
                let member: i64 = col(&rows[at], "member")?;
                let mut end = at + 1;
                while end < rows.len() && col::<i64>(&rows[end], "member")? == member {
                    end += 1;
                }
                let index = usize::try_from(member - 1)
                    .ok()
                    .filter(|&i| i < reqs.len())
                    .ok_or_else(|| StoreError::internal("pop member out of range"))?;
                let member_rows = &rows[at..end];
                match messages_from_segments(member_rows)? {
                    Some(messages) => {
                        out[index] = Some(Claim {
                            messages,
                            drained_hints: Vec::new(),
                            by_statement: true,
                        });
                    }
                    None => {
                        let partition_id: Uuid = col(&member_rows[0], "partition_id")?;
                        let stmt = client
                            .prepare_cached(
                                "UPDATE queen.log_consumers SET lease_expires_at = NULL
                                 WHERE partition_id = $1 AND consumer_group = $2 AND lease_id = $3",
                            )
                            .await?;
                        client
                            .execute(&stmt, &[&partition_id, &key.group, &lease_ids[index]])
                            .await?;
                    }
                }
                at = end;
            }
            Ok(out)
        })
    }
}

/// Zips one member's rows of `pop_hinted` (one per segment, arrays sliced to
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
            });
            next += 1;
        }
    }
    Ok((next == end + 1).then_some(messages))
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

/// Whole-lease acks: `Some` for a member the statement applied, `None` for
/// one it found to be anything else (then `queen.ack_batch` answers it).
pub(super) struct AckFly {
    pub(super) db: Db,
}

impl Fly for AckFly {
    type Req = AckMember;
    type Resp = Option<LeaseAcked>;
    /// Acks of any queue and group share a statement.
    type Key = ();

    fn key(_: &AckMember) -> &() {
        &()
    }

    async fn fly(&self, reqs: &[AckMember]) -> Result<Vec<Option<LeaseAcked>>, StoreError> {
        // cursor rows in one order, so two flights lock them the same way
        let mut order: Vec<usize> = (0..reqs.len()).collect();
        order.sort_by_key(|&i| (reqs[i].partition_id, reqs[i].group.as_str()));
        let mut groups = Vec::with_capacity(reqs.len());
        let mut partitions = Vec::with_capacity(reqs.len());
        let mut leases = Vec::with_capacity(reqs.len());
        let mut firsts = Vec::with_capacity(reqs.len());
        let mut counts = Vec::with_capacity(reqs.len());
        let mut txns: Vec<&str> = Vec::new();
        for &i in &order {
            let r = &reqs[i];
            groups.push(r.group.as_str());
            partitions.push(r.partition_id);
            leases.push(r.lease_id);
            firsts.push(int(txns.len() + 1)?);
            counts.push(int(r.transaction_ids.len())?);
            txns.extend(r.transaction_ids.iter().map(String::as_str));
        }
        with_op!(self.db, DbOp::Ack, |client| {
            let stmt = client
                .prepare_cached(include_str!("../../sql/statements/ack_lease.sql"))
                .await?;
            let rows = client
                .query(
                    &stmt,
                    &[&groups, &partitions, &leases, &firsts, &counts, &txns],
                )
                .await?;
            let mut out: Vec<Option<LeaseAcked>> = reqs.iter().map(|_| None).collect();
            for row in &rows {
                let member: i64 = col(row, "member")?;
                let index = usize::try_from(member - 1)
                    .ok()
                    .and_then(|k| order.get(k).copied())
                    .ok_or_else(|| StoreError::internal("ack member out of range"))?;
                out[index] = Some(LeaseAcked {
                    queue_name: col(row, "queue_name")?,
                    partition_name: col(row, "partition_name")?,
                });
            }
            Ok(out)
        })
    }
}

fn int(n: usize) -> Result<i32, StoreError> {
    i32::try_from(n).map_err(|_| StoreError::internal("ack flight too large"))
}
