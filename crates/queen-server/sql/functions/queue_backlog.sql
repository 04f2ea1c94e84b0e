-- queen.queue_backlog(queue_id): the messages of a queue not yet consumed,
-- as its maxSize counts them: per partition, those past its slowest cursor
-- (queue mode or any consumer group; a partition nobody popped counts whole,
-- and what retention removed does not count). One row per partition and an
-- index probe of its cursors: about 12 ms for 10 000 partitions.
-- Called by: queen.push_bounded, with a slot of the queue held (each slot
-- when deciding).

CREATE OR REPLACE FUNCTION queen.queue_backlog(p_queue_id uuid)
RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT coalesce(sum(p.next_offset - greatest(p.low_offset,
               coalesce((SELECT min(lc.committed_offset) FROM queen.log_consumers lc
                         WHERE lc.partition_id = p.id), 0) + 1)), 0)::bigint
    FROM queen.partitions p
    WHERE p.queue_id = p_queue_id
$$;
