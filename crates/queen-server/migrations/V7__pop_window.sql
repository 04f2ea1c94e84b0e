-- Wildcard pops over many partitions: instead of ranking every eligible
-- partition of the queue on each pop (a full scan and sort, slow with 10 000
-- partitions), look at a bounded window of eligible partitions starting at a
-- random point of the id space, and take the least recently consumed of those.

CREATE INDEX partitions_queue_id_id ON queen.partitions (queue_id, id);

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
