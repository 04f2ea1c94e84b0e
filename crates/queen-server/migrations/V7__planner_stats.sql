-- Keeps the planner's statistics of the hot tables close to their real size.
--
-- Autovacuum analyzes a table at most once per autovacuum_naptime (a minute by
-- default), long after a queue that just grew by thousands of partitions (or
-- cursors, keys, segments) needs plans for its real size: until then the
-- planner costs a 10 000-row `partitions` table as a few dozen rows and picks
-- scans of every row. Measured (docs/benchmarks.md): the wildcard pop walk at
-- 10 000 partitions took 15-30 ms per pop until the table was analyzed.
--
-- Every replica calls this every few seconds; it analyzes a table only when
-- the rows changed since its last analyze exceed a fifth of its size (and at
-- least 1 000), and one replica at a time (a transaction-scoped advisory lock,
-- skipped when taken). Returns how many tables it analyzed.
CREATE FUNCTION queen.refresh_planner_stats() RETURNS integer
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
