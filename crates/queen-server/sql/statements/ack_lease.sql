-- ack_lease: the common ack as one statement: every message of a live lease
-- acknowledged `completed`, in delivery order, in one request. Moves group
-- $1's cursor on partition $2 to the end of lease $3 and releases it, only
-- when the lease is live, the acked transactionIds ($4) are exactly the
-- lease's span in offset order (read from the span's segments, one index
-- range bounded at both ends, offsets deleted one by one left out) and so
-- their count is the span's length. Returns the queue's and partition's
-- names (one row), or no row when anything differs: the caller then runs
-- queen.ack_batch, which answers every other case (partial acks, other
-- statuses, expired or unknown leases, repeats of a committed ack, several
-- partitions, deleted messages). The outcome of a row is what
-- queen.ack_batch answers for the same items: all succeed, the last one
-- releases the lease.
-- Called by: `ack_with` (store/ack.rs), outside transactions.
UPDATE queen.log_consumers lc
SET committed_offset = lc.lease_end_offset,
    lease_expires_at = NULL,
    retry_count = 0,
    total_consumed = lc.total_consumed + (lc.lease_end_offset - lc.committed_offset),
    batches_consumed = lc.batches_consumed + 1,
    last_consumed_at = now()
FROM queen.partitions pt
JOIN queen.queues q ON q.id = pt.queue_id
WHERE pt.id = $2::uuid
  AND lc.partition_id = $2::uuid AND lc.consumer_group = $1::text
  AND lc.lease_id = $3::uuid AND lc.lease_expires_at > now()
  AND lc.lease_end_offset - lc.committed_offset = cardinality($4::text[])
  AND $4::text[] = ARRAY(
        SELECT u.t
        FROM queen.segments sg,
             unnest(sg.transaction_ids[greatest(lc.committed_offset + 2 - sg.first_offset, 1)
                                       : lc.lease_end_offset + 1 - sg.first_offset])
                 WITH ORDINALITY AS u(t, n)
        WHERE sg.partition_id = $2::uuid AND sg.last_offset > lc.committed_offset
          AND sg.last_offset <= (SELECT min(x.last_offset) FROM queen.segments x
                                 WHERE x.partition_id = $2::uuid AND x.last_offset >= lc.lease_end_offset)
          AND NOT (sg.deleted_offsets IS NOT NULL
                   AND greatest(sg.first_offset, lc.committed_offset + 1) + u.n - 1 = ANY (sg.deleted_offsets))
        ORDER BY sg.last_offset, u.n)
RETURNING q.name AS queue_name, pt.name AS partition_name
