-- pop_hinted: the common wildcard pop as one statement, for one or several
-- waiting pops at once (consumer group commit, store/flights.rs). Picks up to
-- cardinality($4) hinted partitions ($7, names in the order to try them)
-- whose cursor row for group $2 exists, has no live lease and has messages
-- past the cursor, least recently consumed first; locks those cursor rows (a
-- row another pop is claiming right now is skipped, a row leased meanwhile
-- fails the recheck after the lock), numbers them 1, 2, ... in that order
-- (`member`), leases up to $3 messages from each cursor under lease
-- $4[member] for $5 seconds (60 when not positive) held by $6, and returns
-- each leased range as stored: one row per segment with its arrays sliced to
-- the range, ordered by member. Each partition goes to one member only, and
-- members past the number of free partitions get no row.
-- The segments read are exactly those from the range's start to the one
-- holding its end (an index range bounded at both ends).
-- The broker checks that each member's slices cover its range without a hole
-- or an offset deleted one by one; if not, it clears that lease and the pop
-- calls queen.pop_queue, which handles every case (first contact, delay,
-- window, holes, deletions, drained hints, the walk), as does a pop that got
-- no row. Used only when the queue has no delay and no window buffer, the pop
-- names no partition, claims one partition and is not auto-acked.
-- Parameters: $1 queue id, $2 group, $3 batch, $4 lease ids (one per pop),
-- $5 lease seconds, $6 holder, $7 hints.
-- Called by: `PopFly::fly` (store/consume.rs).
WITH pick AS (
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
    SET lease_id = ($4::uuid[])[num.member], lease_end_offset = num.e,
        lease_expires_at = now() + make_interval(secs => CASE WHEN $5::integer > 0 THEN $5::integer ELSE 60 END),
        lease_holder = $6::text
    FROM num
    WHERE l.partition_id = num.partition_id AND l.consumer_group = $2::text
    RETURNING num.member, num.partition_id, num.name, num.s, num.e
)
SELECT c.member, c.partition_id, c.name AS partition_name, c.s AS range_start, c.e AS range_end,
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
ORDER BY c.member, sg.last_offset
