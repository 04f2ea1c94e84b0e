-- The ephemeral collector (jobs/ephemeral.rs, every EPHEMERAL_SWEEP_INTERVAL_MS
-- on every replica; store/ephemeral.rs Store::ephemeral_collect). For each
-- queue whose row no push, pop or reset holds (SKIP LOCKED; the next sweep
-- gets the others), under that row's lock:
--   - an implicit queue (no declaration) without messages, untouched for
--     p_idle_seconds, is forgotten with its partitions, groups, cursors and
--     leases (client-surface-2.6.md §10.5: "implicit queues collected after
--     300 s empty and untouched"); a later push or pop creates it anew;
--   - any other queue gets its bytes set to what it holds, so the bytes that
--     pops and acks freed count again for the broker-wide bound of
--     queen.ephemeral_push.
-- Candidates are found by one set query without locks (the sum of the
-- messages' bytes per queue, the idle implicit queues), and only those rows
-- are locked and judged again, so the sweep holds few locks, for
-- milliseconds. Answers how many queues were collected and how many counts
-- refreshed.
CREATE OR REPLACE FUNCTION queen.ephemeral_collect(p_idle_seconds integer)
RETURNS TABLE (collected bigint, refreshed bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_cutoff timestamptz := now() - make_interval(secs => p_idle_seconds);
    v_queue text;
    v_touched timestamptz;
    v_bytes bigint;
    v_held bigint;
    v_any boolean;
BEGIN
    collected := 0; refreshed := 0;
    FOR v_queue IN
        SELECT q.queue
        FROM queen.ephemeral_queues q
        LEFT JOIN (SELECT m.queue, sum(m.bytes) AS held
                   FROM queen.ephemeral_messages m GROUP BY m.queue) h ON h.queue = q.queue
        WHERE coalesce(h.held, 0) <> q.bytes
           OR (h.queue IS NULL AND q.touched_at < v_cutoff
               AND NOT EXISTS (SELECT 1 FROM queen.ephemeral_declarations d WHERE d.queue = q.queue))
        ORDER BY q.queue
    LOOP
        SELECT q.touched_at, q.bytes INTO v_touched, v_bytes
        FROM queen.ephemeral_queues q WHERE q.queue = v_queue
        FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;
        SELECT count(*) > 0, coalesce(sum(m.bytes), 0) INTO v_any, v_held
        FROM queen.ephemeral_messages m WHERE m.queue = v_queue;
        IF NOT v_any AND v_touched < v_cutoff
           AND NOT EXISTS (SELECT 1 FROM queen.ephemeral_declarations d WHERE d.queue = v_queue) THEN
            DELETE FROM queen.ephemeral_leases l WHERE l.queue = v_queue;
            DELETE FROM queen.ephemeral_cursors c WHERE c.queue = v_queue;
            DELETE FROM queen.ephemeral_groups g WHERE g.queue = v_queue;
            DELETE FROM queen.ephemeral_partitions p WHERE p.queue = v_queue;
            DELETE FROM queen.ephemeral_queues q WHERE q.queue = v_queue;
            collected := collected + 1;
        ELSIF v_held <> v_bytes THEN
            UPDATE queen.ephemeral_queues q SET bytes = v_held WHERE q.queue = v_queue;
            refreshed := refreshed + 1;
        END IF;
    END LOOP;
    RETURN NEXT;
END
$$;
