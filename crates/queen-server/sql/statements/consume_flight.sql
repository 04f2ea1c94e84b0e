-- consume_flight: the common pops and acks of the moment as one statement and
-- one transaction (consumer group commit, store/flights.rs): up to
-- cardinality($4) hinted wildcard pops of one queue and group, and any number
-- of whole-lease acks of any queue and group. Either list may be empty.
--
-- Acks (`acked`): each request (`member`, its position in the arrays $8-$12)
-- acknowledges every message of a live lease `completed`, in delivery order.
-- For member k, moves group $8[k]'s cursor on partition $9[k] to the end of
-- lease $10[k] and releases it, only when the lease is live, the acked
-- transactionIds (the slice of $13 from $11[k], $12[k] long) are exactly the
-- lease's span in offset order (read from the span's segments, one index
-- range bounded at both ends, offsets deleted one by one left out) and so
-- their count is the span's length. An `ack` row per member it applied, with
-- the queue's and partition's names; a member with no row differs somewhere:
-- the caller then runs queen.ack_batch for it, which answers every other case
-- (partial acks, other statuses, expired or unknown leases, repeats of a
-- committed ack, several partitions, deleted messages). The outcome of a row
-- is what queen.ack_batch answers for the same items: all succeed, the last
-- one releases the lease. Two members naming one lease: at most one applies.
--
-- Pops (`pick`, `num`, `c`): picks up to cardinality($4) hinted partitions
-- ($7, names in the order to try them) whose cursor row for group $2 exists,
-- has no live lease and has messages past the cursor, least recently
-- consumed first; locks those cursor rows (a row another pop is claiming
-- right now is skipped, a row leased meanwhile fails the recheck after the
-- lock), numbers them 1, 2, ... in that order (`member`), leases up to $3
-- messages from each cursor for $5 seconds (60 when not positive) held by
-- $6, under a lease id minted from the row's key and $4[member]
-- (queen.lease_mint), and returns each leased range as stored: `pop` rows
-- (with the lease id), one per segment with its arrays sliced to the range, ordered by
-- member and segment. Each partition goes to one member only, and members
-- past the number of free partitions get no row. The segments read are
-- exactly those from the range's start to the one holding its end (an index
-- range bounded at both ends). The broker checks that each member's slices
-- cover its range without a hole or an offset deleted one by one; if not, it
-- clears that lease and the pop calls queen.pop_queue, which handles every
-- case (first contact, delay, window, holes, deletions, drained hints, the
-- walk), as does a pop that got no row. Used only when the queue has no delay
-- and no window buffer, the pop names no partition, claims one partition and
-- is not auto-acked.
--
-- The two parts see one snapshot and touch different cursor rows: an ack
-- needs a live lease, a pop a row without one (the same now()). A partition
-- an ack releases here is free for the next statement's pops.
-- Parameters: $1 queue id, $2 group, $3 batch, $4 lease ids (one per pop),
-- $5 lease seconds, $6 holder, $7 hints; $8 groups, $9 partition ids,
-- $10 lease ids, $11 first index into $13, $12 counts (one per ack),
-- $13 the acked transactionIds.
-- Called by: `ConsumeFly::fly` (store/consume.rs), outside transactions.
WITH acked AS (
    UPDATE queen.log_consumers lc
    SET committed_offset = lc.lease_end_offset,
        lease_expires_at = NULL,
        retry_count = 0,
        total_consumed = lc.total_consumed + (lc.lease_end_offset - lc.committed_offset),
        batches_consumed = lc.batches_consumed + 1,
        last_consumed_at = now()
    FROM unnest($8::text[], $9::uuid[], $10::uuid[], $11::integer[], $12::integer[])
             WITH ORDINALITY AS a(grp, pid, lease, first, cnt, member)
    JOIN queen.partitions pt ON pt.id = a.pid
    JOIN queen.queues q ON q.id = pt.queue_id
    WHERE lc.partition_id = a.pid AND lc.consumer_group = a.grp
      AND lc.lease_id = a.lease AND lc.lease_expires_at > now()
      AND lc.lease_end_offset - lc.committed_offset = a.cnt
      AND ($13::text[])[a.first : a.first + a.cnt - 1] = ARRAY(
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
), pick AS (
    SELECT lc.partition_id, pt.name, lc.last_consumed_at AS consumed_at, h.n AS hint_at,
           greatest(lc.committed_offset + 1, pt.low_offset) AS s,
           least(pt.next_offset - 1, greatest(lc.committed_offset + 1, pt.low_offset) + $3::integer - 1) AS e
    FROM unnest($7::text[]) WITH ORDINALITY AS h(name, n)
    JOIN queen.partitions pt ON pt.queue_id = $1::uuid AND pt.name = h.name
    JOIN queen.log_consumers lc ON lc.partition_id = pt.id AND lc.consumer_group = $2::text
    WHERE (lc.lease_expires_at IS NULL OR lc.lease_expires_at <= now())
      AND pt.next_offset > greatest(lc.committed_offset + 1, pt.low_offset)
    ORDER BY lc.last_consumed_at NULLS FIRST, h.n
    LIMIT cardinality($4::uuid[])
    FOR UPDATE OF lc SKIP LOCKED
), num AS (
    SELECT pick.partition_id, pick.name, pick.s, pick.e,
           row_number() OVER (ORDER BY pick.consumed_at NULLS FIRST, pick.hint_at) AS member
    FROM pick
), c AS (
    UPDATE queen.log_consumers l
    SET lease_id = queen.lease_mint(l.cursor_key, ($4::uuid[])[num.member]), lease_end_offset = num.e,
        lease_expires_at = now() + make_interval(secs => CASE WHEN $5::integer > 0 THEN $5::integer ELSE 60 END),
        lease_holder = $6::text
    FROM num
    WHERE l.partition_id = num.partition_id AND l.consumer_group = $2::text
    RETURNING num.member, num.partition_id, num.name, num.s, num.e, l.lease_id
)
SELECT 'pop'::text AS kind, c.member, c.partition_id, c.lease_id, c.name AS partition_name, NULL::text AS queue_name,
       c.s AS range_start, c.e AS range_end, sg.last_offset AS segment_end,
       greatest(sg.first_offset, c.s) AS first_offset,
       sg.message_ids[greatest(c.s - sg.first_offset + 1, 1) : c.e - sg.first_offset + 1] AS message_ids,
       sg.transaction_ids[greatest(c.s - sg.first_offset + 1, 1) : c.e - sg.first_offset + 1] AS transaction_ids,
       sg.trace_ids[greatest(c.s - sg.first_offset + 1, 1) : c.e - sg.first_offset + 1] AS trace_ids,
       sg.payloads[greatest(c.s - sg.first_offset + 1, 1) : c.e - sg.first_offset + 1] AS payloads,
       sg.producer_subs[greatest(c.s - sg.first_offset + 1, 1) : c.e - sg.first_offset + 1] AS producer_subs,
       sg.created_at,
       EXISTS (SELECT 1 FROM unnest(sg.deleted_offsets) AS d(o) WHERE d.o BETWEEN c.s AND c.e) AS has_deleted
FROM c
JOIN queen.segments sg ON sg.partition_id = c.partition_id
 AND sg.last_offset >= c.s
 AND sg.last_offset <= (SELECT min(x.last_offset) FROM queen.segments x
                        WHERE x.partition_id = c.partition_id AND x.last_offset >= c.e)
UNION ALL
SELECT 'ack', acked.member, NULL, NULL, acked.partition_name, acked.queue_name,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM acked
ORDER BY kind, member, segment_end
