-- Lookups of acked and pushed transactionIds that stay index probes however
-- the planner sizes message_keys.
--
-- Measured (docs/benchmarks.md): while message_keys held 10k-100k rows the
-- planner joined it by a hash join over a sequential scan, so an ack of 100
-- messages read the whole table (30-40 ms per call under load) and consumers
-- fell further behind the longer a run went. Acks now find their messages in
-- the segments of the group's leased span and fall back to one index probe per
-- item; push checks stored repeats with one probe per item.

-- Appends messages to their partitions.
-- Items arrive as parallel arrays, already free of repeats inside the request.
-- Set-based: a fixed handful of statements however many partitions the call
-- writes to (a group-committed flight of single pushes touches many).
-- Partitions are locked in id order so concurrent pushes never deadlock.
-- Returns one row per item (idx is the 1-based array position): 'queued' with the
-- new message id, or 'duplicate' with the id of the message that owns the
-- transactionId already. With p_strict a stored duplicate raises unique_violation.
CREATE OR REPLACE FUNCTION queen.push_batch(
    p_queue_ids      uuid[],
    p_partitions     text[],
    p_message_ids    uuid[],
    p_txn_ids        text[],
    p_trace_ids      uuid[],
    p_payloads       text[],
    p_producer_subs  text[],
    p_strict         boolean
) RETURNS TABLE (idx integer, status text, message_id uuid, partition_id uuid)
LANGUAGE plpgsql AS $$
DECLARE
    v_now   timestamptz := clock_timestamp();
    v_pids  uuid[];
    v_qids  uuid[];
    v_names text[];
    v_nexts bigint[];
    v_lasts timestamptz[];
    v_dup   text;
BEGIN
    -- 1. every partition exists
    INSERT INTO queen.partitions (id, queue_id, name)
    SELECT gen_random_uuid(), d.q, d.p
    FROM (SELECT DISTINCT t.q, t.p FROM unnest(p_queue_ids, p_partitions) AS t(q, p)) d
    WHERE NOT EXISTS (SELECT 1 FROM queen.partitions pt WHERE pt.queue_id = d.q AND pt.name = d.p)
    ON CONFLICT (queue_id, name) DO NOTHING;

    -- 2. lock them in id order (concurrent pushes never deadlock) and read their offsets
    SELECT array_agg(l.id ORDER BY l.id), array_agg(l.queue_id ORDER BY l.id),
           array_agg(l.name ORDER BY l.id), array_agg(l.next_offset ORDER BY l.id),
           array_agg(l.last_created_at ORDER BY l.id)
    INTO v_pids, v_qids, v_names, v_nexts, v_lasts
    FROM (SELECT pt.id, pt.queue_id, pt.name, pt.next_offset, pt.last_created_at
          FROM queen.partitions pt
          JOIN (SELECT DISTINCT t.q, t.p FROM unnest(p_queue_ids, p_partitions) AS t(q, p)) d
            ON pt.queue_id = d.q AND pt.name = d.p
          ORDER BY pt.id
          FOR UPDATE OF pt) l;

    IF p_strict THEN
        SELECT t.txn INTO v_dup
        FROM unnest(p_queue_ids, p_partitions, p_txn_ids) AS t(q, p, txn)
        JOIN unnest(v_pids, v_qids, v_names) AS x(pid, qid, pname) ON x.qid = t.q AND x.pname = t.p
        WHERE EXISTS (SELECT 1 FROM queen.message_keys k
                      WHERE k.partition_id = x.pid AND k.transaction_id = t.txn)
        LIMIT 1;
        IF FOUND THEN
            RAISE unique_violation USING MESSAGE =
                format('duplicate key value violates unique constraint "message_keys_pkey": transactionId %s already exists', v_dup);
        END IF;
    END IF;

    -- 3. classify, append and move the partitions forward, in one statement
    RETURN QUERY
    WITH parts AS (
        SELECT * FROM unnest(v_pids, v_qids, v_names, v_nexts, v_lasts)
                      AS x(pid, qid, pname, nxt, lastc)
    ), items AS (
        SELECT t.i::integer AS i, pa.pid, pa.nxt,
               greatest(v_now, coalesce(pa.lastc, '-infinity'::timestamptz)) AS ca
        FROM unnest(p_queue_ids, p_partitions) WITH ORDINALITY AS t(q, p, i)
        JOIN parts pa ON pa.qid = t.q AND pa.pname = t.p
    ), marked AS (
        SELECT it.i, it.pid, it.nxt, it.ca,
               (SELECT k.message_id FROM queen.message_keys k
                WHERE k.partition_id = it.pid AND k.transaction_id = p_txn_ids[it.i]) AS dup_id
        FROM items it
    ), fresh AS (
        SELECT m.i, m.pid, m.ca,
               m.nxt - 1 + row_number() OVER (PARTITION BY m.pid ORDER BY m.i) AS off
        FROM marked m
        WHERE m.dup_id IS NULL
    ), ins_keys AS (
        INSERT INTO queen.message_keys (partition_id, transaction_id, msg_offset, message_id)
        SELECT f.pid, p_txn_ids[f.i], f.off, p_message_ids[f.i] FROM fresh f
    ), ins_segments AS (
        INSERT INTO queen.segments (partition_id, last_offset, first_offset, created_at,
                                    message_ids, transaction_ids, trace_ids, payloads, producer_subs)
        SELECT f.pid, max(f.off), min(f.off), max(f.ca),
               array_agg(p_message_ids[f.i] ORDER BY f.off),
               array_agg(p_txn_ids[f.i] ORDER BY f.off),
               array_agg(p_trace_ids[f.i] ORDER BY f.off),
               array_agg(p_payloads[f.i] ORDER BY f.off),
               CASE WHEN bool_or(p_producer_subs[f.i] IS NOT NULL)
                    THEN array_agg(p_producer_subs[f.i] ORDER BY f.off) END
        FROM fresh f
        GROUP BY f.pid
    ), moved AS (
        UPDATE queen.partitions pt
        SET next_offset = s.top + 1, last_created_at = s.ca
        FROM (SELECT f.pid, max(f.off) AS top, max(f.ca) AS ca FROM fresh f GROUP BY f.pid) s
        WHERE pt.id = s.pid
    )
    SELECT m.i,
           CASE WHEN m.dup_id IS NULL THEN 'queued' ELSE 'duplicate' END,
           coalesce(m.dup_id, p_message_ids[m.i]),
           m.pid
    FROM marked m;
