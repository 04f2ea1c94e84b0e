-- queen.message_status(partition, offset): the status of one message as the
-- admin API reports it: dead_letter, completed, processing or pending. In
-- queue mode the `__QUEUE_MODE__` cursor decides; otherwise a message is
-- completed once every consumer group passed it.
-- Called by: the store's message listing and detail (`Store::list_messages`,
-- `Store::message_detail`).

CREATE OR REPLACE FUNCTION queen.message_status(p_partition_id uuid, p_offset bigint)
RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN EXISTS (SELECT 1 FROM queen.dead_letters d
                     WHERE d.partition_id = p_partition_id AND d.msg_offset = p_offset)
            THEN 'dead_letter'
        WHEN qm.committed_offset IS NULL AND bus.groups > 0
            THEN CASE WHEN bus.passed = bus.groups THEN 'completed' ELSE 'pending' END
        WHEN qm.committed_offset >= p_offset THEN 'completed'
        WHEN qm.lease_expires_at > now() AND qm.lease_end_offset >= p_offset THEN 'processing'
        ELSE 'pending'
    END
    FROM (SELECT 1) one
    LEFT JOIN queen.log_consumers qm
           ON qm.partition_id = p_partition_id AND qm.consumer_group = '__QUEUE_MODE__'
    CROSS JOIN LATERAL (
        SELECT count(*) AS groups, count(*) FILTER (WHERE lc.committed_offset >= p_offset) AS passed
        FROM queen.log_consumers lc
        WHERE lc.partition_id = p_partition_id AND lc.consumer_group <> '__QUEUE_MODE__') bus
$$;
