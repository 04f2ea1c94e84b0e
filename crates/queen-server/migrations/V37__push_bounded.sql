-- maxSize decided after the append (issue 38): queen.push_batch no longer
-- takes which items are bounded; it appends every item but the positions it
-- is told to skip and answers no bound. Bounded pushes call
-- queen.push_bounded (sql/functions/push_bounded.sql), which appends through
-- queen.push_batch. The old signature is dropped here; the function files
-- define the new ones.
DROP FUNCTION IF EXISTS queen.push_batch(uuid[], text[], uuid[], text[], uuid[], text[], text[], boolean,
                                         timestamptz[], boolean[]);
