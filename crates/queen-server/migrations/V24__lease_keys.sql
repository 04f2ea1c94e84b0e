-- Leases found by a key that never changes instead of an index on lease_id
-- (issue 19, docs/benchmarks.md "Consume path, part 5").
--
-- Every pop and ack rewrites its cursor row's lease columns. While lease_id
-- was indexed, each of those updates wrote a new index entry in both indexes
-- (no heap-only update); without an index on any column a pop or ack
-- changes, they stay heap-only.
--
-- cursor_key: a number per cursor row, set when the row is made and never
-- updated. A lease of one partition has that number in its first 8 bytes
-- (queen.lease_mint), so queen.extend_lease finds its row by the id alone.
-- lease_group: a lease shared by several partitions (a pop with
-- maxPartitions > 1) is stored here too, on each of its rows; only such pops
-- write it.
ALTER TABLE queen.log_consumers
    ADD COLUMN cursor_key bigint GENERATED ALWAYS AS IDENTITY,
    ADD COLUMN lease_group uuid;

-- leases handed out before this migration keep being found by their id
UPDATE queen.log_consumers SET lease_group = lease_id WHERE lease_id IS NOT NULL;

CREATE UNIQUE INDEX log_consumers_cursor_key ON queen.log_consumers (cursor_key);
CREATE INDEX log_consumers_lease_group ON queen.log_consumers (lease_group)
    WHERE lease_group IS NOT NULL;
DROP INDEX queen.log_consumers_lease_id;

-- both now return the lease id the messages are held under, and a claim is
-- told whether its lease is shared by several partitions
DROP FUNCTION IF EXISTS queen.pop_queue(uuid, text, text, integer, integer, uuid, integer, boolean,
                                        integer, integer, text, text, text, text[], boolean, boolean);
DROP FUNCTION IF EXISTS queen.claim_partition(uuid, text, text, text, integer, uuid, integer, boolean,
                                              integer, integer, text, text, text, text);
