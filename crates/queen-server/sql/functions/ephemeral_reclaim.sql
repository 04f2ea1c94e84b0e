-- Frees the messages of one ephemeral ring that every group of the queue has
-- been handed and none holds a lease on. A group without a cursor on the ring
-- yet counts as having read nothing. Called by ephemeral_pop and ephemeral_ack.
CREATE OR REPLACE FUNCTION queen.ephemeral_reclaim(p_queue text, p_partition text)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_floor bigint;
    v_freed bigint;
BEGIN
    SELECT CASE WHEN count(*) < (SELECT count(*) FROM queen.ephemeral_groups g WHERE g.queue = p_queue)
                THEN 0 ELSE coalesce(min(c.cursor), 0) END
    INTO v_floor
    FROM queen.ephemeral_cursors c
    WHERE c.queue = p_queue AND c.partition = p_partition;
    DELETE FROM queen.ephemeral_messages m
    WHERE m.queue = p_queue AND m.partition = p_partition AND m.seq <= v_floor
      AND NOT EXISTS (SELECT 1 FROM queen.ephemeral_leases l
                      WHERE l.queue = p_queue AND l.partition = p_partition AND l.seq = m.seq);
    GET DIAGNOSTICS v_freed = ROW_COUNT;
    RETURN v_freed;
END
$$;
