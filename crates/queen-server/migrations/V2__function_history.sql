-- The record of the stored function files (sql/functions/*.sql) as applied:
-- one row per file with the SHA-256 of its text. The runner after the
-- versioned migrations (store/migrate/functions.rs) skips a file whose
-- checksum matches and re-applies one that changed.
CREATE TABLE queen.function_history (
    name       text PRIMARY KEY,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- Every function is dropped once, so that the files alone define the set: a
-- database from the development history before the baseline carries the
-- compatibility overloads it created (three forms of pop_queue). A fresh
-- database has no function yet, and this does nothing there.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_proc p WHERE p.pronamespace = 'queen'::regnamespace
    LOOP
        EXECUTE format('DROP FUNCTION %s', f);
    END LOOP;
END;
$$;
