-- queen.oldest_after(partition, committed): createdAt of the oldest message
-- after a cursor, NULL when the cursor is caught up.
-- Called by: `Store::cursors` (consumer group lag for the admin API).

CREATE OR REPLACE FUNCTION queen.oldest_after(p_partition_id uuid, p_committed bigint)
RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT s.created_at FROM queen.segments s
    WHERE s.partition_id = p_partition_id AND s.last_offset > p_committed
    ORDER BY s.last_offset LIMIT 1
$$;
