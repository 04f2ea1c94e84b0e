//! Streams: the cycle, state operations, the source ack and the sink
//! pushes in one transaction (see the module docs of `streams`).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::super::op::{with_op, DbOp};
use super::super::push::append_with;
use super::super::queues::ensure_queue_with;
use super::super::{col, NewMessage, Store};
use super::{is_source_partition, AckDone, CycleError, CycleInput, CycleOutcome, CycleRefusal};
use uuid::Uuid;

impl Store {
    /// Commits one cycle, all of it or nothing; see the module docs.
    pub async fn stream_cycle(&self, input: &CycleInput) -> Result<CycleOutcome, CycleError> {
        with_op!(self.db, DbOp::StreamsCycle, |client| {
            let tx = client.transaction().await?;
            let outcome = cycle_in(&tx, input).await?;
            tx.commit().await?;
            Ok(outcome)
        })
    }
}

fn refused(r: CycleRefusal) -> CycleError {
    CycleError::Refused(r)
}

async fn cycle_in(
    tx: &deadpool_postgres::Transaction<'_>,
    input: &CycleInput,
) -> Result<CycleOutcome, CycleError> {
    let (qid, pid) = (input.query_id, input.partition_id);
    // 1. the query (a reset waits for this cycle) and the source partition
    let stmt = tx
        .prepare_cached("SELECT source_queue FROM queen_streams.queries WHERE id = $1 FOR SHARE")
        .await?;
    let Some(row) = tx.query_opt(&stmt, &[&qid]).await? else {
        return Err(refused(CycleRefusal::UnknownQuery));
    };
    let source_queue: String = col(&row, "source_queue")?;
    if !is_source_partition(tx, pid, &source_queue).await? {
        return Err(refused(CycleRefusal::UnknownPartition));
    }
    // 2. cycles of one (query, partition) commit one after the other
    let stmt = tx
        .prepare_cached(
            "SELECT pg_advisory_xact_lock(hashtextextended($1::uuid::text || '/' || $2::uuid::text, 20))",
        )
        .await?;
    tx.execute(&stmt, &[&qid, &pid]).await?;

    // 3. the state: every delete must find its row
    let keys: BTreeSet<&str> = input.state_ops.iter().map(|o| o.key.as_str()).collect();
    let mut created = 0i64;
    let mut removed = 0i64;
    if !keys.is_empty() {
        let key_list: Vec<&str> = keys.iter().copied().collect();
        let stmt = tx
            .prepare_cached(
                "SELECT key FROM queen_streams.state
                 WHERE query_id = $1 AND partition_id = $2 AND key = ANY ($3)
                 ORDER BY key FOR UPDATE",
            )
            .await?;
        let existing: BTreeSet<String> = tx
            .query(&stmt, &[&qid, &pid, &key_list])
            .await?
            .iter()
            .map(|r| col::<String>(r, "key"))
            .collect::<Result<_, _>>()?;
        // replay the ops in order: the final value of each key
        let mut last: BTreeMap<&str, Option<&str>> = BTreeMap::new();
        for op in &input.state_ops {
            let present = match last.get(op.key.as_str()) {
                Some(v) => v.is_some(),
                None => existing.contains(&op.key),
            };
            if op.value.is_none() && !present {
                return Err(refused(CycleRefusal::MissingKey(op.key.clone())));
            }
            last.insert(op.key.as_str(), op.value.as_deref());
        }
        let gone: Vec<&str> = last
            .iter()
            .filter(|(k, v)| v.is_none() && existing.contains(**k))
            .map(|(k, _)| *k)
            .collect();
        let (up_keys, up_values): (Vec<&str>, Vec<&str>) =
            last.iter().filter_map(|(k, v)| v.map(|v| (*k, v))).unzip();
        created = i64::try_from(up_keys.iter().filter(|k| !existing.contains(**k)).count())
            .unwrap_or_default();
        removed = i64::try_from(gone.len()).unwrap_or_default();
        if !gone.is_empty() {
            let stmt = tx
                .prepare_cached(
                    "DELETE FROM queen_streams.state
                     WHERE query_id = $1 AND partition_id = $2 AND key = ANY ($3)",
                )
                .await?;
            tx.execute(&stmt, &[&qid, &pid, &gone]).await?;
        }
        if !up_keys.is_empty() {
            let stmt = tx
                .prepare_cached(
                    "INSERT INTO queen_streams.state (query_id, partition_id, key, value, updated_at)
                     SELECT $1, $2, t.k, t.v::jsonb, now()
                     FROM unnest($3::text[], $4::text[]) AS t(k, v)
                     ON CONFLICT (query_id, partition_id, key)
                     DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at",
                )
                .await?;
            tx.execute(&stmt, &[&qid, &pid, &up_keys, &up_values])
                .await?;
        }
    }

    // 4. the source ack: the named message must lie inside the live lease
    let mut acked = None;
    if let Some(ack) = &input.ack {
        let stmt = tx
            .prepare_cached(
                "SELECT k.msg_offset FROM queen.message_keys k
                 WHERE k.partition_id = $1 AND k.transaction_id = $2",
            )
            .await?;
        let Some(row) = tx.query_opt(&stmt, &[&pid, &ack.transaction_id]).await? else {
            return Err(refused(CycleRefusal::MessageNotFound));
        };
        let offset: i64 = col(&row, "msg_offset")?;
        let stmt = tx
            .prepare_cached(
                "SELECT committed_offset, lease_id, lease_end_offset,
                        coalesce(lease_expires_at > now(), false) AS live
                 FROM queen.log_consumers
                 WHERE partition_id = $1 AND consumer_group = $2 FOR UPDATE",
            )
            .await?;
        let Some(cur) = tx.query_opt(&stmt, &[&pid, &ack.group]).await? else {
            return Err(refused(CycleRefusal::StaleLease));
        };
        let committed: i64 = col(&cur, "committed_offset")?;
        let lease: Option<Uuid> = col(&cur, "lease_id")?;
        let lease_end: Option<i64> = col(&cur, "lease_end_offset")?;
        let live: bool = col(&cur, "live")?;
        if offset <= committed {
            return Err(refused(CycleRefusal::AlreadyAcknowledged));
        }
        if !live || lease != Some(ack.lease_id) || lease_end.is_none_or(|end| offset > end) {
            return Err(refused(CycleRefusal::StaleLease));
        }
        // Where the cursor goes. A releasing cycle processed its batch: the
        // cursor moves `count` messages from the batch start (the committed
        // offset), at least to the named message, never past the lease. The
        // SDK names the last message of its own processing order (createdAt,
        // then message id), which need not be the highest offset of the
        // batch: a spooled push replayed late shares its createdAt (to the
        // millisecond) with the message stored before it and may carry an
        // older id. Moving only to the named message would hand the rest of
        // the processed batch out again, to be counted twice (found by
        // queen-chaos's stream workload). A prefix cycle (`release_lease:
        // false`, the gate) moves to the named message: its lease may have
        // carried earlier prefixes, so its count says nothing about where
        // the current prefix starts.
        let lease_end = lease_end.unwrap_or(offset);
        let target = match ack.count {
            Some(n) if input.release_lease => committed
                .saturating_add(i64::try_from(n).unwrap_or(i64::MAX))
                .max(offset)
                .min(lease_end),
            _ => offset,
        };
        let release = input.release_lease || target >= lease_end;
        let stmt = tx
            .prepare_cached(
                "UPDATE queen.log_consumers lc
                 SET committed_offset = $3,
                     lease_expires_at = CASE WHEN $4 THEN NULL ELSE lc.lease_expires_at END,
                     retry_count = CASE WHEN $4 THEN 0 ELSE lc.retry_count END,
                     total_consumed = lc.total_consumed + ($3 - lc.committed_offset),
                     batches_consumed = lc.batches_consumed + CASE WHEN $4 THEN 1 ELSE 0 END,
                     last_consumed_at = now()
                 FROM queen.partitions p
                 WHERE lc.partition_id = $1 AND lc.consumer_group = $2 AND p.id = lc.partition_id
                 RETURNING p.name",
            )
            .await?;
        let row = tx
            .query_one(&stmt, &[&pid, &ack.group, &target, &release])
            .await?;
        acked = Some(AckDone {
            lease_released: release,
            partition_name: Some(col(&row, "name")?),
        });
    }

    // 5. the sink pushes, through the push path's own SQL
    let mut pushed = Vec::new();
    if !input.pushes.is_empty() {
        let mut queue_ids: HashMap<&str, Uuid> = HashMap::new();
        let mut messages = Vec::with_capacity(input.pushes.len());
        for p in &input.pushes {
            let queue_id = match queue_ids.get(p.queue.as_str()) {
                Some(id) => *id,
                None => {
                    let row = ensure_queue_with(tx, &p.queue, &p.namespace, &p.task).await?;
                    queue_ids.insert(p.queue.as_str(), row.id);
                    row.id
                }
            };
            messages.push(NewMessage {
                queue_id,
                ..p.message.clone()
            });
        }
        pushed = append_with(tx, &messages, false).await?;
    }

    Ok(CycleOutcome {
        source_queue,
        state_ops_applied: input.state_ops.len(),
        rows_created: created,
        rows_removed: removed,
        pushed,
        acked,
    })
}
