-- Stored functions of the hot path: one round trip per push, pop and ack request.
-- Every function is plain SQL/PL/pgSQL and can be called from psql.

-- Appends messages to their partitions.
-- Items arrive as parallel arrays, already free of repeats inside the request.
-- Partitions are locked in (queue_id, name) order so concurrent pushes never deadlock.
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
    g        record;
    v_pid    uuid;
    v_next   bigint;
    v_last   timestamptz;
    v_now    timestamptz;
    v_fresh  integer[];
    v_dups   integer[];
    v_dupids uuid[];
    v_n      integer;
BEGIN
    FOR g IN
        SELECT t.q, t.p, array_agg(t.i::integer ORDER BY t.i) AS idxs
        FROM unnest(p_queue_ids, p_partitions) WITH ORDINALITY AS t(q, p, i)
        GROUP BY t.q, t.p
        ORDER BY t.q, t.p
    LOOP
        SELECT pt.id, pt.next_offset, pt.last_created_at INTO v_pid, v_next, v_last
        FROM queen.partitions pt WHERE pt.queue_id = g.q AND pt.name = g.p FOR UPDATE;
        IF NOT FOUND THEN
            INSERT INTO queen.partitions (id, queue_id, name)
            VALUES (gen_random_uuid(), g.q, g.p)
            ON CONFLICT (queue_id, name) DO NOTHING;
            SELECT pt.id, pt.next_offset, pt.last_created_at INTO v_pid, v_next, v_last
            FROM queen.partitions pt WHERE pt.queue_id = g.q AND pt.name = g.p FOR UPDATE;
        END IF;

        -- split the group into fresh items and stored duplicates, keeping array order
        SELECT coalesce(array_agg(m.i ORDER BY m.pos) FILTER (WHERE k.message_id IS NULL), '{}'),
               coalesce(array_agg(m.i ORDER BY m.pos) FILTER (WHERE k.message_id IS NOT NULL), '{}'),
               coalesce(array_agg(k.message_id ORDER BY m.pos) FILTER (WHERE k.message_id IS NOT NULL), '{}')
        INTO v_fresh, v_dups, v_dupids
        FROM unnest(g.idxs) WITH ORDINALITY AS m(i, pos)
        LEFT JOIN queen.message_keys k
               ON k.partition_id = v_pid AND k.transaction_id = p_txn_ids[m.i];

        IF p_strict AND cardinality(v_dups) > 0 THEN
            RAISE unique_violation USING MESSAGE =
                format('duplicate key value violates unique constraint "message_keys_pkey": transactionId %s already exists in partition %s',
                       p_txn_ids[v_dups[1]], g.p);
        END IF;

        v_n := cardinality(v_fresh);
        IF v_n > 0 THEN
            -- createdAt never moves backwards within a partition
            v_now := greatest(clock_timestamp(), coalesce(v_last, '-infinity'::timestamptz));
            INSERT INTO queen.message_keys (partition_id, transaction_id, msg_offset, message_id)
            SELECT v_pid, p_txn_ids[f.i], v_next + f.o - 1, p_message_ids[f.i]
            FROM unnest(v_fresh) WITH ORDINALITY AS f(i, o);

            INSERT INTO queen.segments (partition_id, last_offset, first_offset, created_at,
                                        message_ids, transaction_ids, trace_ids, payloads, producer_subs)
            SELECT v_pid, v_next + v_n - 1, v_next, v_now,
                   array_agg(p_message_ids[f.i] ORDER BY f.o),
                   array_agg(p_txn_ids[f.i] ORDER BY f.o),
                   array_agg(p_trace_ids[f.i] ORDER BY f.o),
                   array_agg(p_payloads[f.i] ORDER BY f.o),
                   CASE WHEN bool_or(p_producer_subs[f.i] IS NOT NULL)
                        THEN array_agg(p_producer_subs[f.i] ORDER BY f.o) END
            FROM unnest(v_fresh) WITH ORDINALITY AS f(i, o);

            UPDATE queen.partitions SET next_offset = v_next + v_n, last_created_at = v_now
            WHERE id = v_pid;
        END IF;

        RETURN QUERY
            SELECT f.i, 'queued'::text, p_message_ids[f.i], v_pid FROM unnest(v_fresh) AS f(i)
            UNION ALL
            SELECT d.i, 'duplicate'::text, d.mid, v_pid FROM unnest(v_dups, v_dupids) AS d(i, mid);
    END LOOP;
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
-- work for the group, spending a global budget of p_batch messages.
-- Partitions the group never read come first, then the least recently consumed.
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
BEGIN
    FOR cand IN
        SELECT pt.id, pt.name
        FROM queen.partitions pt
        LEFT JOIN queen.log_consumers lc
               ON lc.partition_id = pt.id AND lc.consumer_group = p_group
        WHERE pt.queue_id = p_queue_id
          AND pt.next_offset > greatest(coalesce(lc.committed_offset + 1, pt.low_offset), pt.low_offset)
          AND (lc.lease_expires_at IS NULL OR lc.lease_expires_at <= now())
          AND (p_window_seconds = 0 OR pt.last_created_at <= now() - make_interval(secs => p_window_seconds))
          -- with delayedProcessing, only partitions whose next message is due: otherwise
          -- delayed heads fill the candidate LIMIT and hide partitions that are ready
          AND (p_delay_seconds = 0 OR (
                SELECT s.created_at FROM queen.segments s
                WHERE s.partition_id = pt.id
                  AND s.last_offset >= greatest(coalesce(lc.committed_offset + 1, pt.low_offset), pt.low_offset)
                ORDER BY s.last_offset
                LIMIT 1) <= now() - make_interval(secs => p_delay_seconds))
        ORDER BY lc.last_consumed_at NULLS FIRST, pt.id
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
BEGIN
    FOR it IN
        SELECT a.i::integer AS i, a.pid, a.txn, a.lid, lower(coalesce(a.st, 'completed')) AS st, a.err,
               k.msg_offset AS off, q.name AS qname, pt.name AS pname, q.retry_limit
        FROM unnest(p_partition_ids, p_txn_ids, p_lease_ids, p_statuses, p_errors)
             WITH ORDINALITY AS a(pid, txn, lid, st, err, i)
        LEFT JOIN queen.partitions pt ON pt.id = a.pid
        LEFT JOIN queen.queues q ON q.id = pt.queue_id
        LEFT JOIN queen.message_keys k ON k.partition_id = a.pid AND k.transaction_id = a.txn
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

        v_active := c.lease_expires_at IS NOT NULL AND c.lease_expires_at > now();
        IF it.lid IS NOT NULL AND NOT (
               c.lease_id = it.lid
               AND (v_active OR (c.lease_expires_at IS NULL AND it.off <= c.committed_offset))) THEN
            error := 'Invalid or expired lease';
            IF p_in_tx THEN RAISE EXCEPTION 'ACK operation failed: Invalid or expired lease' USING ERRCODE = 'P0001'; END IF;
            RETURN NEXT; CONTINUE;
        END IF;

        success := true;
        IF it.off <= c.committed_offset THEN
            RETURN NEXT; CONTINUE;   -- already done for this group: idempotent
        END IF;

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
