-- queen.offset_before(partition, start): where a consumer group's cursor
-- starts on a partition it has never read. Returns the last offset of the
-- newest segment created before `start` (segments are monotonic in time), or
-- low_offset - 1 when there is none or `start` is NULL (from the oldest
-- stored message).
-- Called by: queen.claim_partition, on a group's first contact with a
-- partition.

CREATE OR REPLACE FUNCTION queen.offset_before(p_partition_id uuid, p_start timestamptz)
RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN p_start IS NULL THEN (SELECT low_offset - 1 FROM queen.partitions WHERE id = p_partition_id)
        ELSE coalesce(
            (SELECT max(s.last_offset) FROM queen.segments s
              WHERE s.partition_id = p_partition_id AND s.created_at < p_start),
            (SELECT low_offset - 1 FROM queen.partitions WHERE id = p_partition_id))
    END
$$;
