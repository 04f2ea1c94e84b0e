-- queen.push_bounded(...): queen.push_batch for a call where some items are
-- held to their queue's maxSize (p_bounded marks them; the broker decides
-- from its cached queue options, and calls without a bounded item go to
-- queen.push_batch directly and take no step of this). Returns push_batch's
-- rows plus, per item refused, a row 'full' with the bound (column bound)
-- and no partition: a refused item takes no room, creates no partition and
-- stores nothing. A stored transactionId is a duplicate and takes no room.
-- Items not bounded (spool replays) are always stored and count like the
-- others. With p_strict an overflow raises instead (P0001, naming the queue,
-- the bound and the first transactionId refused).
--
-- Exact across replicas, and in parallel while a queue is far from its
-- bound. Each bounded queue has 4 slots, transaction-level advisory locks
-- (classes 21024-21027, key hashtext of the queue id), held until the call's
-- transaction ends. Two ways through:
-- * optimistic (p_decide false: only for a call alone in its transaction,
--   which the caller can make again; with at most 2 000 items of each
--   bounded queue): append every item (push_batch), then take a free slot
--   of each bounded queue without waiting, count this call's fresh messages
--   under it (queen.queue_fill), and bound what the queue holds: an exact
--   count kept in a slot's row plus everything appended since (consumption
--   only lowers it). When that bound is not low enough, count exactly
--   (queen.queue_backlog, which reads every partition) and keep the count in
--   this slot's row (never another's, so no call waits for another). At most 3 other optimistic calls hold a slot, each appending at
--   most 2 000 items not yet visible, so when the bound plus 6 000 is within
--   maxSize the call commits: the last call to take a slot has counted
--   every other one as committed or as a slot holder, so the bound holds.
--   The pushes of a queue far from its bound run side by side and pay a
--   slot, a counter and a few rows read; an exact count only once per about
--   (maxSize - 6 000 - what it holds) messages pushed. Otherwise (no free
--   slot, or not that much room) it raises QB001, undoing everything, and
--   the broker calls again deciding.
-- * deciding (p_decide true: calls inside a longer transaction, such as
--   /transaction and timer fires, and the second try of the others): every
--   partition of the call created and locked (id order), then all 4 slots
--   of each bounded queue (waiting for the optimistic calls holding them to
--   commit; partitions before slots, the order the optimistic way takes
--   too, so the two never deadlock), then fresh bounded items admitted in
--   array order while the count stays within the bound, the rest refused;
--   partitions this call created that received nothing are removed again.
--   Calls deciding on one queue take turns.
-- Called by: the store's push path (`append_bounded`: the batcher's flights
-- optimistic first; pushes inside /transaction and timer fires deciding).

CREATE OR REPLACE FUNCTION queen.push_bounded(
    p_queue_ids      uuid[],
    p_partitions     text[],
    p_message_ids    uuid[],
    p_txn_ids        text[],
    p_trace_ids      uuid[],
    p_payloads       text[],
    p_producer_subs  text[],
    p_strict         boolean,
    p_bounded        boolean[],
    p_decide         boolean
) RETURNS TABLE (idx integer, status text, message_id uuid, partition_id uuid, bound integer)
LANGUAGE plpgsql AS $$
DECLARE
    -- the queues with a bounded item in the call
    v_bqs     uuid[];
    -- push_batch's answer in the optimistic way
    v_idx     integer[];
    v_status  text[];
    v_mids    uuid[];
    v_pids    uuid[];
    -- a bounded queue of the call: id, key, bound, configuration, the slot
    -- taken, a bound on what it holds, its counters' sum
    v_q       uuid;
    v_k       integer;
    v_bound   integer;
    v_version bigint;
    v_slot    integer;
    v_upper   bigint;
    v_sum     bigint;
    -- partitions the deciding step created
    v_created uuid[];
    -- positions (1-based) refused by their queue's maxSize, and that bound
    v_refused integer[];
    v_bounds  integer[];
    v_qname   text;
    -- bounded queues this call could overflow: id, messages held, bound, name
    v_tight   uuid[];
    v_held    bigint[];
    v_max     integer[];
    v_tnames  text[];
