-- Issue 36: each replica's health per stats interval, beside its throughput
-- row in queen.replica_stats: how late its runtime ran timers (the event
-- loop lag), its CPU use, resident memory, connection pool and disk spool.
-- Written by every replica (jobs/health.rs), read bucketed by
-- GET /api/v1/analytics/worker-metrics (`timeSeries`), deleted with
-- replica_stats after METRICS_RETENTION_DAYS.
CREATE TABLE queen.replica_health (
    server_id       text NOT NULL,
    bucket          timestamptz NOT NULL,
    -- mean and worst lateness of a 100 ms timer over the interval, ms
    loop_lag_avg_ms double precision NOT NULL,
    loop_lag_max_ms double precision NOT NULL,
    -- CPU over the interval, percent of one core
    cpu_percent     double precision NOT NULL,
    rss_bytes       bigint NOT NULL,
    pool_size       integer NOT NULL,
    pool_open       integer NOT NULL,
    pool_idle       integer NOT NULL,
    pool_waiting    integer NOT NULL,
    spool_pending   bigint NOT NULL,
    PRIMARY KEY (server_id, bucket)
);

CREATE INDEX replica_health_bucket ON queen.replica_health (bucket);
