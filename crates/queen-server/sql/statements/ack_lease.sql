-- ack_lease: the common ack as one statement, for one or several waiting ack
-- requests at once (consumer group commit, store/flights.rs): each request
-- (`member`, its position in the arrays) acknowledges every message of a
-- live lease `completed`, in delivery order. For member k, moves group
-- $1[k]'s cursor on partition $2[k] to the end of lease $3[k] and releases
-- it, only when the lease is live, the acked transactionIds (the slice of $6
-- from $4[k], $5[k] long) are exactly the lease's span in offset order (read
-- from the span's segments, one index range bounded at both ends, offsets
-- deleted one by one left out) and so their count is the span's length.
-- Returns one row per member it applied, with the queue's and partition's
-- names; a member with no row differs somewhere: the caller then runs
-- queen.ack_batch for it, which answers every other case (partial acks,
-- other statuses, expired or unknown leases, repeats of a committed ack,
-- several partitions, deleted messages). The outcome of a row is what
-- queen.ack_batch answers for the same items: all succeed, the last one
-- releases the lease. Two members naming one lease: at most one applies.
-- Called by: `AckFly::fly` (store/consume.rs), outside transactions.
UPDATE queen.log_consumers lc
SET committed_offset = lc.lease_end_offset,
    lease_expires_at = NULL,
    retry_count = 0,
    total_consumed = lc.total_consumed + (lc.lease_end_offset - lc.committed_offset),
    batches_consumed = lc.batches_consumed + 1,
    last_consumed_at = now()
FROM unnest($1::text[], $2::uuid[], $3::uuid[], $4::integer[], $5::integer[])
         WITH ORDINALITY AS a(grp, pid, lease, first, cnt, member)
JOIN queen.partitions pt ON pt.id = a.pid
JOIN queen.queues q ON q.id = pt.queue_id
WHERE lc.partition_id = a.pid AND lc.consumer_group = a.grp
  AND lc.lease_id = a.lease AND lc.lease_expires_at > now()
  AND lc.lease_end_offset - lc.committed_offset = a.cnt
  AND ($6::text[])[a.first : a.first + a.cnt - 1] = ARRAY(
        SELECT u.t
        FROM queen.segments sg,
             unnest(sg.transaction_ids[greatest(lc.committed_offset + 2 - sg.first_offset, 1)
                                       : lc.lease_end_offset + 1 - sg.first_offset])
                 WITH ORDINALITY AS u(t, n)
        WHERE sg.partition_id = a.pid AND sg.last_offset > lc.committed_offset
          AND sg.last_offset <= (SELECT min(x.last_offset) FROM queen.segments x
                                 WHERE x.partition_id = a.pid AND x.last_offset >= lc.lease_end_offset)
          AND NOT (sg.deleted_offsets IS NOT NULL
                   AND greatest(sg.first_offset, lc.committed_offset + 1) + u.n - 1 = ANY (sg.deleted_offsets))
        ORDER BY sg.last_offset, u.n)
RETURNING a.member, q.name AS queue_name, pt.name AS partition_name
