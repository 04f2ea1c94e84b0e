-- queen.cursor_lock_key(partition_id, group): the second key of the
-- transaction-scoped advisory lock (class 21023) a transaction holds while it
-- makes the cursor row of group p_group on partition p_partition_id. Two
-- transactions inserting one cursor row would otherwise make the second wait
-- on the first's commit (INSERT ... ON CONFLICT); with the lock the consume
-- statement skips such a partition at once, and the wildcard claims of
-- queen.claim_partition do too. Two partitions sharing a key (a hash
-- collision) only make one of them be skipped for that moment.
-- Called by: queen.claim_partition, sql/statements/consume_flight.sql.

CREATE OR REPLACE FUNCTION queen.cursor_lock_key(p_partition_id uuid, p_group text)
RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT hashtext(p_partition_id::text || '/' || p_group)
$$;
