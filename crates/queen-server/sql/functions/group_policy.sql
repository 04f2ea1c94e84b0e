-- queen.group_policy(queue, group, conflation): the stored delivery policy
-- of consumer group p_group on queue p_queue (true = conflation, last-value
-- delivery), registering the group with p_conflation when it has none. A
-- group that already has cursors on the queue was registered by pops before
-- policies were stored, without conflation: it is registered as false
-- whatever this pop asks. The stored value wins from then on.
-- Called by: `Store::group_policy`, on a pop of a named group whose policy
-- the broker has not cached.

CREATE OR REPLACE FUNCTION queen.group_policy(p_queue text, p_group text, p_conflation boolean)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_stored boolean;
BEGIN
    SELECT gp.conflation INTO v_stored FROM queen.group_policies gp
    WHERE gp.consumer_group = p_group AND gp.queue_name = p_queue;
    IF FOUND THEN
        RETURN v_stored;
    END IF;
    INSERT INTO queen.group_policies (consumer_group, queue_name, conflation)
    SELECT p_group, p_queue,
           p_conflation AND NOT EXISTS (
               SELECT 1 FROM queen.queues q
               JOIN queen.partitions pt ON pt.queue_id = q.id
               JOIN queen.log_consumers lc ON lc.partition_id = pt.id AND lc.consumer_group = p_group
               WHERE q.name = p_queue)
    ON CONFLICT DO NOTHING;
    SELECT gp.conflation INTO v_stored FROM queen.group_policies gp
    WHERE gp.consumer_group = p_group AND gp.queue_name = p_queue;
    RETURN v_stored;
END;
$$;
