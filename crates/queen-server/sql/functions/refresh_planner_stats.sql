-- queen.refresh_planner_stats(): keeps the planner's statistics of the hot
-- tables close to their real size. Autovacuum analyzes a table at most once
-- per autovacuum_naptime, long after a queue that just grew by thousands of
-- partitions (or cursors, keys, segments) needs plans for its real size.
-- Analyzes partitions, log_consumers, message_keys and segments when the
-- rows changed since their last analyze exceed a fifth of the table (and at
-- least 1 000), one replica at a time (a transaction-scoped advisory lock,
-- skipped when taken). Returns how many tables it analyzed.
-- Called by: `Store::refresh_planner_stats`, from the planner statistics job
-- on every replica every few seconds.

CREATE OR REPLACE FUNCTION queen.refresh_planner_stats() RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    t   record;
    n   integer := 0;
BEGIN
    -- "queenanl"
    IF NOT pg_try_advisory_xact_lock(8175552184878984812) THEN
        RETURN 0;
    END IF;
    FOR t IN
        SELECT s.relid::regclass AS rel
        FROM pg_stat_user_tables s
        JOIN pg_class c ON c.oid = s.relid
        WHERE s.schemaname = 'queen'
          AND s.relname IN ('partitions', 'log_consumers', 'message_keys', 'segments')
          AND s.n_mod_since_analyze > greatest(1000, 0.2 * greatest(c.reltuples, 0))
    LOOP
        EXECUTE format('ANALYZE %s', t.rel);
        n := n + 1;
    END LOOP;
    RETURN n;
END;
$$;