END;
$$;

-- Applies acknowledgements for one consumer group, in (partition, offset) order.
-- Statuses: completed | success | failed | retry | dlq. With p_in_tx, 'failed'
-- dead-letters at once (transaction semantics) and any failure raises, so the
-- caller's transaction rolls back.
-- Returns one row per item (idx = 1-based array position).
-- An ack of a message the group already committed succeeds whatever lease it
-- names. A partition whose items are all `completed` acks of known messages
-- under one lease (or none) takes a fast path: one cursor update to the
-- highest valid offset, with the outcomes of applying them one by one.
CREATE OR REPLACE FUNCTION queen.ack_batch(
    p_group          text,
    p_partition_ids  uuid[],
    p_txn_ids        text[],
    p_lease_ids      uuid[],
    p_statuses       text[],
    p_errors         text[],
    p_in_tx          boolean
) RETURNS TABLE (idx integer, success boolean, error text, queue_name text,
                 partition_name text, lease_released boolean, dlq boolean)
LANGUAGE plpgsql AS $$
DECLARE
    it         record;
    c          queen.log_consumers%ROWTYPE;
    v_limit    integer;
    v_active   boolean;
    v_status   text;
    v_released uuid[] := '{}';
    g          record;
    v_fast     uuid[] := '{}';
    v_valid    boolean[];
    v_top      bigint;
    v_top_i    integer;
    v_rel      boolean;
    j          integer;
    v_offs     bigint[];
