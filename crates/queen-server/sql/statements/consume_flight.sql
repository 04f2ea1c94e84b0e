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
-- Pops (`hinted`, `pick`, `fresh`, `first`, `num`, `c`, `made`): the hinted
-- partitions ($7, names in the order to try them) are looked up once. Those
-- whose cursor row for group $2 has no live lease and messages past the cursor
-- are picked, least recently consumed first, and their rows locked (a row
-- another pop is claiming right now is skipped, a row leased meanwhile fails
-- the recheck after the lock; "no live lease" is written as one expression
-- with no statistics, since statistics taken while every row was leased made
-- the planner scan the whole cursor table once per hinted partition); those
-- the group has no cursor row on yet and
-- that hold messages past where its subscription starts (first contact:
-- queen.subscription_start of queue $14, mode $15, from $16, and
-- queen.offset_before, as queen.claim_partition does, for the first twice as
-- many as there are pops) come next to them in the same order, as never
-- consumed, unless another transaction is making that row
-- right now (the advisory lock of queen.cursor_lock_key, only tried: the
-- statement never waits for another pop). Up to cardinality($4) of them are
-- numbered 1, 2, ... (`member`). Each gets a lease of up to $3 messages from
-- its cursor for $5 seconds (60 when not positive) held by $6, under a lease
-- id minted from the row's key and $4[member] (queen.lease_mint): a picked row
-- is updated, a first contact's row is inserted already leased (a row some
-- other pop made meanwhile wins, and that member gets nothing). Each leased
-- range comes back as stored: `pop` rows (with the lease id), one per segment
-- with its arrays sliced to the range, ordered by member and segment. Each
-- partition goes to one member only, and members past the number of free
-- partitions get no row. The segments read are exactly those from the range's
-- start to the one holding its end (an index range bounded at both ends).
-- Every hinted partition with nothing past the group's cursor, or past where a
-- first contact would start it, or unknown, comes back as a `drained` row with
-- its name, so the broker stops hinting it to the group until it is written
-- again, as queen.pop_queue reports them. The broker checks that each member's
-- slices cover its range without a hole or an offset deleted one by one; if
-- not, it clears that lease and the pop calls queen.pop_queue, which handles
-- every case (delay, window, holes, deletions, the walk), as does a pop that
-- got no row. Used only when the queue has no delay, no window buffer, no ttl
-- and no retry delay, the pop names no partition, claims one partition and is
-- not auto-acked. A partition resting after a failed delivery (a retry hold
-- left by queen.ack_batch: no lease owner, lease_expires_at ahead) is skipped
-- like a live lease. A picked row whose lease expired counts one failed
-- delivery attempt of its head, as queen.claim_partition does; each `pop` row
-- carries the row's attempts and attempt_end (message at offset o is on
-- attempt attempts + 1 when o <= attempt_end, else 1).
--
-- The two parts see one snapshot and touch different cursor rows: an ack
-- needs a live lease, a pop a row without one (the same now()), or no row.
-- A partition an ack releases here is free for the next statement's pops.
-- Parameters: $1 queue id, $2 group, $3 batch, $4 lease ids (one per pop),
-- $5 lease seconds, $6 holder, $7 hints; $8 groups, $9 partition ids,
-- $10 lease ids, $11 first index into $13, $12 counts (one per ack),
-- $13 the acked transactionIds; $14 queue name, $15 subscription mode,
-- $16 subscription from (first contacts of a consumer group).
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
), hinted AS (
    SELECT h.name, h.n AS hint_at, pt.id, pt.next_offset, pt.low_offset, lc.committed_offset,
           lc.partition_id IS NOT NULL AS has_row
    FROM unnest($7::text[]) WITH ORDINALITY AS h(name, n)
    LEFT JOIN queen.partitions pt ON pt.queue_id = $1::uuid AND pt.name = h.name
    LEFT JOIN queen.log_consumers lc ON lc.partition_id = pt.id AND lc.consumer_group = $2::text
), pick AS (
    SELECT lc.partition_id, hd.name, lc.last_consumed_at AS consumed_at, hd.hint_at,
           greatest(lc.committed_offset + 1, hd.low_offset) AS s,
           least(hd.next_offset - 1, greatest(lc.committed_offset + 1, hd.low_offset) + $3::integer - 1) AS e
    FROM hinted hd
    JOIN queen.log_consumers lc ON lc.partition_id = hd.id AND lc.consumer_group = $2::text
    WHERE coalesce(lc.lease_expires_at, '-infinity') <= now()
      AND hd.next_offset > greatest(lc.committed_offset + 1, hd.low_offset)
    ORDER BY lc.last_consumed_at NULLS FIRST, hd.hint_at
    LIMIT cardinality($4::uuid[])
    FOR UPDATE OF lc SKIP LOCKED
), fresh AS (
    SELECT c.*,
           CASE WHEN $2::text = '__QUEUE_MODE__' THEN c.low_offset - 1
                ELSE queen.offset_before(c.id, queen.subscription_start($2::text, $14::text, c.name, '',
                                                                        $15::text, $16::text)) END AS start
    FROM (SELECT hd.id, hd.name, hd.hint_at, hd.next_offset, hd.low_offset
          FROM hinted hd
          WHERE hd.id IS NOT NULL AND NOT hd.has_row AND hd.next_offset > hd.low_offset
          ORDER BY hd.hint_at
          LIMIT 2 * cardinality($4::uuid[])) c
    OFFSET 0
), first AS (
    SELECT f.id AS partition_id, f.name, f.hint_at, f.start,
           greatest(f.start + 1, f.low_offset) AS s,
           least(f.next_offset - 1, greatest(f.start + 1, f.low_offset) + $3::integer - 1) AS e
    FROM fresh f
    WHERE f.next_offset > greatest(f.start + 1, f.low_offset)
      AND pg_try_advisory_xact_lock(21023, queen.cursor_lock_key(f.id, $2::text))
), num AS (
    SELECT x.* FROM (
        SELECT y.*, row_number() OVER (ORDER BY y.consumed_at NULLS FIRST, y.hint_at) AS member
        FROM (SELECT pick.partition_id, pick.name, pick.s, pick.e, pick.consumed_at, pick.hint_at,
                     NULL::bigint AS start
              FROM pick
              UNION ALL
              SELECT first.partition_id, first.name, first.s, first.e, NULL, first.hint_at, first.start
              FROM first) y) x
    WHERE x.member <= cardinality($4::uuid[])
), c AS (
    UPDATE queen.log_consumers l
    SET lease_id = queen.lease_mint(l.cursor_key, ($4::uuid[])[num.member]), lease_end_offset = num.e,
        lease_expires_at = now() + make_interval(secs => CASE WHEN $5::integer > 0 THEN $5::integer ELSE 60 END),
        lease_holder = $6::text,
        -- an expired lease taken over: one failed delivery of the head
        attempts = CASE WHEN l.lease_id IS NOT NULL AND l.lease_expires_at IS NOT NULL
                             AND l.lease_end_offset > l.committed_offset
                        THEN CASE WHEN l.attempt_end > l.committed_offset THEN l.attempts ELSE 0 END + 1
                        ELSE l.attempts END,
        attempt_end = CASE WHEN l.lease_id IS NOT NULL AND l.lease_expires_at IS NOT NULL
                                AND l.lease_end_offset > l.committed_offset
                           THEN greatest(l.attempt_end, l.lease_end_offset)
                           ELSE l.attempt_end END
    FROM num
    WHERE num.start IS NULL AND l.partition_id = num.partition_id AND l.consumer_group = $2::text
    RETURNING num.member, num.partition_id, num.name, num.s, num.e, l.lease_id, l.attempts, l.attempt_end
), made AS (
    INSERT INTO queen.log_consumers AS l (partition_id, consumer_group, committed_offset, cursor_key, lease_id,
                                          lease_end_offset, lease_expires_at, lease_holder)
    OVERRIDING SYSTEM VALUE
    SELECT k.partition_id, $2::text, k.start, k.key, queen.lease_mint(k.key, ($4::uuid[])[k.member]), k.e,
           now() + make_interval(secs => CASE WHEN $5::integer > 0 THEN $5::integer ELSE 60 END), $6::text
    FROM (SELECT num.*, nextval(pg_get_serial_sequence('queen.log_consumers', 'cursor_key')) AS key
          FROM num WHERE num.start IS NOT NULL OFFSET 0) k
    ON CONFLICT DO NOTHING
    RETURNING l.partition_id, l.lease_id
), leased AS (
    SELECT c.member, c.partition_id, c.name, c.s, c.e, c.lease_id, c.attempts, c.attempt_end FROM c
    UNION ALL
    SELECT num.member, num.partition_id, num.name, num.s, num.e, made.lease_id, 0, 0::bigint
    FROM made JOIN num ON num.partition_id = made.partition_id AND num.start IS NOT NULL
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
       EXISTS (SELECT 1 FROM unnest(sg.deleted_offsets) AS d(o) WHERE d.o BETWEEN c.s AND c.e) AS has_deleted,
       c.attempts, c.attempt_end
FROM leased c
JOIN queen.segments sg ON sg.partition_id = c.partition_id
 AND sg.last_offset >= c.s
 AND sg.last_offset <= (SELECT min(x.last_offset) FROM queen.segments x
                        WHERE x.partition_id = c.partition_id AND x.last_offset >= c.e)
UNION ALL
SELECT 'ack', acked.member, NULL, NULL, acked.partition_name, acked.queue_name,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM acked
UNION ALL
SELECT 'drained', hd.hint_at, hd.id, NULL, hd.name, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM hinted hd
LEFT JOIN fresh f ON f.id = hd.id
WHERE cardinality($4::uuid[]) > 0
  AND NOT coalesce(hd.next_offset > greatest(coalesce(hd.committed_offset + 1, f.start + 1, hd.low_offset),
                                             hd.low_offset), false)
ORDER BY kind, member, segment_end
