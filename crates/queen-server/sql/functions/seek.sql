-- queen.seek(group, queue, partition, to_end, at): moves a consumer group's
-- cursors on a queue (only partitions it already has a cursor on) to the end,
-- or to the last message at or before `at`, releasing their leases (and
-- retry holds) and clearing retry and delivery-attempt counts. A non-NULL `partition` restricts it to that partition.
-- Returns the rows moved.
-- Called by: `Store::seek` (the consumer group seek of the admin API).

CREATE OR REPLACE FUNCTION queen.seek(p_group text, p_queue_id uuid, p_partition text,
                           p_to_end boolean, p_at timestamptz)
RETURNS TABLE (partition_name text, committed_offset bigint)
LANGUAGE sql AS $$
    UPDATE queen.log_consumers lc
    SET committed_offset = CASE WHEN p_to_end THEN p.next_offset - 1
                                ELSE queen.offset_at_or_before(p.id, p_at) END,
        lease_expires_at = NULL,
        retry_count = 0,
        attempts = 0
    FROM queen.partitions p
    WHERE p.queue_id = p_queue_id AND lc.partition_id = p.id AND lc.consumer_group = p_group
      AND (p_partition IS NULL OR p.name = p_partition)
    RETURNING p.name, lc.committed_offset
$$;
