-- Claims return their messages as one set, and wildcard pops say which
-- hinted partitions they found drained.
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
-- (broker/recent.rs). The 14-argument form (previous version) stays as a
-- wrapper that never reports, for brokers of that version during a rolling
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
    v_deleted boolean := false;
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
        SELECT sg.first_offset, sg.last_offset, sg.created_at,
               sg.deleted_offsets IS NOT NULL AS has_deleted
        FROM queen.segments sg
        WHERE sg.partition_id = p_partition_id AND sg.last_offset >= v_start
        ORDER BY sg.last_offset
        LIMIT (v_end - v_start + 1)
    LOOP
        EXIT WHEN s.first_offset > v_stop + 1
               OR (p_delay_seconds > 0 AND s.created_at > now() - make_interval(secs => p_delay_seconds));
        v_stop := least(s.last_offset, v_end);
        v_hi := s.last_offset;
        v_deleted := v_deleted OR s.has_deleted;
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
              AND NOT (sg.deleted_offsets IS NOT NULL
                       AND (sg.first_offset + u.n - 1) = ANY (sg.deleted_offsets))
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
    IF v_deleted THEN
        SELECT max(sg.first_offset + u.n - 1) INTO v_last
        FROM queen.segments sg
        CROSS JOIN LATERAL generate_series(1, cardinality(sg.message_ids)) AS u(n)
        WHERE sg.partition_id = p_partition_id AND sg.last_offset BETWEEN v_start AND v_hi
          AND sg.first_offset + u.n - 1 BETWEEN v_start AND v_stop
          AND NOT (sg.deleted_offsets IS NOT NULL
                   AND (sg.first_offset + u.n - 1) = ANY (sg.deleted_offsets));
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
    p_report_drained   boolean
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
    j         integer;
BEGIN
    FOR v_pass IN 1 .. 2 LOOP
        IF v_pass = 1 THEN
            CONTINUE WHEN coalesce(cardinality(p_hints), 0) = 0;
            -- hinted partitions with messages past the group's cursor and no
            -- live lease, least recently consumed first; and the drained ones
            SELECT array_agg(e.id ORDER BY e.last_consumed_at NULLS FIRST, e.n) FILTER (WHERE e.eligible),
                   array_agg(e.name ORDER BY e.last_consumed_at NULLS FIRST, e.n) FILTER (WHERE e.eligible),
                   array_agg(e.id) FILTER (WHERE NOT e.pending),
                   array_agg(e.name) FILTER (WHERE NOT e.pending)
            INTO v_ids, v_names, v_dids, v_dnames
            FROM (SELECT h.name, h.n, pt.id, lc.last_consumed_at,
                         coalesce(pt.next_offset > greatest(coalesce(lc.committed_offset + 1, pt.low_offset),
                                                            pt.low_offset), false) AS pending,
                         coalesce(pt.next_offset > greatest(coalesce(lc.committed_offset + 1, pt.low_offset),
                                                            pt.low_offset), false)
                           AND (lc.lease_expires_at IS NULL OR lc.lease_expires_at <= now()) AS eligible
                  FROM unnest(p_hints) WITH ORDINALITY AS h(name, n)
                  LEFT JOIN queen.partitions pt ON pt.queue_id = p_queue_id AND pt.name = h.name
                  LEFT JOIN LATERAL (
                      SELECT l.committed_offset, l.lease_expires_at, l.last_consumed_at
                      FROM queen.log_consumers l
                      WHERE l.partition_id = pt.id AND l.consumer_group = p_group
                      LIMIT 1) lc ON true) e;
            IF p_report_drained AND v_dnames IS NOT NULL THEN
                RETURN QUERY
                    SELECT d.id, d.name, NULL::bigint, NULL::uuid, NULL::text, NULL::uuid,
                           NULL::text, NULL::text, NULL::timestamptz
                    FROM unnest(v_dids, v_dnames) AS d(id, name);
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
                                  p_window_seconds, p_sub_mode, p_sub_from, p_holder, p_hints, false)
$$;
