-- queen.record_queue_metrics(min_gap_ms): one queen.metrics_history row per
-- queue at now(), with the deltas since that queue's previous row (a queue's
-- first row counts from zero); nothing when the newest row is younger than
-- min_gap_ms (another replica wrote this interval). Returns the rows written.
-- The caller holds the metrics advisory lock, so two writers never compute
-- deltas from the same previous row.
-- popped = acked delta + change of in-flight messages (those leased now
-- and not before), so a pop whose ack is still due counts in its own bucket.
-- Called by: the gated part of the stats job (`Store::record_queue_metrics`).

CREATE OR REPLACE FUNCTION queen.record_queue_metrics(p_min_gap_ms bigint)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    IF EXISTS (SELECT 1 FROM queen.metrics_history
               WHERE bucket > now() - make_interval(secs => p_min_gap_ms / 1000.0)) THEN
        RETURN 0;
    END IF;
    WITH part AS (
        SELECT p.queue_id, p.id, p.next_offset, p.low_offset,
               (SELECT s.created_at FROM queen.segments s WHERE s.partition_id = p.id
                 ORDER BY s.last_offset LIMIT 1) AS oldest
        FROM queen.partitions p
    ), cur AS (
        SELECT part.queue_id,
               sum(lc.total_consumed) AS consumed,
               sum(CASE WHEN lc.lease_expires_at > now()
                        THEN greatest(lc.lease_end_offset - lc.committed_offset, 0) ELSE 0 END) AS processing,
               max(greatest(part.next_offset - 1 - greatest(lc.committed_offset, part.low_offset - 1), 0)) AS offset_lag,
               max(extract(epoch FROM now() - queen.oldest_after(part.id,
                   greatest(lc.committed_offset, part.low_offset - 1)))) AS lag_seconds
        FROM queen.log_consumers lc JOIN part ON part.id = lc.partition_id
        GROUP BY part.queue_id
    ), fresh AS (
        -- partitions no group has a cursor on yet: all their messages wait
        SELECT part.queue_id,
               max(part.next_offset - part.low_offset) AS offset_lag,
               max(extract(epoch FROM now() - part.oldest)) AS lag_seconds
        FROM part
        WHERE NOT EXISTS (SELECT 1 FROM queen.log_consumers lc WHERE lc.partition_id = part.id)
        GROUP BY part.queue_id
    ), stats AS (
        SELECT s.queue_id,
               sum(greatest(s.total - s.completed - s.processing - s.dead_letter, 0)) AS pending
        FROM queen.partition_stats s GROUP BY s.queue_id
    ), dead AS (
        SELECT part.queue_id, count(*) AS dead
        FROM queen.dead_letters dl JOIN part ON part.id = dl.partition_id
        GROUP BY part.queue_id
    ), now_rows AS (
        SELECT q.name AS queue,
               coalesce((SELECT sum(part.next_offset - 1) FROM part WHERE part.queue_id = q.id), 0)::bigint
                   AS pushed_total,
               coalesce(cur.consumed, 0)::bigint AS acked_total,
               coalesce(dead.dead, 0)::bigint AS dead_total,
               coalesce(stats.pending, 0)::bigint AS pending,
               coalesce(cur.processing, 0)::bigint AS processing,
               greatest(coalesce(cur.offset_lag, 0), coalesce(fresh.offset_lag, 0))::bigint AS offset_lag,
               greatest(coalesce(cur.lag_seconds, 0), coalesce(fresh.lag_seconds, 0))::double precision
                   AS lag_seconds
        FROM queen.queues q
        LEFT JOIN cur ON cur.queue_id = q.id
        LEFT JOIN fresh ON fresh.queue_id = q.id
        LEFT JOIN stats ON stats.queue_id = q.id
        LEFT JOIN dead ON dead.queue_id = q.id
    )
    INSERT INTO queen.metrics_history (queue, bucket, pushed_total, acked_total, dead_total,
                                       pushed, popped, acked, dead_lettered,
                                       pending, processing, offset_lag, lag_seconds)
    SELECT r.queue, now(), r.pushed_total, r.acked_total, r.dead_total,
           greatest(r.pushed_total - coalesce(prev.pushed_total, 0), 0),
           greatest(r.acked_total - coalesce(prev.acked_total, 0)
                    + r.processing - coalesce(prev.processing, 0), 0),
           greatest(r.acked_total - coalesce(prev.acked_total, 0), 0),
           greatest(r.dead_total - coalesce(prev.dead_total, 0), 0),
           r.pending, r.processing, r.offset_lag, greatest(r.lag_seconds, 0)
    FROM now_rows r
    LEFT JOIN LATERAL (
        SELECT h.pushed_total, h.acked_total, h.dead_total, h.processing
        FROM queen.metrics_history h
        WHERE h.queue = r.queue
        ORDER BY h.bucket DESC LIMIT 1) prev ON true
    ON CONFLICT (queue, bucket) DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END;
$$;
