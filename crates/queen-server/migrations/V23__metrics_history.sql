-- Metrics history for the dashboard's analytics routes (/api/v1/analytics/*).
--
-- queen.metrics_history: one row per queue per stats cycle, written by the
-- leader-gated part of the stats job (queen.record_queue_metrics). The
-- cumulative columns let the next cycle compute its deltas; the delta columns
-- are what the time-series routes add up per bucket. Retention removes rows
-- older than METRICS_RETENTION_DAYS, like queen.replica_stats.
CREATE TABLE queen.metrics_history (
    queue         text NOT NULL,
    bucket        timestamptz NOT NULL,
    -- cumulative: sum of (next_offset - 1) over the queue's partitions
    pushed_total  bigint NOT NULL,
    -- cumulative: sum of total_consumed over the queue's cursors (all groups)
    acked_total   bigint NOT NULL,
    -- cumulative: dead-letter rows of the queue
    dead_total    bigint NOT NULL,
    -- deltas since the queue's previous row (0 when negative: a deleted partition)
    pushed        bigint NOT NULL,
    popped        bigint NOT NULL,
    acked         bigint NOT NULL,
    dead_lettered bigint NOT NULL,
    -- gauges at the bucket
    pending       bigint NOT NULL,
    processing    bigint NOT NULL,
    offset_lag    bigint NOT NULL,
    lag_seconds   double precision NOT NULL,
    PRIMARY KEY (queue, bucket)
);

CREATE INDEX metrics_history_bucket ON queen.metrics_history (bucket);

-- The queues on which this replica had a long-poll pop parked when it wrote
-- its throughput row (GET /api/v1/analytics/queue-parked-replicas).
ALTER TABLE queen.replica_stats ADD COLUMN parked_queues text[] NOT NULL DEFAULT '{}';
