-- queen.delete_queue(name): deletes a queue and everything stored for it
-- (segments, keys, cursors, dead letters, traces, subscriptions; partitions
-- go by cascade). Returns false when the queue did not exist.
-- Called by: `Store::delete_queue`, for queue deletion requests.

CREATE OR REPLACE FUNCTION queen.delete_queue(p_name text)
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
    DELETE FROM queen.group_policies WHERE queue_name = p_name;
    DELETE FROM queen.queues WHERE id = v_qid;   -- partitions go by cascade
    RETURN true;
END;
$$;
