-- Issue 35: `queen-server import` from a reference 0.15 database.
--
-- queen.push_batch takes the createdAt of each item (NULL = now): the
-- importer carries the source's message times across, so a message keeps
-- its place in time-based positioning (subscriptions from a timestamp, seek).
DROP FUNCTION IF EXISTS queen.push_batch(uuid[], text[], uuid[], text[], uuid[], text[], text[], boolean);

-- How far each source partition has been imported: one row per partition of
-- the source, written in the same transaction as that partition's messages,
-- cursors, dead letters and traces, so a partition is either imported up to
-- (last_created_at, last_message_id), the source's order key, or not at all.
-- A later run (the catch-up pass) reads from there. Deleting the partition
-- here deletes its row, and the next run imports it again from the start.
CREATE TABLE queen.import_progress (
    source_partition_id uuid PRIMARY KEY,
    partition_id        uuid NOT NULL REFERENCES queen.partitions (id) ON DELETE CASCADE,
    -- the order key of the last message imported; NULL while none was
    last_created_at     timestamptz,
    last_message_id     uuid,
    -- messages appended by the importer into this partition, all runs together
    messages            bigint NOT NULL DEFAULT 0,
    -- when a run last appended messages to it
    imported_at         timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX import_progress_partition ON queen.import_progress (partition_id);
