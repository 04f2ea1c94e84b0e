-- DELETE /api/v1/ephemeral/queue/{queue} (store/ephemeral.rs): the contents,
-- cursors, groups and partitions of the queue, and its declaration. deleted is
-- true when contents or a declaration existed, declared when a declaration did.
CREATE OR REPLACE FUNCTION queen.ephemeral_delete(p_queue text)
RETURNS TABLE (deleted boolean, declared boolean)
LANGUAGE plpgsql AS $$
DECLARE
    v_live boolean;
BEGIN
    PERFORM queen.ephemeral_reset(p_queue);
    DELETE FROM queen.ephemeral_cursors c WHERE c.queue = p_queue;
    DELETE FROM queen.ephemeral_groups g WHERE g.queue = p_queue;
    DELETE FROM queen.ephemeral_partitions p WHERE p.queue = p_queue;
    DELETE FROM queen.ephemeral_queues q WHERE q.queue = p_queue;
    v_live := FOUND;
    DELETE FROM queen.ephemeral_declarations d WHERE d.queue = p_queue;
    declared := FOUND;
    deleted := v_live OR declared;
    RETURN NEXT;
END
$$;
