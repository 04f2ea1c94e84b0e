-- queen.cleanup_partitions(days, batch): removes up to `batch` partitions with
-- no stored message, no live lease and no activity for `days` days, with
-- their cursors. Returns partitions removed.
-- Called by: the leader-gated retention job (store/jobs.rs).

CREATE OR REPLACE FUNCTION queen.cleanup_partitions(p_days integer, p_batch integer)
RETURNS integer
LANGUAGE sql AS $$
    WITH gone AS (
        DELETE FROM queen.partitions p
        WHERE p.id IN (
            SELECT pt.id FROM queen.partitions pt
            WHERE coalesce(pt.last_created_at, pt.created_at) < now() - make_interval(days => p_days)
              AND NOT EXISTS (SELECT 1 FROM queen.segments s WHERE s.partition_id = pt.id)
              AND NOT EXISTS (SELECT 1 FROM queen.log_consumers lc
                              WHERE lc.partition_id = pt.id AND lc.lease_expires_at > now())
            LIMIT p_batch)
        RETURNING p.id
    ), cursors AS (
        DELETE FROM queen.log_consumers lc USING gone g WHERE lc.partition_id = g.id
    )
    SELECT count(*)::integer FROM gone
$$;
