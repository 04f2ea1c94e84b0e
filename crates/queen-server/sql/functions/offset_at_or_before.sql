-- queen.offset_at_or_before(partition, at): the last offset whose createdAt
-- is at or before `at` (low_offset - 1 when none), so a cursor set there
-- resumes with the messages after `at`.
-- Called by: queen.seek.

CREATE OR REPLACE FUNCTION queen.offset_at_or_before(p_partition_id uuid, p_at timestamptz)
RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT coalesce(
        (SELECT max(s.last_offset) FROM queen.segments s
          WHERE s.partition_id = p_partition_id AND s.created_at <= p_at),
        (SELECT low_offset - 1 FROM queen.partitions WHERE id = p_partition_id))
$$;
