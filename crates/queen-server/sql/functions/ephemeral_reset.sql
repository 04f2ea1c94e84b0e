-- POST /api/v1/ephemeral/reset and, through ephemeral_delete, DELETE
-- /api/v1/ephemeral/queue/{queue}: drops every message of every partition,
-- voids every lease and moves every group's cursor to the tail; the
-- configuration and the incarnation stay. Answers how many messages were
-- dropped (0 for a queue without contents). The queue row is locked first, as
-- pushes lock it, so no push lands half before and half after.
CREATE OR REPLACE FUNCTION queen.ephemeral_reset(p_queue text)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_dropped bigint;
BEGIN
    PERFORM 1 FROM queen.ephemeral_queues q WHERE q.queue = p_queue FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    DELETE FROM queen.ephemeral_messages m WHERE m.queue = p_queue;
    GET DIAGNOSTICS v_dropped = ROW_COUNT;
    DELETE FROM queen.ephemeral_leases l WHERE l.queue = p_queue;
    UPDATE queen.ephemeral_cursors c SET cursor = p.next_seq - 1
    FROM queen.ephemeral_partitions p
    WHERE c.queue = p_queue AND p.queue = p_queue AND p.partition = c.partition;
    UPDATE queen.ephemeral_queues q SET touched_at = now(), bytes = 0 WHERE q.queue = p_queue;
    RETURN v_dropped;
END
$$;
