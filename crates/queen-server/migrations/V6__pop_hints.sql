-- Wildcard pops try the partitions the broker wrote to lately before walking
-- the queue (storage notes, question 5). With 10 000 partitions of which few
-- hold messages, the walk alone passed over thousands of drained partitions
-- per pop; the broker's list of recently written partitions (p_hints, names
-- from its own pushes and its peers' MESSAGE_AVAILABLE hints, see
-- broker/recent.rs) finds the ones with work directly, and the walk stays as
-- the floor for everything the list misses (lost hints, restarts).
-- The walk stops at 32 eligible partitions per half instead of 256, and
-- every cursor lookup is a LIMIT 1 lateral probe of its primary key: as a
-- plain join the planner merged the walk with a scan of every cursor of the
-- group (9 000 rows read per pop at 10 000 partitions).
-- The old signature stays as a wrapper for brokers of the previous version
-- during a rolling upgrade.

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
    p_holder         text,
    p_hints          text[]      -- partition names, newest first
) RETURNS TABLE (partition_id uuid, partition_name text, msg_offset bigint, message_id uuid,
                 transaction_id text, trace_id uuid, payload text, producer_sub text,
                 created_at timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    v_left   integer := p_batch;
    v_claims integer := 0;
    v_n      integer;
    v_start  uuid := gen_random_uuid();
    v_ids    uuid[];
    v_names  text[];
    v_tried  uuid[] := '{}';
    v_pass   integer;
    j        integer;
BEGIN
    FOR v_pass IN 1 .. 2 LOOP
        IF v_pass = 1 THEN
            -- partitions written to lately that have messages past the group's
            -- cursor and no live lease, least recently consumed first
            SELECT array_agg(pt.id ORDER BY lc.last_consumed_at NULLS FIRST, h.n),
                   array_agg(pt.name ORDER BY lc.last_consumed_at NULLS FIRST, h.n)
            INTO v_ids, v_names
            FROM unnest(p_hints) WITH ORDINALITY AS h(name, n)
            JOIN queen.partitions pt ON pt.queue_id = p_queue_id AND pt.name = h.name
            LEFT JOIN LATERAL (
                SELECT l.committed_offset, l.lease_expires_at, l.last_consumed_at
                FROM queen.log_consumers l
                WHERE l.partition_id = pt.id AND l.consumer_group = p_group
                LIMIT 1) lc ON true
            WHERE pt.next_offset > greatest(coalesce(lc.committed_offset + 1, pt.low_offset), pt.low_offset)
              AND (lc.lease_expires_at IS NULL OR lc.lease_expires_at <= now());
        ELSE
            -- the floor: a bounded window of eligible partitions from a random
            -- point of the id space (wrapping around), least recently consumed
            -- first within it
            SELECT array_agg(x.id ORDER BY x.last_consumed_at NULLS FIRST, x.id),
                   array_agg(x.name ORDER BY x.last_consumed_at NULLS FIRST, x.id)
            INTO v_ids, v_names
            FROM (SELECT w.id, w.name, w.last_consumed_at
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
                  WHERE NOT (w.id = ANY (v_tried))
                  ORDER BY w.last_consumed_at NULLS FIRST, w.id
                  LIMIT p_max_partitions * 4 + 16) x;
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
    p_holder         text
) RETURNS TABLE (partition_id uuid, partition_name text, msg_offset bigint, message_id uuid,
                 transaction_id text, trace_id uuid, payload text, producer_sub text,
                 created_at timestamptz)
LANGUAGE sql AS $$
    SELECT * FROM queen.pop_queue(p_queue_id, p_queue_name, p_group, p_batch, p_max_partitions,
                                  p_lease_id, p_lease_seconds, p_auto_ack, p_delay_seconds,
                                  p_window_seconds, p_sub_mode, p_sub_from, p_holder, '{}'::text[])
$$;
