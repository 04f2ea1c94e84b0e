-- queen.ack_batch(group, partitions, txn_ids, lease_ids, statuses, errors,
-- in_tx): applies acknowledgements for one consumer group, in (partition,
-- offset) order, so a cursor only moves forward.
-- Statuses: completed | success | failed | retry | dlq. `failed` with retries
-- left releases the lease and counts one retry (the first failure per
-- partition of one call); with none left, and `dlq`, the message goes to the
-- group's DLQ (queen.dead_letter) and the cursor moves past it. `retry`
-- releases the lease without counting. With p_in_tx, `failed` dead-letters at
-- once (transaction semantics) and any failure raises, so the caller's
-- transaction rolls back.
-- An ack of a message the group already committed succeeds whatever lease it
-- names. Otherwise a given lease id must name the live lease.
-- A partition whose items are all `completed` acks of known messages under
-- one lease (or none) takes a fast path: one cursor update to the highest
-- valid offset, with the outcomes of applying them one by one.
-- Every failed delivery that ends here (a `failed` or `retry` ack that
-- releases the lease) counts one delivery attempt of the partition's head
-- (attempts, attempt_end; see queen.claim_partition). A `failed` ack that
-- ends the lease (retried, or dead-lettered as the lease's last message,
-- also inside a transaction) with the queue's retryDelay set puts the
-- partition on hold: no lease owner (lease_id NULL) and lease_expires_at =
-- now() + queen.retry_wait of that attempt, which every pop honours as a
-- not-before; the item's retry_after_ms says how long. A hold is no lease:
-- acks naming a lease id are refused while it lasts, and an ack without one
-- does not end it.
-- Returns one row per item (idx = 1-based array position); `skipped` is the
-- number of offsets the item's cursor move passed over that no item of the
-- call named (what an ack of a conflating group's newest message retires
-- without a delivery; 0 for an item that moved nothing).
-- Called by: the store's ack path (`ack_with`: ack requests, and acks inside
-- transactions).

CREATE OR REPLACE FUNCTION queen.ack_batch(
    p_group          text,
    p_partition_ids  uuid[],
    p_txn_ids        text[],
    p_lease_ids      uuid[],
    p_statuses       text[],
    p_errors         text[],
    p_in_tx          boolean
) RETURNS TABLE (idx integer, success boolean, error text, queue_name text,
                 partition_name text, lease_released boolean, dlq boolean, skipped bigint,
                 retry_after_ms bigint)
LANGUAGE plpgsql
-- the statements inside get one generic plan each, made once per connection:
-- re-planning them on every call was a quarter of the call's CPU (issue 19,
-- docs/benchmarks.md), and none of their plans depends on the parameters
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    it         record;
    c          queen.log_consumers%ROWTYPE;
    v_limit    integer;
    v_active   boolean;
    v_status   text;
    v_released uuid[] := '{}';
    g          record;
    v_fast     uuid[] := '{}';
    v_lease_ok boolean;
    v_top      bigint;
    v_top_i    integer;
    v_rel      boolean;
    v_offs     bigint[];
    v_att      integer;
    v_wait     double precision;
