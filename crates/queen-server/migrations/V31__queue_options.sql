-- Queue options that do what they say (issue 38).
--
-- ttl and retryDelay were stored and echoed but read by nothing; their
-- defaults (3600 s, 1000 ms) become "none" (0), and stored values equal to
-- the old defaults are reset to 0, so that enforcing them changes nothing
-- for a queue nobody configured. An option takes effect when someone sets it.
ALTER TABLE queen.queues
    ALTER COLUMN ttl SET DEFAULT 0,
    ALTER COLUMN retry_delay SET DEFAULT 0;
UPDATE queen.queues SET ttl = 0 WHERE ttl = 3600;
UPDATE queen.queues SET retry_delay = 0 WHERE retry_delay = 1000;

-- messages a consumer group's pops passed over because they were older than
-- the queue's ttl and were not dead-lettered (those are in dead_letters)
ALTER TABLE queen.log_consumers ADD COLUMN total_expired bigint NOT NULL DEFAULT 0;

-- the status counts: expired messages count as expired, not as completed
DROP VIEW queen.partition_stats;
CREATE VIEW queen.partition_stats AS
SELECT p.id AS partition_id, p.queue_id, p.name, p.created_at,
       (p.next_offset - p.low_offset) AS total,
       least(p.next_offset - p.low_offset,
             greatest(coalesce(c.max_committed, p.low_offset - 1) - (p.low_offset - 1), 0)) AS completed,
       coalesce(c.processing, 0) AS processing,
       coalesce(d.dead, 0) AS dead_letter,
       coalesce(c.expired, 0) AS expired,
       (SELECT s.created_at FROM queen.segments s WHERE s.partition_id = p.id
        ORDER BY s.last_offset LIMIT 1) AS oldest_message,
       p.last_created_at AS newest_message,
       c.last_consumed_at
FROM queen.partitions p
LEFT JOIN LATERAL (
    SELECT max(lc.committed_offset) AS max_committed,
           sum(CASE WHEN lc.lease_expires_at > now()
                    THEN greatest(lc.lease_end_offset - lc.committed_offset, 0) ELSE 0 END) AS processing,
           max(lc.last_consumed_at) AS last_consumed_at,
           max(lc.total_expired) AS expired
    FROM queen.log_consumers lc WHERE lc.partition_id = p.id) c ON true
LEFT JOIN LATERAL (
    SELECT count(*) AS dead FROM queen.dead_letters dl WHERE dl.partition_id = p.id) d ON true;

-- claim_partition and pop_queue take the queue's ttl and whether expired
-- messages go to the dead-letter queue
DROP FUNCTION IF EXISTS queen.pop_queue(uuid, text, text, integer, integer, uuid, integer, boolean,
                                        integer, integer, text, text, text, text[], boolean, boolean,
                                        boolean);
DROP FUNCTION IF EXISTS queen.claim_partition(uuid, text, text, text, integer, uuid, boolean, integer,
                                              boolean, integer, integer, text, text, text, text,
                                              boolean);
