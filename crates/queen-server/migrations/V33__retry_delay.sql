-- retryDelay with a backoff (issue 38, item 3).
--
-- A queue's retry schedule: retry_delay (ms, already stored) grows by
-- retry_backoff per failed delivery attempt, up to retry_delay_max (ms,
-- 0: no cap below 7 days).
ALTER TABLE queen.queues
    ADD COLUMN retry_backoff double precision NOT NULL DEFAULT 1,
    ADD COLUMN retry_delay_max integer NOT NULL DEFAULT 0;

-- Per (partition, consumer group): the deliveries of the partition's head
-- that ended without it being acked (a failed or retry ack, an expired
-- lease), and the highest offset those deliveries held. A message at or
-- below attempt_end is on delivery attempt `attempts + 1`; counts below
-- the cursor are stale and restart at the next failure. Neither column is
-- indexed, so cursor updates stay heap-only.
ALTER TABLE queen.log_consumers
    ADD COLUMN attempts integer NOT NULL DEFAULT 0,
    ADD COLUMN attempt_end bigint NOT NULL DEFAULT 0;

-- claim_partition and pop_queue take the queue's retry schedule and return
-- each message's delivery attempt and, for a partition an expired lease
-- put on hold, the time to the hold's end; ack_batch returns that time too
DROP FUNCTION IF EXISTS queen.pop_queue(uuid, text, text, integer, integer, uuid, integer, boolean,
                              integer, integer, text, text, text, text[], boolean, boolean,
                              boolean, integer, boolean);
DROP FUNCTION IF EXISTS queen.claim_partition(uuid, text, text, text, integer, uuid, boolean, integer,
                                    boolean, integer, integer, text, text, text, text,
                                    boolean, integer, boolean);
DROP FUNCTION IF EXISTS queen.ack_batch(text, uuid[], text[], uuid[], text[], text[], boolean);
