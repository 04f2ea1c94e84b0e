-- discover_partitions: up to $3 partitions of queue $1 with messages past
-- the cursor of group $2 (or, without a cursor row, past the partition's low
-- offset) and no live lease, in index order. The broker adds them to its
-- list of partitions wildcard pops try first (broker/recent.rs) when a pop
-- had to walk the queue and found work the list did not know: after a
-- restart with a backlog spread over many partitions, or writes this
-- replica never heard of. Each cursor lookup is a LIMIT 1 lateral probe of
-- its primary key, as in queen.walk_eligible, so the planner cannot turn it
-- into a scan of every cursor of the group. Read only.
-- Parameters: $1 queue id, $2 group, $3 most partitions.
-- Called by: `Store::discover_partitions` (store/pop.rs), at most once per
-- half second per queue and group.
SELECT pt.name
FROM queen.partitions pt
LEFT JOIN LATERAL (
    SELECT l.committed_offset, l.lease_expires_at
    FROM queen.log_consumers l
    WHERE l.partition_id = pt.id AND l.consumer_group = $2::text
    LIMIT 1) lc ON true
WHERE pt.queue_id = $1::uuid
  AND pt.next_offset > greatest(coalesce(lc.committed_offset + 1, pt.low_offset), pt.low_offset)
  AND (lc.lease_expires_at IS NULL OR lc.lease_expires_at <= now())
ORDER BY pt.id
LIMIT $3::integer
