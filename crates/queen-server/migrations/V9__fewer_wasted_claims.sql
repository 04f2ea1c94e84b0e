-- Fewer wasted claims when many consumers pop one queue at once.
--
-- claim_partition locked the group's cursor row before it looked at the
-- lease, so a pop that lost the race for a partition (another pop leased it
-- and committed a moment earlier) still took a row lock on it, which writes
-- the tuple and WAL, only to find the lease and give up. The locking SELECT
-- now leaves leased rows alone (a row leased by a committed pop is not
-- locked; a row being claimed right now is skipped as before).
--
-- pop_queue: concurrent wildcard pops rotated among the first four hinted
-- candidates (V8), but the walk handed every pop the same order (least
-- recently consumed first), so after a restart, with no hints yet, sixteen
-- consumers queued on the same few cursor rows: 3.3 claim attempts per pop.
-- The walk's candidates rotate the same way now.
--
-- Both functions are otherwise the V8 versions; signatures are unchanged.

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
    -- a row under a live lease is not locked: locking writes the tuple
    SELECT * INTO c FROM queen.log_consumers lc
    WHERE lc.partition_id = p_partition_id AND lc.consumer_group = p_group
      AND (lc.lease_expires_at IS NULL OR lc.lease_expires_at <= now())
    FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        IF EXISTS (SELECT 1 FROM queen.log_consumers lc
                   WHERE lc.partition_id = p_partition_id AND lc.consumer_group = p_group) THEN
            RETURN;   -- leased, or another pop holds the row right now
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

CREATE OR REPLACE FUNCTION queen.pop_queue(
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
        ELSE
            SELECT array_agg(w.id), array_agg(w.name) INTO v_ids, v_names
            FROM queen.walk_eligible(p_queue_id, p_group, p_delay_seconds, p_window_seconds,
                                     v_tried, p_max_partitions * 4 + 16) w;
        END IF;
        -- concurrent pops compute the same order: each starts at one of the
        -- first four, so they do not all queue on one cursor row
        v_k := floor(random() * least(coalesce(cardinality(v_ids), 0), 4))::integer;
        IF v_k > 0 THEN
            v_ids := v_ids[v_k + 1:] || v_ids[1:v_k];
            v_names := v_names[v_k + 1:] || v_names[1:v_k];
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
