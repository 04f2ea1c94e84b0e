-- Stored functions of the hot path: one round trip per push, pop and ack request.
-- Every function is plain SQL/PL/pgSQL and can be called from psql.

-- Appends messages to their partitions.
-- Items arrive as parallel arrays, already free of repeats inside the request.
-- Set-based: a fixed handful of statements however many partitions the call
-- writes to (a group-committed flight of single pushes touches many).
-- Partitions are locked in id order so concurrent pushes never deadlock.
-- Returns one row per item (idx is the 1-based array position): 'queued' with the
-- new message id, or 'duplicate' with the id of the message that owns the
-- transactionId already. With p_strict a stored duplicate raises unique_violation.
CREATE FUNCTION queen.push_batch(
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
        SELECT k.transaction_id INTO v_dup
        FROM unnest(p_queue_ids, p_partitions, p_txn_ids) AS t(q, p, txn)
        JOIN unnest(v_pids, v_qids, v_names) AS x(pid, qid, pname) ON x.qid = t.q AND x.pname = t.p
        JOIN queen.message_keys k ON k.partition_id = x.pid AND k.transaction_id = t.txn
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
        SELECT it.i, it.pid, it.nxt, it.ca, k.message_id AS dup_id
        FROM items it
        LEFT JOIN queen.message_keys k
               ON k.partition_id = it.pid AND k.transaction_id = p_txn_ids[it.i]
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

-- Resolves where a consumer group starts on a partition it has never read:
-- the committed offset for a start time (NULL = from the oldest stored message).
CREATE FUNCTION queen.offset_before(p_partition_id uuid, p_start timestamptz)
RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN p_start IS NULL THEN (SELECT low_offset - 1 FROM queen.partitions WHERE id = p_partition_id)
        ELSE coalesce(
            (SELECT max(s.last_offset) FROM queen.segments s
              WHERE s.partition_id = p_partition_id AND s.created_at < p_start),
            (SELECT low_offset - 1 FROM queen.partitions WHERE id = p_partition_id))
    END
$$;

-- Finds the subscription start of a group on a partition, storing it on first
-- contact as the subscription rules say (http-api.md §5.2). Returns NULL for
-- "from the oldest message".
CREATE FUNCTION queen.subscription_start(
    p_group          text,
    p_queue_name     text,
    p_partition_name text,
    p_scope          text,      -- partition name for the partition route, '' for wildcard
    p_mode           text,      -- 'all' | 'new'
    p_from           text       -- NULL, 'now' or a timestamp
) RETURNS timestamptz
LANGUAGE plpgsql AS $$
DECLARE
    v_ts   timestamptz;
    v_mode text;
BEGIN
    IF p_group = '__QUEUE_MODE__' THEN
        RETURN NULL;
    END IF;
    SELECT cs.subscription_timestamp INTO v_ts
    FROM queen.consumer_subscriptions cs
    WHERE cs.consumer_group = p_group AND cs.queue_name = p_queue_name
      AND cs.partition_name IN (p_partition_name, '')
    ORDER BY cs.partition_name DESC
    LIMIT 1;
    IF FOUND THEN
        RETURN v_ts;
    END IF;

    v_ts := NULL;
    IF p_from IS NOT NULL AND p_from <> '' AND lower(p_from) <> 'now' THEN
        BEGIN
            v_ts := p_from::timestamptz;
            v_mode := 'timestamp';
        EXCEPTION WHEN others THEN
            v_ts := NULL;   -- unparsable: treated as 'all'
        END;
    END IF;
    IF v_ts IS NULL AND (lower(coalesce(p_from, '')) = 'now' OR p_mode = 'new') THEN
        v_ts := now();
        v_mode := 'new';
    END IF;
    IF v_ts IS NOT NULL THEN
        INSERT INTO queen.consumer_subscriptions
            (consumer_group, queue_name, partition_name, subscription_mode, subscription_timestamp)
        VALUES (p_group, p_queue_name, p_scope, v_mode, v_ts)
        ON CONFLICT DO NOTHING;
        SELECT cs.subscription_timestamp INTO v_ts
        FROM queen.consumer_subscriptions cs
        WHERE cs.consumer_group = p_group AND cs.queue_name = p_queue_name
          AND cs.partition_name IN (p_partition_name, '')
        ORDER BY cs.partition_name DESC
        LIMIT 1;
    END IF;
    RETURN v_ts;
END;
$$;

-- Claims one partition for a consumer group and returns up to p_batch messages
-- after the group's cursor. Returns nothing (and claims nothing) when the group
-- holds an unexpired lease there, the partition is being claimed concurrently,
-- the window buffer is still open, or nothing is deliverable.
-- With p_auto_ack the cursor moves past the returned messages and no lease is taken.
CREATE FUNCTION queen.claim_partition(
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
    v_last    bigint;
    v_seen    bigint;
    v_count   integer := 0;
    r         record;
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

    FOR r IN
        SELECT s.first_offset + u.n - 1 AS off, u.mid, u.txn, u.tr, u.pl, u.ps, s.created_at AS ca,
               (s.deleted_offsets IS NOT NULL AND (s.first_offset + u.n - 1) = ANY (s.deleted_offsets)) AS gone
        FROM (SELECT * FROM queen.segments sg
              WHERE sg.partition_id = p_partition_id AND sg.last_offset >= v_start
                AND sg.first_offset <= v_end
                AND (p_delay_seconds = 0 OR sg.created_at <= now() - make_interval(secs => p_delay_seconds))
              ORDER BY sg.last_offset
              LIMIT (v_end - v_start + 1)) s
        CROSS JOIN LATERAL unnest(s.message_ids, s.transaction_ids, s.trace_ids, s.payloads,
                                  coalesce(s.producer_subs, array_fill(NULL::text, ARRAY[cardinality(s.message_ids)])))
                   WITH ORDINALITY AS u(mid, txn, tr, pl, ps, n)
        WHERE s.first_offset + u.n - 1 BETWEEN v_start AND v_end
        ORDER BY 1
    LOOP
        -- a delayed segment blocks everything after it: stop at the first gap
        IF r.off <> coalesce(v_seen, v_start - 1) + 1 THEN
            EXIT;
        END IF;
        v_seen := r.off;
        CONTINUE WHEN r.gone;
        msg_offset := r.off; message_id := r.mid; transaction_id := r.txn; trace_id := r.tr;
        payload := r.pl; producer_sub := r.ps; created_at := r.ca;
        v_last := r.off;
        v_count := v_count + 1;
        RETURN NEXT;
    END LOOP;

    IF v_count = 0 THEN
        -- nothing deliverable; skip over messages that were deleted one by one
        UPDATE queen.log_consumers
        SET committed_offset = greatest(committed_offset, coalesce(v_seen, committed_offset)),
            lease_expires_at = NULL
        WHERE partition_id = p_partition_id AND consumer_group = p_group
          AND (v_seen IS NOT NULL OR lease_expires_at IS NOT NULL);
        RETURN;
    END IF;

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

-- Wildcard pop: claims up to p_max_partitions partitions of a queue with pending
-- work for the group, spending a global budget of p_batch messages. It looks at
-- a bounded window of eligible partitions from a random point of the id space
-- (not all of them: a queue may have 10 000), and within it tries the never
-- read first, then the least recently consumed.
CREATE FUNCTION queen.pop_queue(
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
    p_holder         text
) RETURNS TABLE (partition_id uuid, partition_name text, msg_offset bigint, message_id uuid,
                 transaction_id text, trace_id uuid, payload text, producer_sub text,
                 created_at timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    cand     record;
    v_left   integer := p_batch;
    v_claims integer := 0;
    v_n      integer;
    v_start  uuid;
BEGIN
    v_start := gen_random_uuid();
    FOR cand IN
        -- a bounded window of eligible partitions from a random point of the id
        -- space (wrapping around), least recently consumed first within it
        SELECT w.id, w.name
        FROM ((SELECT pt.id, pt.name, lc.last_consumed_at
               FROM queen.partitions pt
               LEFT JOIN LATERAL (
                   SELECT l.committed_offset, l.lease_expires_at, l.last_consumed_at
                   FROM queen.log_consumers l
                   WHERE l.partition_id = pt.id AND l.consumer_group = p_group) lc ON true
               WHERE pt.queue_id = p_queue_id AND pt.id >= v_start
          AND pt.next_offset > greatest(coalesce(lc.committed_offset + 1, pt.low_offset), pt.low_offset)
          AND (lc.lease_expires_at IS NULL OR lc.lease_expires_at <= now())
          AND (p_window_seconds = 0 OR pt.last_created_at <= now() - make_interval(secs => p_window_seconds))
          AND (p_delay_seconds = 0 OR (
                SELECT s.created_at FROM queen.segments s
                WHERE s.partition_id = pt.id
                  AND s.last_offset >= greatest(coalesce(lc.committed_offset + 1, pt.low_offset), pt.low_offset)
                ORDER BY s.last_offset
                LIMIT 1) <= now() - make_interval(secs => p_delay_seconds))
               ORDER BY pt.id
               LIMIT 256)
              UNION ALL
              (SELECT pt.id, pt.name, lc.last_consumed_at
               FROM queen.partitions pt
               LEFT JOIN LATERAL (
                   SELECT l.committed_offset, l.lease_expires_at, l.last_consumed_at
                   FROM queen.log_consumers l
                   WHERE l.partition_id = pt.id AND l.consumer_group = p_group) lc ON true
               WHERE pt.queue_id = p_queue_id AND pt.id < v_start
          AND pt.next_offset > greatest(coalesce(lc.committed_offset + 1, pt.low_offset), pt.low_offset)
          AND (lc.lease_expires_at IS NULL OR lc.lease_expires_at <= now())
          AND (p_window_seconds = 0 OR pt.last_created_at <= now() - make_interval(secs => p_window_seconds))
          AND (p_delay_seconds = 0 OR (
                SELECT s.created_at FROM queen.segments s
                WHERE s.partition_id = pt.id
                  AND s.last_offset >= greatest(coalesce(lc.committed_offset + 1, pt.low_offset), pt.low_offset)
                ORDER BY s.last_offset
                LIMIT 1) <= now() - make_interval(secs => p_delay_seconds))
               ORDER BY pt.id
               LIMIT 256)) w
        ORDER BY w.last_consumed_at NULLS FIRST, w.id
        LIMIT p_max_partitions * 4 + 16
    LOOP
        RETURN QUERY
            SELECT cand.id, cand.name, m.*
            FROM queen.claim_partition(cand.id, p_queue_name, cand.name, p_group, v_left,
                                       p_lease_id, p_lease_seconds, p_auto_ack, p_delay_seconds,
                                       p_window_seconds, '', p_sub_mode, p_sub_from, p_holder) m;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        IF v_n > 0 THEN
            v_claims := v_claims + 1;
            v_left := v_left - v_n;
        END IF;
        EXIT WHEN v_claims >= p_max_partitions OR v_left <= 0;
    END LOOP;
END;
$$;

-- Writes a DLQ entry for one message of a partition, copying it out of its segment.
CREATE FUNCTION queen.dead_letter(
    p_partition_id uuid, p_group text, p_offset bigint, p_error text, p_retry_count integer
) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO queen.dead_letters (partition_id, consumer_group, msg_offset, message_id,
                                    transaction_id, trace_id, payload, producer_sub,
                                    error_message, retry_count, original_created_at)
    SELECT p_partition_id, p_group, p_offset,
           s.message_ids[i], s.transaction_ids[i], s.trace_ids[i], s.payloads[i],
           s.producer_subs[i], p_error, p_retry_count, s.created_at
    FROM (SELECT sg.*, (p_offset - sg.first_offset + 1)::integer AS i
          FROM queen.segments sg
          WHERE sg.partition_id = p_partition_id AND sg.last_offset >= p_offset
          ORDER BY sg.last_offset LIMIT 1) s
    WHERE s.first_offset <= p_offset
    ON CONFLICT (partition_id, consumer_group, msg_offset) DO NOTHING
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
CREATE FUNCTION queen.ack_batch(
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
BEGIN
    -- Fast path: a partition whose items are all `completed` acks of known
    -- messages under one lease (or none) needs one cursor update, to the
    -- highest valid offset, instead of one per message. Outcomes are the same
    -- as applying the items one by one in offset order.
    IF NOT p_in_tx THEN
        FOR g IN
            SELECT a.pid, q.name AS qname, pt.name AS pname,
                   array_agg(a.i::integer ORDER BY km.msg_offset, a.i) AS idxs,
                   array_agg(km.msg_offset ORDER BY km.msg_offset, a.i) AS offs,
                   (array_agg(a.lid))[1] AS lid
            FROM unnest(p_partition_ids, p_txn_ids, p_lease_ids, p_statuses)
                 WITH ORDINALITY AS a(pid, txn, lid, st, i)
            JOIN queen.message_keys km ON km.partition_id = a.pid AND km.transaction_id = a.txn
            JOIN queen.partitions pt ON pt.id = a.pid
            JOIN queen.queues q ON q.id = pt.queue_id
            GROUP BY a.pid, q.name, pt.name
            HAVING count(*) > 1
               AND count(*) = (SELECT count(*) FROM unnest(p_partition_ids) AS x(pid) WHERE x.pid = a.pid)
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
               k.msg_offset AS off, q.name AS qname, pt.name AS pname, q.retry_limit
        FROM unnest(p_partition_ids, p_txn_ids, p_lease_ids, p_statuses, p_errors)
             WITH ORDINALITY AS a(pid, txn, lid, st, err, i)
        LEFT JOIN queen.partitions pt ON pt.id = a.pid
        LEFT JOIN queen.queues q ON q.id = pt.queue_id
        LEFT JOIN queen.message_keys k ON k.partition_id = a.pid AND k.transaction_id = a.txn
        WHERE NOT (a.pid = ANY (v_fast))
        ORDER BY a.pid, k.msg_offset NULLS LAST, a.i
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

-- Extends every unexpired partition lease held under a lease id.
-- Returns the earliest new expiry and how many partition leases were extended;
-- when none was, reason says why.
CREATE FUNCTION queen.extend_lease(p_lease_id uuid, p_seconds integer)
RETURNS TABLE (expires_at timestamptz, renewed integer, reason text)
LANGUAGE plpgsql AS $$
BEGIN
    WITH up AS (
        UPDATE queen.log_consumers lc
        SET lease_expires_at = greatest(lc.lease_expires_at, now() + make_interval(secs => p_seconds))
        WHERE lc.lease_id = p_lease_id AND lc.lease_expires_at > now()
        RETURNING lc.lease_expires_at
    )
    SELECT min(up.lease_expires_at), count(*)::integer INTO expires_at, renewed FROM up;
    IF renewed > 0 THEN
        reason := NULL;
    ELSIF EXISTS (SELECT 1 FROM queen.log_consumers lc
                  WHERE lc.lease_id = p_lease_id AND lc.lease_expires_at IS NOT NULL) THEN
        reason := 'Lease already expired';
    ELSIF EXISTS (SELECT 1 FROM queen.log_consumers lc WHERE lc.lease_id = p_lease_id) THEN
        reason := 'Lease not active';
    ELSE
        reason := 'Lease not found';
    END IF;
    RETURN NEXT;
END;
$$;

-- Deletes a queue and everything stored for it. Returns false when it did not exist.
CREATE FUNCTION queen.delete_queue(p_name text)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_qid  uuid;
    v_pids uuid[];
BEGIN
    SELECT id INTO v_qid FROM queen.queues WHERE name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    SELECT coalesce(array_agg(id), '{}') INTO v_pids FROM queen.partitions WHERE queue_id = v_qid;
    DELETE FROM queen.segments WHERE partition_id = ANY (v_pids);
    DELETE FROM queen.message_keys WHERE partition_id = ANY (v_pids);
    DELETE FROM queen.log_consumers WHERE partition_id = ANY (v_pids);
    DELETE FROM queen.dead_letters WHERE partition_id = ANY (v_pids);
    DELETE FROM queen.message_traces WHERE partition_id = ANY (v_pids);
    DELETE FROM queen.consumer_subscriptions WHERE queue_name = p_name;
    DELETE FROM queen.queues WHERE id = v_qid;   -- partitions go by cascade
    RETURN true;
END;
$$;