BEGIN
    SELECT array_agg(DISTINCT t.q) INTO v_bqs FROM unnest(p_queue_ids, p_bounded) AS t(q, b) WHERE t.b;
    -- optimistic: append, then a free slot and room for what others may add
    IF NOT p_decide THEN
        IF EXISTS (SELECT 1 FROM unnest(p_queue_ids, p_bounded) AS t(q, b)
                   GROUP BY t.q HAVING bool_or(t.b) AND count(*) > 2000) THEN
            RAISE EXCEPTION 'more than 2000 items of one bounded queue: decide' USING ERRCODE = 'QB001';
        END IF;
        SELECT array_agg(a.idx), array_agg(a.status), array_agg(a.message_id), array_agg(a.partition_id)
        INTO v_idx, v_status, v_mids, v_pids
        FROM queen.push_batch(p_queue_ids, p_partitions, p_message_ids, p_txn_ids, p_trace_ids,
                              p_payloads, p_producer_subs, false, NULL, NULL, NULL) a;
        FOR v_q, v_k, v_bound, v_version IN
            SELECT q.id, hashtext(q.id::text), q.max_size, q.config_version FROM queen.queues q
            WHERE q.id = ANY (v_bqs) AND q.max_size > 0
            ORDER BY 2
        LOOP
            v_slot := NULL;
            SELECT s.i INTO v_slot FROM generate_series(0, 3) AS s(i)
            WHERE pg_try_advisory_xact_lock(21024 + s.i, v_k) LIMIT 1;
            IF v_slot IS NULL THEN
                RAISE EXCEPTION 'no free slot: decide' USING ERRCODE = 'QB001';
            END IF;
            -- this call's fresh messages of the queue, counted under its slot
            INSERT INTO queen.queue_fill (queue_id, slot, pushed)
            SELECT v_q, v_slot, count(*)
            FROM unnest(v_idx, v_status) AS u(i, s)
            WHERE u.s = 'queued' AND p_queue_ids[u.i] = v_q
            ON CONFLICT (queue_id, slot) DO UPDATE SET pushed = queen.queue_fill.pushed + excluded.pushed;
            -- statements of their own from here: snapshots taken with the slot held.
            -- What the queue holds is at most an exact count taken earlier
            -- plus what was appended since (consumption only lowers it); each
            -- slot keeps its own last count, the lowest bound is taken.
            SELECT min(b.base_backlog + t.total - b.base_pushed)
            INTO v_upper
            FROM queen.queue_fill b,
                 (SELECT sum(f.pushed) AS total FROM queen.queue_fill f WHERE f.queue_id = v_q) t
            WHERE b.queue_id = v_q AND b.base_version = v_version;
            IF v_upper IS NULL OR v_upper + 3 * 2000 > v_bound THEN
                -- count exactly, with the counters at the same snapshot, and
                -- keep both in this slot's row for the next calls
                SELECT queen.queue_backlog(v_q),
                       coalesce((SELECT sum(f.pushed) FROM queen.queue_fill f WHERE f.queue_id = v_q), 0)
                INTO v_upper, v_sum;
                UPDATE queen.queue_fill
                SET base_version = v_version, base_backlog = v_upper, base_pushed = v_sum
                WHERE queue_id = v_q AND slot = v_slot;
                IF v_upper + 3 * 2000 > v_bound THEN
                    RAISE EXCEPTION 'near the bound: decide' USING ERRCODE = 'QB001';
                END IF;
            END IF;
        END LOOP;
        RETURN QUERY SELECT u.i, u.s, u.m, u.p, NULL::integer
                     FROM unnest(v_idx, v_status, v_mids, v_pids) AS u(i, s, m, p);
        RETURN;
    END IF;

    -- deciding: partitions created and locked (id order), then every slot
    WITH made AS (
        INSERT INTO queen.partitions (id, queue_id, name)
        SELECT gen_random_uuid(), d.q, d.p
        FROM (SELECT DISTINCT t.q, t.p FROM unnest(p_queue_ids, p_partitions) AS t(q, p)) d
        WHERE NOT EXISTS (SELECT 1 FROM queen.partitions pt WHERE pt.queue_id = d.q AND pt.name = d.p)
        ON CONFLICT (queue_id, name) DO NOTHING
        RETURNING id
    )
    SELECT array_agg(made.id) INTO v_created FROM made;
    PERFORM 1
    FROM (SELECT pt.id
          FROM queen.partitions pt
          JOIN (SELECT DISTINCT t.q, t.p FROM unnest(p_queue_ids, p_partitions) AS t(q, p)) d
            ON pt.queue_id = d.q AND pt.name = d.p
          ORDER BY pt.id
          FOR UPDATE OF pt) l;
    PERFORM pg_advisory_xact_lock(21024 + l.i, l.k)
    FROM (SELECT k.k, s.i
          FROM (SELECT DISTINCT hashtext(b.q::text) AS k FROM unnest(v_bqs) AS b(q)) k,
               generate_series(0, 3) AS s(i)
          ORDER BY 1, 2) l;
    -- the bounded queues this call could take past their bound, with what they hold
    SELECT array_agg(b.id), array_agg(b.held), array_agg(b.max_size), array_agg(b.name)
    INTO v_tight, v_held, v_max, v_tnames
    FROM (SELECT q.id, q.name, q.max_size, queen.queue_backlog(q.id) AS held,
                 (SELECT count(*) FROM unnest(p_queue_ids) AS u(uq) WHERE u.uq = q.id) AS n
          FROM queen.queues q
          WHERE q.id = ANY (v_bqs) AND q.max_size > 0) b
    WHERE b.held + b.n > b.max_size;
    -- which items fit: fresh ones in array order while there is room
    IF v_tight IS NOT NULL THEN
        WITH ranked AS (
            SELECT t.i::integer AS i, t.b, bq.name, bq.max_size,
                   bq.held + row_number() OVER (PARTITION BY t.q ORDER BY t.i) AS fill
            FROM unnest(p_queue_ids, p_partitions, p_bounded) WITH ORDINALITY AS t(q, p, b, i)
            JOIN unnest(v_tight, v_held, v_max, v_tnames) AS bq(id, held, max_size, name)
              ON bq.id = t.q
            -- a stored transactionId takes no room (one index probe per item)
            WHERE (SELECT k.message_id FROM queen.message_keys k
                   WHERE k.partition_id = (SELECT pt.id FROM queen.partitions pt
                                           WHERE pt.queue_id = t.q AND pt.name = t.p)
                     AND k.transaction_id = p_txn_ids[t.i]) IS NULL
        )
        SELECT array_agg(r.i ORDER BY r.i), array_agg(r.max_size ORDER BY r.i),
               (array_agg(r.name ORDER BY r.i))[1]
        INTO v_refused, v_bounds, v_qname
        FROM ranked r
        WHERE r.b AND r.fill > r.max_size;
    END IF;
    IF p_strict AND v_refused IS NOT NULL THEN
        RAISE EXCEPTION 'PUSH operation failed: queue % is full (maxSize %): transactionId % does not fit',
            v_qname, v_bounds[1], p_txn_ids[v_refused[1]] USING ERRCODE = 'P0001';
    END IF;

    RETURN QUERY
    SELECT a.idx, a.status, a.message_id, a.partition_id, NULL::integer
    FROM queen.push_batch(p_queue_ids, p_partitions, p_message_ids, p_txn_ids, p_trace_ids,
                          p_payloads, p_producer_subs, p_strict, NULL, v_refused, 0::smallint) a
    UNION ALL
    SELECT r.i, 'full', p_message_ids[r.i], NULL::uuid, r.b
    FROM unnest(v_refused, v_bounds) AS r(i, b);
    -- a partition made here for refused items only holds nothing: not kept
    IF v_created IS NOT NULL THEN
        DELETE FROM queen.partitions pt WHERE pt.id = ANY (v_created) AND pt.next_offset = 1;
    END IF;
END;
$$;
