-- Issue 36: the reference's Prometheus series on /metrics/prometheus.
--
-- Every replica counts, in memory, what it did per queue and per minute
-- (its own clock's minute) and adds it here every STATS_INTERVAL_MS
-- (jobs/stats.rs); a scrape reads the last complete minute summed over the
-- replicas. Rows older than a quarter of an hour are deleted by the same
-- flush: the figures are per minute, the history is metrics_history's.
CREATE TABLE queen.queue_activity (
    minute        timestamptz NOT NULL,
    queue         text NOT NULL,
    server_id     text NOT NULL,
    -- requests that pushed to the queue, and the messages they wrote (no duplicates)
    push_requests bigint NOT NULL,
    push_messages bigint NOT NULL,
    -- pops of the queue: all of them, the messages handed out, the ones answered empty
    pop_requests  bigint NOT NULL,
    pop_messages  bigint NOT NULL,
    pop_empty     bigint NOT NULL,
    -- sum over the messages handed out of (pop time - push time), in ms
    pop_lag_ms    bigint NOT NULL,
    -- requests that acked on the queue, and the acks applied by result
    ack_requests  bigint NOT NULL,
    ack_success   bigint NOT NULL,
    ack_failed    bigint NOT NULL,
    ack_dlq       bigint NOT NULL,
    -- committed /transaction requests that pushed to or acked on the queue
    transactions  bigint NOT NULL,
    PRIMARY KEY (minute, queue, server_id)
);

-- Cluster totals: each replica adds its counts since its last flush, so a
-- total only grows, whichever replica restarts (what a replica counted and
-- had not flushed when it died is never counted).
CREATE TABLE queen.cluster_counters (
    name  text PRIMARY KEY,
    value bigint NOT NULL
);

-- One row per running broker process (a fresh id at each start), written at
-- every flush: queen_servers counts the fresh ones, and `parked` holds the
-- long-poll pops parked per queue on that process ({"queue": n}). A stopping
-- broker deletes its row; a crashed one's row goes stale, and is deleted an
-- hour later by any flush.
CREATE TABLE queen.replica_presence (
    instance  uuid PRIMARY KEY,
    server_id text NOT NULL,
    seen_at   timestamptz NOT NULL,
    parked    jsonb NOT NULL
);
