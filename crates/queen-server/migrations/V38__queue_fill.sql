-- maxSize without a count over every partition on each push (issue 38).
-- queen.queue_fill has, per queue with a maxSize, one row per slot of
-- queen.push_bounded (0-3, each written only by the call holding that slot)
-- and one (4) for appends holding no slot (spool replays, stream sinks,
-- dead-letter retries). `pushed` counts the messages ever appended under it
-- (queen.push_batch adds to it). `base_*` is an exact count of what the
-- queue held (queen.queue_backlog) taken by that slot's holder together with
-- the sum of the queue's counters, at one snapshot and under one
-- configuration of the queue (config_version): that count plus what was
-- appended since bounds what the queue holds now.
CREATE TABLE queen.queue_fill (
    queue_id     uuid     NOT NULL REFERENCES queen.queues (id) ON DELETE CASCADE,
    slot         smallint NOT NULL,
    pushed       bigint   NOT NULL DEFAULT 0,
    base_version bigint,
    base_backlog bigint,
    base_pushed  bigint,
    PRIMARY KEY (queue_id, slot)
) WITH (fillfactor = 70);

-- queen.push_batch takes the slot its appends are counted under
-- (sql/functions/push_batch.sql defines the new signature)
DROP FUNCTION IF EXISTS queen.push_batch(uuid[], text[], uuid[], text[], uuid[], text[], text[], boolean,
                                         timestamptz[], integer[]);
