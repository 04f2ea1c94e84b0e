-- queen.apply_retention(batch): deletes up to `batch` expired segments of
-- retention-enabled queues, oldest first per partition, frees their
-- transactionIds and moves low_offset up. retentionSeconds: any message
-- older than N s; completedRetentionSeconds: messages older than N s that
-- every group with a cursor on the partition has passed (partitions without
-- cursors are untouched). Returns segments deleted.
-- Called by: the leader-gated retention job (store/jobs.rs).

CREATE OR REPLACE FUNCTION queen.apply_retention(p_batch integer)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_n integer;
BEGIN
    WITH victims AS (
        SELECT s.partition_id, s.last_offset
        FROM queen.segments s
        JOIN queen.partitions p ON p.id = s.partition_id
        JOIN queen.queues q ON q.id = p.queue_id
        WHERE q.retention_enabled
          AND ((q.retention_seconds > 0
                AND s.created_at < now() - make_interval(secs => q.retention_seconds))
            OR (q.completed_retention_seconds > 0
                AND s.created_at < now() - make_interval(secs => q.completed_retention_seconds)
                AND s.last_offset <= (SELECT min(lc.committed_offset) FROM queen.log_consumers lc
                                      WHERE lc.partition_id = s.partition_id)))
        ORDER BY s.partition_id, s.last_offset
        LIMIT p_batch
        FOR UPDATE OF s SKIP LOCKED
    ), del AS (
        DELETE FROM queen.segments s USING victims v
        WHERE s.partition_id = v.partition_id AND s.last_offset = v.last_offset
        RETURNING s.partition_id, s.last_offset, s.transaction_ids
    ), keys AS (
        DELETE FROM queen.message_keys k
        USING (SELECT d.partition_id, unnest(d.transaction_ids) AS txn FROM del d) x
        WHERE k.partition_id = x.partition_id AND k.transaction_id = x.txn
    ), low AS (
        UPDATE queen.partitions p SET low_offset = greatest(p.low_offset, m.top + 1)
        FROM (SELECT d.partition_id, max(d.last_offset) AS top FROM del d GROUP BY d.partition_id) m
        WHERE p.id = m.partition_id
    )
    SELECT count(*) INTO v_n FROM del;
    RETURN v_n;
END;
$$;