BEGIN
    -- Where each acked message sits. An ack of many messages (32 or more on
    -- one partition) normally lists the group's current leased span, in
    -- delivery order and in one run: the span's transaction ids and offsets
    -- are read from its segments (one short index range per partition) into
    -- two arrays, and the k-th item of the partition's run takes the span's
    -- k-th offset when the transaction ids agree. (The two arrays are built
    -- by one aggregation, so they stay aligned whatever order the rows come
    -- in; an unexpected order only costs probes.) Anything else (another order, a message outside
    -- the span, a partition with fewer items) is looked up in message_keys,
    -- one index probe per item (a scalar subquery, so the planner cannot
    -- turn it into a scan of the whole table); for a few messages the probes
    -- are cheaper than unpacking whole segments.
    -- Items meet the span by partition only, one span row per partition, so
    -- no plan can compare every item with every message of the span.
    -- (The LIMIT 1 keeps the cursor lookup a probe of its primary key: as a
    -- plain join the planner read every cursor of the group. The segments
    -- read are exactly those from the cursor to the one holding the lease's
    -- last offset, an index range bounded at both ends.)
    WITH span AS (
        SELECT p.pid, min(p.first) AS first, array_agg(u.txn) AS txns,
               array_agg(s.first_offset + u.n - 1) AS offs
        FROM (SELECT x.pid, min(x.i) AS first
              FROM unnest(p_partition_ids) WITH ORDINALITY AS x(pid, i)
              GROUP BY x.pid HAVING count(*) >= 32) p
        CROSS JOIN LATERAL (
            SELECT l.committed_offset AS lo, l.lease_end_offset AS hi
            FROM queen.log_consumers l
            WHERE l.partition_id = p.pid AND l.consumer_group = p_group
              AND l.lease_end_offset > l.committed_offset
            LIMIT 1) lc
        CROSS JOIN LATERAL (
            SELECT sg.first_offset, sg.transaction_ids, sg.deleted_offsets
            FROM queen.segments sg
            WHERE sg.partition_id = p.pid AND sg.last_offset > lc.lo
              AND sg.last_offset <= (SELECT min(e.last_offset) FROM queen.segments e
                                     WHERE e.partition_id = p.pid AND e.last_offset >= lc.hi)) s
        CROSS JOIN LATERAL unnest(s.transaction_ids) WITH ORDINALITY AS u(txn, n)
        WHERE s.first_offset + u.n - 1 BETWEEN lc.lo + 1 AND lc.hi
          AND NOT (s.deleted_offsets IS NOT NULL AND (s.first_offset + u.n - 1) = ANY (s.deleted_offsets))
        GROUP BY p.pid
    )
    SELECT array_agg(coalesce(CASE WHEN sp.txns[a.i - sp.first + 1] = a.txn
                                   THEN sp.offs[a.i - sp.first + 1] END,
                              (SELECT k.msg_offset FROM queen.message_keys k
                               WHERE k.partition_id = a.pid AND k.transaction_id = a.txn))
                     ORDER BY a.i)
    INTO v_offs
    FROM unnest(p_partition_ids, p_txn_ids) WITH ORDINALITY AS a(pid, txn, i)
    LEFT JOIN span sp ON sp.pid = a.pid;

    -- Fast path: a partition whose items are all `completed` acks of known
    -- messages under one lease (or none) needs one cursor update, to the
    -- highest valid offset, instead of one per message. Outcomes are the same
    -- as applying the items one by one in offset order.
    IF NOT p_in_tx THEN
        FOR g IN
            SELECT a.pid, q.name AS qname, pt.name AS pname, a.idxs, a.offs, a.lid
            FROM (SELECT a.pid,
                         array_agg(a.i::integer ORDER BY a.off, a.i) AS idxs,
                         array_agg(a.off ORDER BY a.off, a.i) AS offs,
                         (array_agg(a.lid))[1] AS lid
                  FROM unnest(p_partition_ids, p_txn_ids, p_lease_ids, p_statuses, v_offs)
                       WITH ORDINALITY AS a(pid, txn, lid, st, off, i)
                  GROUP BY a.pid
                  HAVING count(*) > 1
                     AND bool_and(a.off IS NOT NULL)
                     AND bool_and(lower(coalesce(a.st, 'completed')) IN ('completed', 'success'))
                     AND (bool_and(a.lid IS NULL)
                          OR (bool_and(a.lid IS NOT NULL) AND count(DISTINCT a.lid) = 1))) a
            JOIN queen.partitions pt ON pt.id = a.pid
            JOIN queen.queues q ON q.id = pt.queue_id
            ORDER BY a.pid
        LOOP
            SELECT * INTO c FROM queen.log_consumers lc
            WHERE lc.partition_id = g.pid AND lc.consumer_group = p_group FOR UPDATE;
            CONTINUE WHEN NOT FOUND;   -- first contact: the one-by-one path creates the cursor
            v_fast := v_fast || g.pid;
            -- an item is valid when it is already committed or its lease (the
            -- same for every item here) is the live one; the offsets are
            -- sorted, so the cursor goes to the last one if that is valid
            v_active := c.lease_expires_at IS NOT NULL AND c.lease_expires_at > now();
            v_lease_ok := g.lid IS NULL OR (c.lease_id = g.lid AND v_active);
            v_top := g.offs[cardinality(g.offs)];
            IF NOT v_lease_ok OR v_top <= c.committed_offset THEN
                v_top := NULL;
            END IF;
            v_top_i := g.idxs[array_position(g.offs, v_top)];
            v_rel := false;
            IF v_top IS NOT NULL THEN
                v_rel := c.lease_id IS NOT NULL AND c.lease_expires_at IS NOT NULL
                         AND v_top >= coalesce(c.lease_end_offset, 0);
                UPDATE queen.log_consumers
                SET committed_offset = v_top,
                    lease_expires_at = CASE WHEN v_rel THEN NULL ELSE lease_expires_at END,
                    retry_count = CASE WHEN v_rel THEN 0 ELSE retry_count END,
                    total_consumed = total_consumed + (v_top - c.committed_offset),
                    batches_consumed = batches_consumed + CASE WHEN v_rel THEN 1 ELSE 0 END,
                    last_consumed_at = now()
                WHERE partition_id = g.pid AND consumer_group = p_group;
            END IF;
            RETURN QUERY
                SELECT u.i, v_lease_ok OR u.o <= c.committed_offset,
                       CASE WHEN v_lease_ok OR u.o <= c.committed_offset THEN NULL
                            ELSE 'Invalid or expired lease' END,
                       g.qname, g.pname, v_rel AND u.i = v_top_i, false,
                       CASE WHEN u.i = v_top_i
                            THEN v_top - c.committed_offset
                                 - (SELECT count(DISTINCT x) FROM unnest(g.offs) AS x
                                    WHERE x > c.committed_offset AND x <= v_top)
                            ELSE 0 END,
                       NULL::bigint
                FROM unnest(g.idxs, g.offs) AS u(i, o);
        END LOOP;
    END IF;

    FOR it IN
        SELECT a.i::integer AS i, a.pid, a.txn, a.lid, lower(coalesce(a.st, 'completed')) AS st, a.err,
               a.off, q.name AS qname, pt.name AS pname, q.retry_limit, q.retry_delay,
               q.retry_backoff, q.retry_delay_max
        FROM unnest(p_partition_ids, p_txn_ids, p_lease_ids, p_statuses, p_errors, v_offs)
             WITH ORDINALITY AS a(pid, txn, lid, st, err, off, i)
        LEFT JOIN queen.partitions pt ON pt.id = a.pid
        LEFT JOIN queen.queues q ON q.id = pt.queue_id
        WHERE NOT (a.pid = ANY (v_fast))
        ORDER BY a.pid, a.off NULLS LAST, a.i
    LOOP
        idx := it.i; queue_name := it.qname; partition_name := it.pname;
        success := false; error := NULL; lease_released := false; dlq := false; skipped := 0;
        retry_after_ms := NULL;
        v_status := CASE it.st WHEN 'success' THEN 'completed' ELSE it.st END;

        IF it.off IS NULL THEN
            error := 'Message not found';
            IF p_in_tx THEN RAISE EXCEPTION 'ACK operation failed: Message not found' USING ERRCODE = 'P0002'; END IF;
            RETURN NEXT; CONTINUE;
        END IF;
        IF v_status NOT IN ('completed', 'failed', 'retry', 'dlq') THEN
            IF p_in_tx THEN RAISE EXCEPTION 'ACK operation failed: Invalid status %', it.st USING ERRCODE = '22023'; END IF;
            RETURN NEXT; CONTINUE;
        END IF;

        SELECT * INTO c FROM queen.log_consumers lc
        WHERE lc.partition_id = it.pid AND lc.consumer_group = p_group FOR UPDATE;
        IF NOT FOUND THEN
            IF it.lid IS NOT NULL THEN
                error := 'Invalid or expired lease';
                IF p_in_tx THEN RAISE EXCEPTION 'ACK operation failed: Invalid or expired lease' USING ERRCODE = 'P0001'; END IF;
                RETURN NEXT; CONTINUE;
            END IF;
            -- first contact through an ack: the cursor starts right before this message
            INSERT INTO queen.log_consumers (partition_id, consumer_group, committed_offset)
            VALUES (it.pid, p_group, it.off - 1);
            SELECT * INTO c FROM queen.log_consumers lc
            WHERE lc.partition_id = it.pid AND lc.consumer_group = p_group FOR UPDATE;
        END IF;

        IF it.off <= c.committed_offset THEN
            -- already done for this group, whatever lease the ack names (an ack
            -- retried after its answer was lost): idempotent success
            success := true;
            RETURN NEXT; CONTINUE;
        END IF;

        v_active := c.lease_expires_at IS NOT NULL AND c.lease_expires_at > now();
        IF it.lid IS NOT NULL AND NOT (c.lease_id = it.lid AND v_active) THEN
            error := 'Invalid or expired lease';
            IF p_in_tx THEN RAISE EXCEPTION 'ACK operation failed: Invalid or expired lease' USING ERRCODE = 'P0001'; END IF;
            RETURN NEXT; CONTINUE;
        END IF;

        success := true;

        IF v_status = 'failed' AND p_in_tx THEN
            v_status := 'dlq';
            c.retry_count := 0;
        END IF;
        IF v_status = 'failed' AND c.retry_count >= coalesce(it.retry_limit, 3) THEN
            v_status := 'dlq';
        END IF;

        -- the delivery attempt this ack ends, counted from the head
        v_att := CASE WHEN c.attempt_end > c.committed_offset THEN c.attempts ELSE 0 END + 1;

        IF v_status = 'failed' OR v_status = 'retry' THEN
            -- only the first failure of a batch counts; later ones find the lease gone
            IF NOT (it.pid = ANY (v_released)) THEN
                v_wait := CASE WHEN v_status = 'failed'
                               THEN queen.retry_wait(it.retry_delay, it.retry_backoff, it.retry_delay_max, v_att)
                               ELSE 0 END;
                UPDATE queen.log_consumers
                SET lease_expires_at = CASE WHEN v_wait > 0
                                            THEN now() + make_interval(secs => v_wait / 1000.0) END,
                    lease_id = CASE WHEN v_wait > 0 THEN NULL ELSE lease_id END,
                    lease_end_offset = CASE WHEN v_wait > 0 THEN committed_offset ELSE lease_end_offset END,
                    attempts = v_att,
                    attempt_end = greatest(attempt_end, coalesce(lease_end_offset, 0), it.off),
                    retry_count = retry_count + CASE WHEN v_status = 'failed' THEN 1 ELSE 0 END
                WHERE partition_id = it.pid AND consumer_group = p_group;
                lease_released := c.lease_id IS NOT NULL AND c.lease_expires_at IS NOT NULL;
                retry_after_ms := CASE WHEN v_wait > 0 THEN ceil(v_wait)::bigint END;
                v_released := v_released || it.pid;
            END IF;
            RETURN NEXT; CONTINUE;
        END IF;

        IF v_status = 'dlq' THEN
            PERFORM queen.dead_letter(it.pid, p_group, it.off,
                                      coalesce(it.err, 'Retries exhausted'), c.retry_count);
            dlq := true;
        END IF;

        -- completed or dead-lettered: the cursor moves to this message
        skipped := it.off - c.committed_offset - 1;
        lease_released := c.lease_id IS NOT NULL AND c.lease_expires_at IS NOT NULL
                          AND it.off >= coalesce(c.lease_end_offset, 0);
        -- a failed ack dead-lettering the lease's last message ends a failed
        -- delivery: the partition rests as after a retried one
        v_wait := CASE WHEN it.st = 'failed' AND lease_released
                       THEN queen.retry_wait(it.retry_delay, it.retry_backoff, it.retry_delay_max, v_att)
                       ELSE 0 END;
        retry_after_ms := CASE WHEN v_wait > 0 THEN ceil(v_wait)::bigint END;
        UPDATE queen.log_consumers
        SET committed_offset = it.off,
            lease_expires_at = CASE WHEN v_wait > 0 THEN now() + make_interval(secs => v_wait / 1000.0)
                                    WHEN lease_released THEN NULL ELSE lease_expires_at END,
            lease_id = CASE WHEN v_wait > 0 THEN NULL ELSE lease_id END,
            lease_end_offset = CASE WHEN v_wait > 0 THEN it.off ELSE lease_end_offset END,
            attempts = CASE WHEN it.st = 'failed' AND lease_released THEN v_att ELSE attempts END,
            attempt_end = CASE WHEN it.st = 'failed' AND lease_released
                               THEN greatest(attempt_end, coalesce(lease_end_offset, 0)) ELSE attempt_end END,
            retry_count = CASE WHEN lease_released OR dlq THEN 0 ELSE retry_count END,
            total_consumed = total_consumed + (it.off - c.committed_offset),
            batches_consumed = batches_consumed + CASE WHEN lease_released THEN 1 ELSE 0 END,
            last_consumed_at = now()
        WHERE partition_id = it.pid AND consumer_group = p_group;
        RETURN NEXT;
    END LOOP;
END;
$$;
