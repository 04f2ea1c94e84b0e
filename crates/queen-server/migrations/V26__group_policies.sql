-- Last-value consumer groups (conflation, issue 32).
--
-- A consumer group's delivery policy on a queue, stored by the first pop of
-- the group on that queue (queen.group_policy) and never changed while the
-- group exists: conflation = true delivers only the newest visible message
-- of a partition, and its ack commits everything behind it. Deleting the
-- group's cursors deletes its policy; deleting the queue deletes all of them.
CREATE TABLE queen.group_policies (
    consumer_group text NOT NULL,
    queue_name     text NOT NULL,
    conflation     boolean NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_group, queue_name)
);

-- claim_partition and pop_queue take p_conflate; ack_batch reports the
-- offsets each cursor move skipped
DROP FUNCTION IF EXISTS queen.pop_queue(uuid, text, text, integer, integer, uuid, integer, boolean,
                                        integer, integer, text, text, text, text[], boolean, boolean);
DROP FUNCTION IF EXISTS queen.claim_partition(uuid, text, text, text, integer, uuid, boolean, integer,
                                              boolean, integer, integer, text, text, text, text);
DROP FUNCTION IF EXISTS queen.ack_batch(text, uuid[], text[], uuid[], text[], text[], boolean);
