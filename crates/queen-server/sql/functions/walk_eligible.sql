-- queen.walk_eligible(queue, group, delay, window, tried, limit): the floor
-- walk of a wildcard pop. Up to `limit` partitions of the queue with messages
-- past the group's cursor and no live lease, 32 from each side of a random
-- point of the id space (index (queue_id, id), wrapping around), least
-- recently consumed first, leaving out `tried`. Respects the queue's
-- delayedProcessing and windowBuffer. Every cursor lookup is a LIMIT 1
-- lateral probe of its primary key, so the planner cannot merge the walk
-- with a scan of every cursor of the group.
-- Called by: queen.pop_queue (its second pass, when p_walk is set).

CREATE OR REPLACE FUNCTION queen.walk_eligible(
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
