-- Claims and acks work on sets instead of one row at a time, and wildcard
-- pops say which hinted partitions they found drained.
--
-- claim_partition: the row-by-row loop (one RETURN NEXT per message, plus a
-- second copy of every row when pop_queue re-returned it) becomes a pass over
-- the claimed span's segment headers, to find where the deliverable run
-- stops (a delayed segment or a hole), and one RETURN QUERY of the messages.
-- Same signature, same results.
--
-- pop_queue gains p_report_drained: with it, every hinted partition that has
-- nothing past the group's cursor comes back as a marker row (partition id
-- and name, every message column NULL) before the messages, so the broker
-- stops hinting it for that group until it is written again
-- (broker/recent.rs). It also gains p_walk: without it the pop tries only
-- the hints. At 10 000 partitions a walk that finds nothing costs tens of
-- milliseconds, and every consumer woken by a push walked after losing the
-- race for the one new partition; the broker now lets a pop walk only when
-- walks of its group lately found work, or once per interval as the floor.
-- The 14-argument form (previous version) stays as a wrapper that never
-- reports and always walks, for brokers of that version during a rolling
-- upgrade.

CREATE OR REPLACE FUNCTION queen.claim_partition(
    p_partition_id   uuid,
    p_queue_name     text,
    p_partition_name text,
    p_group          text,
    p_batch          integer,
    p_lease_id       uuid,
    p_lease_seconds  integer,
    p_auto_ack       boolean,
    p_delay_seconds  integer,
    p_window_seconds integer,
    p_sub_scope      text,
    p_sub_mode       text,
    p_sub_from       text,
    p_holder         text
) RETURNS TABLE (msg_offset bigint, message_id uuid, transaction_id text, trace_id uuid,
                 payload text, producer_sub text, created_at timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    c         queen.log_consumers%ROWTYPE;
    v_next    bigint;
    v_low     bigint;
    v_lastc   timestamptz;
    v_start   bigint;
    v_end     bigint;
    v_stop    bigint;      -- last offset of the deliverable run
    v_hi      bigint;      -- last_offset of the run's last segment
    v_deleted bigint[] := '{}';   -- offsets of the run removed one by one
    v_last    bigint;
    v_count   integer;
    s         record;
BEGIN
    SELECT * INTO c FROM queen.log_consumers lc
    WHERE lc.partition_id = p_partition_id AND lc.consumer_group = p_group
    FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        IF EXISTS (SELECT 1 FROM queen.log_consumers lc
                   WHERE lc.partition_id = p_partition_id AND lc.consumer_group = p_group) THEN
            RETURN;   -- another pop holds the row right now
        END IF;
        INSERT INTO queen.log_consumers (partition_id, consumer_group, committed_offset)
        VALUES (p_partition_id, p_group,
                queen.offset_before(p_partition_id,
                    queen.subscription_start(p_group, p_queue_name, p_partition_name,
                                             p_sub_scope, p_sub_mode, p_sub_from)))
        ON CONFLICT DO NOTHING;
        SELECT * INTO c FROM queen.log_consumers lc
        WHERE lc.partition_id = p_partition_id AND lc.consumer_group = p_group
        FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            RETURN;
        END IF;
    END IF;

    IF c.lease_expires_at IS NOT NULL AND c.lease_expires_at > now() THEN
        RETURN;   -- one leased batch per (partition, group)
    END IF;

    SELECT pt.next_offset, pt.low_offset, pt.last_created_at INTO v_next, v_low, v_lastc
    FROM queen.partitions pt WHERE pt.id = p_partition_id;
    v_start := greatest(c.committed_offset + 1, v_low);
    IF v_start >= v_next
       OR (p_window_seconds > 0 AND v_lastc > now() - make_interval(secs => p_window_seconds)) THEN
        IF c.lease_expires_at IS NOT NULL THEN
            UPDATE queen.log_consumers SET lease_expires_at = NULL
            WHERE partition_id = p_partition_id AND consumer_group = p_group;
        END IF;
        RETURN;
    END IF;
    v_end := least(v_next - 1, v_start + p_batch - 1);

    -- the run of consecutive offsets from v_start: a hole or a segment still
    -- inside the queue's delay ends it (nothing after it is delivered either)
    v_stop := v_start - 1;
    FOR s IN
        SELECT sg.first_offset, sg.last_offset, sg.created_at, sg.deleted_offsets
        FROM queen.segments sg
        WHERE sg.partition_id = p_partition_id AND sg.last_offset >= v_start
        ORDER BY sg.last_offset
        LIMIT (v_end - v_start + 1)
    LOOP
        EXIT WHEN s.first_offset > v_stop + 1
               OR (p_delay_seconds > 0 AND s.created_at > now() - make_interval(secs => p_delay_seconds));
        v_stop := least(s.last_offset, v_end);
        v_hi := s.last_offset;
        v_deleted := v_deleted || coalesce(s.deleted_offsets, '{}');
        EXIT WHEN v_stop = v_end;
    END LOOP;

    IF v_stop >= v_start THEN
        RETURN QUERY
            SELECT sg.first_offset + u.n - 1, u.mid, u.txn, u.tr, u.pl, u.ps, sg.created_at
            FROM queen.segments sg
            CROSS JOIN LATERAL unnest(sg.message_ids, sg.transaction_ids, sg.trace_ids, sg.payloads,
                                      coalesce(sg.producer_subs,
                                               array_fill(NULL::text, ARRAY[cardinality(sg.message_ids)])))
                       WITH ORDINALITY AS u(mid, txn, tr, pl, ps, n)
            WHERE sg.partition_id = p_partition_id AND sg.last_offset BETWEEN v_start AND v_hi
              AND sg.first_offset + u.n - 1 BETWEEN v_start AND v_stop
              AND NOT ((sg.first_offset + u.n - 1) = ANY (v_deleted))
            ORDER BY 1;
        GET DIAGNOSTICS v_count = ROW_COUNT;
    ELSE
        v_count := 0;
    END IF;

    IF v_count = 0 THEN
        -- nothing deliverable; skip over messages that were deleted one by one
        UPDATE queen.log_consumers
        SET committed_offset = CASE WHEN v_stop >= v_start
                                    THEN greatest(committed_offset, v_stop)
                                    ELSE committed_offset END,
            lease_expires_at = NULL
        WHERE partition_id = p_partition_id AND consumer_group = p_group
          AND (v_stop >= v_start OR lease_expires_at IS NOT NULL);
        RETURN;
    END IF;

    -- the last delivered offset: the run's end unless deleted messages trail it
    v_last := v_stop;
    WHILE v_last = ANY (v_deleted) LOOP
        v_last := v_last - 1;
    END LOOP;

    IF p_auto_ack THEN
        UPDATE queen.log_consumers
        SET committed_offset = v_last, lease_expires_at = NULL, retry_count = 0,
            total_consumed = total_consumed + (v_last - c.committed_offset),
            batches_consumed = batches_consumed + 1, last_consumed_at = now(),
            lease_holder = p_holder
        WHERE partition_id = p_partition_id AND consumer_group = p_group;
    ELSE
        UPDATE queen.log_consumers
        SET lease_id = p_lease_id, lease_end_offset = v_last,
            lease_expires_at = now() + make_interval(secs => CASE WHEN p_lease_seconds > 0 THEN p_lease_seconds ELSE 60 END),
            lease_holder = p_holder
        WHERE partition_id = p_partition_id AND consumer_group = p_group;
    END IF;
END;
$$;

-- The floor walk of a wildcard pop, unchanged from V6 but on its own: up to
-- p_limit partitions of the queue with messages past the group's cursor and
-- no live lease, 32 from each side of a random point of the id space, least
-- recently consumed first, leaving out p_tried.
CREATE FUNCTION queen.walk_eligible(
    p_queue_id       uuid,
    p_group          text,
    p_delay_seconds  integer,
    p_window_seconds integer,
    p_tried          uuid[],
    p_limit          integer
) RETURNS TABLE (id uuid, name text)
LANGUAGE plpgsql AS $$
DECLARE
    v_start uuid := gen_random_uuid();
BEGIN
    RETURN QUERY
    SELECT w.id, w.name
    FROM (
        (SELECT pt.id, pt.name, lc.last_consumed_at
         FROM queen.partitions pt
         LEFT JOIN LATERAL (
             SELECT l.committed_offset, l.lease_expires_at, l.last_consumed_at
             FROM queen.log_consumers l
             WHERE l.partition_id = pt.id AND l.consumer_group = p_group
             LIMIT 1) lc ON true
         WHERE pt.queue_id = p_queue_id AND pt.id >= v_start
           AND pt.next_offset > greatest(coalesce(lc.committed_offset + 1, pt.low_offset), pt.low_offset)
           AND (lc.lease_expires_at IS NULL OR lc.lease_expires_at <= now())
           AND (p_window_seconds = 0
                OR pt.last_created_at <= now() - make_interval(secs => p_window_seconds))
           AND (p_delay_seconds = 0 OR (
                 SELECT s.created_at FROM queen.segments s
                 WHERE s.partition_id = pt.id
                   AND s.last_offset >= greatest(coalesce(lc.committed_offset + 1, pt.low_offset), pt.low_offset)
                 ORDER BY s.last_offset
                 LIMIT 1) <= now() - make_interval(secs => p_delay_seconds))
         ORDER BY pt.id
         LIMIT 32)
        UNION ALL
        (SELECT pt.id, pt.name, lc.last_consumed_at
         FROM queen.partitions pt
         LEFT JOIN LATERAL (
             SELECT l.committed_offset, l.lease_expires_at, l.last_consumed_at
             FROM queen.log_consumers l
             WHERE l.partition_id = pt.id AND l.consumer_group = p_group
             LIMIT 1) lc ON true
         WHERE pt.queue_id = p_queue_id AND pt.id < v_start
           AND pt.next_offset > greatest(coalesce(lc.committed_offset + 1, pt.low_offset), pt.low_offset)
           AND (lc.lease_expires_at IS NULL OR lc.lease_expires_at <= now())
           AND (p_window_seconds = 0
                OR pt.last_created_at <= now() - make_interval(secs => p_window_seconds))
           AND (p_delay_seconds = 0 OR (
                 SELECT s.created_at FROM queen.segments s
                 WHERE s.partition_id = pt.id
                   AND s.last_offset >= greatest(coalesce(lc.committed_offset + 1, pt.low_offset), pt.low_offset)
                 ORDER BY s.last_offset
                 LIMIT 1) <= now() - make_interval(secs => p_delay_seconds))
         ORDER BY pt.id
         LIMIT 32)) w
    WHERE NOT (w.id = ANY (p_tried))
    ORDER BY w.last_consumed_at NULLS FIRST, w.id
    LIMIT p_limit;
END;
$$;

CREATE FUNCTION queen.pop_queue(
    p_queue_id         uuid,
    p_queue_name       text,
    p_group            text,
    p_batch            integer,
    p_max_partitions   integer,
    p_lease_id         uuid,
    p_lease_seconds    integer,
    p_auto_ack         boolean,
    p_delay_seconds    integer,
    p_window_seconds   integer,
    p_sub_mode         text,
    p_sub_from         text,
    p_holder           text,
    p_hints            text[],     -- partition names, in the order to try them
    p_report_drained   boolean,
    p_walk             boolean     -- false: only the hints, no walk
) RETURNS TABLE (partition_id uuid, partition_name text, msg_offset bigint, message_id uuid,
                 transaction_id text, trace_id uuid, payload text, producer_sub text,
                 created_at timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    v_left    integer := p_batch;
    v_claims  integer := 0;
    v_n       integer;
    v_ids     uuid[];
    v_names   text[];
    v_dids    uuid[];
    v_dnames  text[];
    v_tried   uuid[] := '{}';
    v_pass    integer;
    v_k       integer;
    j         integer;
BEGIN
    FOR v_pass IN 1 .. CASE WHEN p_walk THEN 2 ELSE 1 END LOOP
        IF v_pass = 1 THEN
            CONTINUE WHEN coalesce(cardinality(p_hints), 0) = 0;
            -- hinted partitions with messages past the group's cursor and no
            -- live lease, least recently consumed first; and the drained ones
            SELECT array_agg(e.id ORDER BY e.last_consumed_at NULLS FIRST, e.n) FILTER (WHERE e.eligible),
                   array_agg(e.name ORDER BY e.last_consumed_at NULLS FIRST, e.n) FILTER (WHERE e.eligible),
                   array_agg(e.id) FILTER (WHERE NOT e.pending),
                   array_agg(e.name) FILTER (WHERE NOT e.pending)
            INTO v_ids, v_names, v_dids, v_dnames
            FROM (SELECT x.*, x.pending AND (x.lease_expires_at IS NULL OR x.lease_expires_at <= now()) AS eligible
                  FROM (SELECT h.name, h.n, pt.id, lc.last_consumed_at, lc.lease_expires_at,
                               coalesce(pt.next_offset > greatest(coalesce(lc.committed_offset + 1, pt.low_offset),
                                                                  pt.low_offset), false) AS pending
                        FROM unnest(p_hints) WITH ORDINALITY AS h(name, n)
                        LEFT JOIN queen.partitions pt ON pt.queue_id = p_queue_id AND pt.name = h.name
                        LEFT JOIN LATERAL (
                            SELECT l.committed_offset, l.lease_expires_at, l.last_consumed_at
                            FROM queen.log_consumers l
                            WHERE l.partition_id = pt.id AND l.consumer_group = p_group
                            LIMIT 1) lc ON true) x) e;
            IF p_report_drained AND v_dnames IS NOT NULL THEN
                RETURN QUERY
                    SELECT d.id, d.name, NULL::bigint, NULL::uuid, NULL::text, NULL::uuid,
                           NULL::text, NULL::text, NULL::timestamptz
                    FROM unnest(v_dids, v_dnames) AS d(id, name);
            END IF;
            -- concurrent pops compute the same order: each starts at one of
            -- the first four, so they do not all queue on one cursor row
            v_k := floor(random() * least(coalesce(cardinality(v_ids), 0), 4))::integer;
            IF v_k > 0 THEN
                v_ids := v_ids[v_k + 1:] || v_ids[1:v_k];
                v_names := v_names[v_k + 1:] || v_names[1:v_k];
            END IF;
        ELSE
            SELECT array_agg(w.id), array_agg(w.name) INTO v_ids, v_names
            FROM queen.walk_eligible(p_queue_id, p_group, p_delay_seconds, p_window_seconds,
                                     v_tried, p_max_partitions * 4 + 16) w;
        END IF;
        FOR j IN 1 .. coalesce(cardinality(v_ids), 0) LOOP
            v_tried := v_tried || v_ids[j];
            RETURN QUERY
                SELECT v_ids[j], v_names[j], m.*
                FROM queen.claim_partition(v_ids[j], p_queue_name, v_names[j], p_group, v_left,
                                           p_lease_id, p_lease_seconds, p_auto_ack, p_delay_seconds,
                                           p_window_seconds, '', p_sub_mode, p_sub_from, p_holder) m;
            GET DIAGNOSTICS v_n = ROW_COUNT;
            IF v_n > 0 THEN
                v_claims := v_claims + 1;
                v_left := v_left - v_n;
            END IF;
            EXIT WHEN v_claims >= p_max_partitions OR v_left <= 0;
        END LOOP;
        EXIT WHEN v_claims >= p_max_partitions OR v_left <= 0;
    END LOOP;
END;
$$;

-- the previous version's call: no drained markers
CREATE OR REPLACE FUNCTION queen.pop_queue(
    p_queue_id       uuid,
    p_queue_name     text,
    p_group          text,
    p_batch          integer,
    p_max_partitions integer,
    p_lease_id       uuid,
    p_lease_seconds  integer,
    p_auto_ack       boolean,
    p_delay_seconds  integer,
    p_window_seconds integer,
    p_sub_mode       text,
    p_sub_from       text,
    p_holder         text,
    p_hints          text[]
) RETURNS TABLE (partition_id uuid, partition_name text, msg_offset bigint, message_id uuid,
                 transaction_id text, trace_id uuid, payload text, producer_sub text,
                 created_at timestamptz)
LANGUAGE sql AS $$
    SELECT * FROM queen.pop_queue(p_queue_id, p_queue_name, p_group, p_batch, p_max_partitions,
                                  p_lease_id, p_lease_seconds, p_auto_ack, p_delay_seconds,
                                  p_window_seconds, p_sub_mode, p_sub_from, p_holder, p_hints, false, true)
$$;

-- ack_batch: unchanged from V5 except its fast path (a partition whose items
-- are all `completed` acks under one lease), which walked every item twice in
-- PL/pgSQL (validity, then one RETURN NEXT each): about half the function's
-- time at batch 100. It now works on the sorted offsets as a whole and returns
-- the outcomes with one RETURN QUERY, and joins partitions and queues once per
-- partition instead of once per item.
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
    v_lease_ok boolean;
    v_top      bigint;
    v_top_i    integer;
    v_rel      boolean;
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
            RETURN QUERY
                SELECT u.i, v_lease_ok OR u.o <= c.committed_offset,
                       CASE WHEN v_lease_ok OR u.o <= c.committed_offset THEN NULL
                            ELSE 'Invalid or expired lease' END,
                       g.qname, g.pname, v_rel AND u.i = v_top_i, false
                FROM unnest(g.idxs, g.offs) AS u(i, o);
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