BEGIN
    -- Where each acked message sits. An ack of many messages (32 or more on
    -- one partition) normally names messages of the group's current leased
    -- span: those are read from the span's segments (one short index range
    -- per partition). Anything else is looked up in message_keys, one index
    -- probe per item (a scalar subquery, so the planner cannot turn it into a
    -- scan of the whole table); for a few messages the probes are cheaper
    -- than unpacking whole segments (pop+ack at batch 10 ran 17% slower
    -- reading spans).
    -- (The LIMIT 1 keeps the cursor lookup a probe of its primary key: as a
    -- plain join the planner read every cursor of the group. The segments
    -- read are exactly those from the cursor to the one holding the lease's
    -- last offset, an index range bounded at both ends.)
    WITH span AS (
        SELECT p.pid, u.txn, s.first_offset + u.n - 1 AS off
        FROM (SELECT x.pid FROM unnest(p_partition_ids) AS x(pid)
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
    )
    SELECT array_agg(coalesce(sp.off,
                              (SELECT k.msg_offset FROM queen.message_keys k
                               WHERE k.partition_id = a.pid AND k.transaction_id = a.txn))
                     ORDER BY a.i)
    INTO v_offs
    FROM unnest(p_partition_ids, p_txn_ids) WITH ORDINALITY AS a(pid, txn, i)
    LEFT JOIN span sp ON sp.pid = a.pid AND sp.txn = a.txn;

    -- Fast path: a partition whose items are all `completed` acks of known
    -- messages under one lease (or none) needs one cursor update, to the
    -- highest valid offset, instead of one per message. Outcomes are the same
    -- as applying the items one by one in offset order.
    IF NOT p_in_tx THEN
        FOR g IN
            SELECT a.pid, q.name AS qname, pt.name AS pname,
                   array_agg(a.i::integer ORDER BY a.off, a.i) AS idxs,
                   array_agg(a.off ORDER BY a.off, a.i) AS offs,
                   (array_agg(a.lid))[1] AS lid
            FROM unnest(p_partition_ids, p_txn_ids, p_lease_ids, p_statuses, v_offs)
                 WITH ORDINALITY AS a(pid, txn, lid, st, off, i)
            JOIN queen.partitions pt ON pt.id = a.pid
            JOIN queen.queues q ON q.id = pt.queue_id
            GROUP BY a.pid, q.name, pt.name
            HAVING count(*) > 1
               AND bool_and(a.off IS NOT NULL)
               AND bool_and(lower(coalesce(a.st, 'completed')) IN ('completed', 'success'))
               AND (bool_and(a.lid IS NULL) OR (bool_and(a.lid IS NOT NULL) AND count(DISTINCT a.lid) = 1))
            ORDER BY a.pid
        LOOP
            SELECT * INTO c FROM queen.log_consumers lc
            WHERE lc.partition_id = g.pid AND lc.consumer_group = p_group FOR UPDATE;
            CONTINUE WHEN NOT FOUND;   -- first contact: the one-by-one path creates the cursor
            v_fast := v_fast || g.pid;
            v_active := c.lease_expires_at IS NOT NULL AND c.lease_expires_at > now();
            v_valid := ARRAY(
                SELECT g.lid IS NULL
                       OR o <= c.committed_offset
                       OR (c.lease_id = g.lid AND v_active)
                FROM unnest(g.offs) AS o);
            v_top := NULL;
            v_top_i := NULL;
            FOR j IN 1 .. cardinality(g.idxs) LOOP
                IF v_valid[j] AND g.offs[j] > c.committed_offset AND (v_top IS NULL OR g.offs[j] > v_top) THEN
                    v_top := g.offs[j];
                    v_top_i := g.idxs[j];
                END IF;
            END LOOP;
            v_rel := false;
            IF v_top IS NOT NULL THEN
                v_rel := c.lease_expires_at IS NOT NULL AND v_top >= coalesce(c.lease_end_offset, 0);
                UPDATE queen.log_consumers
                SET committed_offset = v_top,
                    lease_expires_at = CASE WHEN v_rel THEN NULL ELSE lease_expires_at END,
                    retry_count = CASE WHEN v_rel THEN 0 ELSE retry_count END,
                    total_consumed = total_consumed + (v_top - c.committed_offset),
                    batches_consumed = batches_consumed + CASE WHEN v_rel THEN 1 ELSE 0 END,
                    last_consumed_at = now()
                WHERE partition_id = g.pid AND consumer_group = p_group;
            END IF;
            FOR j IN 1 .. cardinality(g.idxs) LOOP
                idx := g.idxs[j]; queue_name := g.qname; partition_name := g.pname; dlq := false;
                success := v_valid[j];
                error := CASE WHEN v_valid[j] THEN NULL ELSE 'Invalid or expired lease' END;
                lease_released := v_rel AND g.idxs[j] = v_top_i;
                RETURN NEXT;
            END LOOP;
        END LOOP;
    END IF;

    FOR it IN
        SELECT a.i::integer AS i, a.pid, a.txn, a.lid, lower(coalesce(a.st, 'completed')) AS st, a.err,
               a.off, q.name AS qname, pt.name AS pname, q.retry_limit
        FROM unnest(p_partition_ids, p_txn_ids, p_lease_ids, p_statuses, p_errors, v_offs)
             WITH ORDINALITY AS a(pid, txn, lid, st, err, off, i)
        LEFT JOIN queen.partitions pt ON pt.id = a.pid
        LEFT JOIN queen.queues q ON q.id = pt.queue_id
        WHERE NOT (a.pid = ANY (v_fast))
        ORDER BY a.pid, a.off NULLS LAST, a.i
    LOOP
        idx := it.i; queue_name := it.qname; partition_name := it.pname;
        success := false; error := NULL; lease_released := false; dlq := false;
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

        IF v_status = 'failed' OR v_status = 'retry' THEN
            -- only the first failure of a batch counts; later ones find the lease gone
            IF NOT (it.pid = ANY (v_released)) THEN
                UPDATE queen.log_consumers
                SET lease_expires_at = NULL,
                    retry_count = retry_count + CASE WHEN v_status = 'failed' THEN 1 ELSE 0 END
                WHERE partition_id = it.pid AND consumer_group = p_group;
                lease_released := c.lease_expires_at IS NOT NULL;
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
        lease_released := c.lease_expires_at IS NOT NULL AND it.off >= coalesce(c.lease_end_offset, 0);
        UPDATE queen.log_consumers
        SET committed_offset = it.off,
            lease_expires_at = CASE WHEN lease_released THEN NULL ELSE lease_expires_at END,
            retry_count = CASE WHEN lease_released OR dlq THEN 0 ELSE retry_count END,
            total_consumed = total_consumed + (it.off - c.committed_offset),
            batches_consumed = batches_consumed + CASE WHEN lease_released THEN 1 ELSE 0 END,
            last_consumed_at = now()
        WHERE partition_id = it.pid AND consumer_group = p_group;
        RETURN NEXT;
    END LOOP;
END;
$$;
