-- Read and admin helpers over the log model: single messages, statistics, seek.

-- Returns the message stored at one offset of a partition (nothing if it was
-- removed by retention; deleted = true if it was deleted through the API).
CREATE FUNCTION queen.message_at(p_partition_id uuid, p_offset bigint)
RETURNS TABLE (message_id uuid, transaction_id text, trace_id uuid, payload text,
               producer_sub text, created_at timestamptz, deleted boolean)
LANGUAGE sql STABLE AS $$
    SELECT s.message_ids[i], s.transaction_ids[i], s.trace_ids[i], s.payloads[i],
           s.producer_subs[i], s.created_at,
           coalesce(p_offset = ANY (s.deleted_offsets), false)
    FROM (SELECT sg.*, (p_offset - sg.first_offset + 1)::integer AS i
          FROM queen.segments sg
          WHERE sg.partition_id = p_partition_id AND sg.last_offset >= p_offset
          ORDER BY sg.last_offset LIMIT 1) s
    WHERE s.first_offset <= p_offset
$$;

-- Last offset whose createdAt is at or before p_at (low_offset - 1 when none):
-- a cursor set there resumes with the messages after p_at.
CREATE FUNCTION queen.offset_at_or_before(p_partition_id uuid, p_at timestamptz)
RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT coalesce(
        (SELECT max(s.last_offset) FROM queen.segments s
          WHERE s.partition_id = p_partition_id AND s.created_at <= p_at),
        (SELECT low_offset - 1 FROM queen.partitions WHERE id = p_partition_id))
$$;

-- createdAt of the oldest message after a cursor (NULL when caught up).
CREATE FUNCTION queen.oldest_after(p_partition_id uuid, p_committed bigint)
RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT s.created_at FROM queen.segments s
    WHERE s.partition_id = p_partition_id AND s.last_offset > p_committed
    ORDER BY s.last_offset LIMIT 1
$$;

-- Per-partition counts for the dashboards. With several consumer groups a
-- message counts as completed once the furthest cursor passed it.
CREATE VIEW queen.partition_stats AS
SELECT p.id AS partition_id, p.queue_id, p.name, p.created_at,
       (p.next_offset - p.low_offset) AS total,
       least(p.next_offset - p.low_offset,
             greatest(coalesce(c.max_committed, p.low_offset - 1) - (p.low_offset - 1), 0)) AS completed,
       coalesce(c.processing, 0) AS processing,
       coalesce(d.dead, 0) AS dead_letter,
       (SELECT s.created_at FROM queen.segments s WHERE s.partition_id = p.id
        ORDER BY s.last_offset LIMIT 1) AS oldest_message,
       p.last_created_at AS newest_message,
       c.last_consumed_at
FROM queen.partitions p
LEFT JOIN LATERAL (
    SELECT max(lc.committed_offset) AS max_committed,
           sum(CASE WHEN lc.lease_expires_at > now()
                    THEN greatest(lc.lease_end_offset - lc.committed_offset, 0) ELSE 0 END) AS processing,
           max(lc.last_consumed_at) AS last_consumed_at
    FROM queen.log_consumers lc WHERE lc.partition_id = p.id) c ON true
LEFT JOIN LATERAL (
    SELECT count(*) AS dead FROM queen.dead_letters dl WHERE dl.partition_id = p.id) d ON true;

-- Status of one message as the admin API reports it.
CREATE FUNCTION queen.message_status(p_partition_id uuid, p_offset bigint)
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

-- Deletes one message: its offset is skipped by pops from now on and its
-- transactionId is free again. Returns false when the message is unknown.
CREATE FUNCTION queen.delete_message(p_partition_id uuid, p_transaction_id text)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_offset bigint;
BEGIN
    DELETE FROM queen.message_keys k
    WHERE k.partition_id = p_partition_id AND k.transaction_id = p_transaction_id
    RETURNING k.msg_offset INTO v_offset;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    UPDATE queen.segments s
    SET deleted_offsets = array_append(coalesce(s.deleted_offsets, '{}'), v_offset)
    WHERE s.partition_id = p_partition_id AND s.last_offset >= v_offset AND s.first_offset <= v_offset;
    RETURN true;
END;
$$;

-- Moves a group's cursors on a queue (only partitions it already has a cursor
-- on) to the end, or to the last message at or before a time, releasing their
-- leases. p_partition restricts it to one partition. Returns the rows moved.
CREATE FUNCTION queen.seek(p_group text, p_queue_id uuid, p_partition text,
                           p_to_end boolean, p_at timestamptz)
RETURNS TABLE (partition_name text, committed_offset bigint)
LANGUAGE sql AS $$
    UPDATE queen.log_consumers lc
    SET committed_offset = CASE WHEN p_to_end THEN p.next_offset - 1
                                ELSE queen.offset_at_or_before(p.id, p_at) END,
        lease_expires_at = NULL,
        retry_count = 0
    FROM queen.partitions p
    WHERE p.queue_id = p_queue_id AND lc.partition_id = p.id AND lc.consumer_group = p_group
      AND (p_partition IS NULL OR p.name = p_partition)
    RETURNING p.name, lc.committed_offset
$$;

-- Dashboard traffic buckets: messages written per minute per queue.
CREATE INDEX segments_created_at ON queen.segments (created_at);
