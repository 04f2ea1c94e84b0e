-- Baseline: every table, index and view of schema `queen`.
-- Queen's storage model: every partition is an append-only log; see
-- docs/architecture.md for the invariants these tables keep.
--
-- Versioned migrations hold DDL and signature changes only. The stored
-- functions are not here: each lives in its own file under sql/functions/,
-- applied after these migrations (store/migrate/functions.rs). A database
-- migrated by the development history before this baseline (V1 schema ..
-- V10 ack_match_by_rank) already has exactly these objects; its history is
-- rewritten to this file by store/migrate.rs, and it is never run there.

CREATE SCHEMA IF NOT EXISTS queen;

-- One row per queue: its name, namespace/task and the full option set of /configure.
CREATE TABLE queen.queues (
    id                          uuid PRIMARY KEY,
    name                        text NOT NULL UNIQUE,
    namespace                   text NOT NULL DEFAULT '',
    task                        text NOT NULL DEFAULT '',
    lease_time                  integer NOT NULL DEFAULT 300,
    retry_limit                 integer NOT NULL DEFAULT 3,
    retry_delay                 integer NOT NULL DEFAULT 1000,
    max_size                    integer NOT NULL DEFAULT 0,
    ttl                         integer NOT NULL DEFAULT 3600,
    priority                    integer NOT NULL DEFAULT 0,
    delayed_processing          integer NOT NULL DEFAULT 0,
    window_buffer               integer NOT NULL DEFAULT 0,
    dead_letter_queue           boolean NOT NULL DEFAULT false,
    dlq_after_max_retries       boolean NOT NULL DEFAULT false,
    retention_enabled           boolean NOT NULL DEFAULT false,
    retention_seconds           integer NOT NULL DEFAULT 0,
    completed_retention_seconds integer NOT NULL DEFAULT 0,
    encryption_enabled          boolean NOT NULL DEFAULT false,
    max_wait_time_seconds       integer NOT NULL DEFAULT 0,
    -- bumped by every configure; brokers compare it to their cached copy
    config_version              bigint NOT NULL DEFAULT 1,
    created_at                  timestamptz NOT NULL DEFAULT now(),
    updated_at                  timestamptz NOT NULL DEFAULT now()
);

-- One row per partition (a FIFO lane). Updated on every push: kept HOT by
-- indexing none of the columns a push changes.
CREATE TABLE queen.partitions (
    id              uuid PRIMARY KEY,
    queue_id        uuid NOT NULL REFERENCES queen.queues (id) ON DELETE CASCADE,
    name            text NOT NULL,
    -- offset the next pushed message receives; allocated under this row's lock
    next_offset     bigint NOT NULL DEFAULT 1,
    -- oldest offset still stored (retention moves it forward)
    low_offset      bigint NOT NULL DEFAULT 1,
    -- createdAt of the newest message; never moves backwards
    last_created_at timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (queue_id, name)
) WITH (fillfactor = 70, vacuum_truncate = false,
        autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000);

-- Wildcard pops walk a queue's partitions in id order from a random point.
CREATE INDEX partitions_queue_id_id ON queen.partitions (queue_id, id);

-- One row per push per partition: the messages of that push, packed as parallel
-- arrays over the inclusive offset range [first_offset, last_offset].
CREATE TABLE queen.segments (
    partition_id    uuid NOT NULL,
    last_offset     bigint NOT NULL,
    first_offset    bigint NOT NULL,
    created_at      timestamptz NOT NULL,
    message_ids     uuid[] NOT NULL,
    transaction_ids text[] NOT NULL,
    trace_ids       uuid[] NOT NULL,
    payloads        text[] NOT NULL,
    -- NULL when no message of the segment carries a producer subject
    producer_subs   text[],
    -- offsets removed one by one through the admin API
    deleted_offsets bigint[],
    PRIMARY KEY (partition_id, last_offset)
);

-- Payload arrays are JSON text the broker already validated; compressing them
-- again costs CPU on every push for little gain on short-lived queue data.
ALTER TABLE queen.segments ALTER COLUMN payloads SET STORAGE EXTERNAL;

-- Dashboard traffic buckets: messages written per minute per queue.
CREATE INDEX segments_created_at ON queen.segments (created_at);

-- The dedup index: (partition, transactionId) -> offset. Exact, and also how an
-- ack that names (partitionId, transactionId) finds its offset.
CREATE TABLE queen.message_keys (
    partition_id   uuid NOT NULL,
    transaction_id text NOT NULL,
    msg_offset     bigint NOT NULL,
    message_id     uuid NOT NULL,
    PRIMARY KEY (partition_id, transaction_id)
);

-- One row per (partition, consumer group): the cursor and at most one lease.
CREATE TABLE queen.log_consumers (
    partition_id     uuid NOT NULL,
    consumer_group   text NOT NULL,
    -- every offset <= committed_offset is done for this group
    committed_offset bigint NOT NULL,
    -- the last lease handed out; kept after release so a repeated ack stays idempotent
    lease_id         uuid,
    -- last offset delivered under lease_id
    lease_end_offset bigint,
    -- NULL when no lease is active
    lease_expires_at timestamptz,
    lease_holder     text,
    -- failed acks counted against the queue's retryLimit for the current batch
    retry_count      integer NOT NULL DEFAULT 0,
    total_consumed   bigint NOT NULL DEFAULT 0,
    batches_consumed bigint NOT NULL DEFAULT 0,
    last_consumed_at timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (partition_id, consumer_group)
) WITH (fillfactor = 70, vacuum_truncate = false,
        autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000);

CREATE INDEX log_consumers_lease_id ON queen.log_consumers (lease_id);

-- Stored subscription start of a consumer group on a queue ('' = whole queue).
CREATE TABLE queen.consumer_subscriptions (
    consumer_group         text NOT NULL,
    queue_name             text NOT NULL,
    partition_name         text NOT NULL DEFAULT '',
    subscription_mode      text NOT NULL,
    subscription_timestamp timestamptz NOT NULL,
    created_at             timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_group, queue_name, partition_name)
);

-- Dead letters, per group. The payload is copied so the entry outlives retention.
CREATE TABLE queen.dead_letters (
    id                  bigserial PRIMARY KEY,
    partition_id        uuid NOT NULL,
    consumer_group      text NOT NULL,
    msg_offset          bigint NOT NULL,
    message_id          uuid NOT NULL,
    transaction_id      text NOT NULL,
    trace_id            uuid,
    payload             text NOT NULL,
    producer_sub        text,
    error_message       text,
    retry_count         integer NOT NULL DEFAULT 0,
    original_created_at timestamptz NOT NULL,
    failed_at           timestamptz NOT NULL DEFAULT now(),
    UNIQUE (partition_id, consumer_group, msg_offset)
);

CREATE INDEX dead_letters_failed_at ON queen.dead_letters (failed_at DESC);

-- Message traces written by consumers.
CREATE TABLE queen.message_traces (
    id             uuid PRIMARY KEY,
    partition_id   uuid NOT NULL,
    transaction_id text NOT NULL,
    consumer_group text NOT NULL,
    event_type     text NOT NULL,
    data           jsonb NOT NULL,
    trace_names    text[] NOT NULL DEFAULT '{}',
    worker_id      text,
    created_at     timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX message_traces_message ON queen.message_traces (partition_id, transaction_id);

-- Cluster-wide flags (maintenance modes), read by every replica.
CREATE TABLE queen.system_state (
    key        text PRIMARY KEY,
    value      jsonb NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- Per-partition counts for the dashboards. With several consumer groups a
-- message counts as completed once the furthest cursor passed it.
CREATE VIEW queen.partition_stats AS
SELECT p.id AS partition_id, p.queue_id, p.name, p.created_at,
       (p.next_offset - p.low_offset) AS total,
       least(p.next_offset - p.low_offset,
             greatest(coalesce(c.max_committed, p.low_offset - 1) - (p.low_offset - 1), 0)) AS completed,
       coalesce(c.processing, 0) AS processing,
       coalesce(d.dead, 0) AS dead_letter,
       (SELECT s.created_at FROM queen.segments s WHERE s.partition_id = p.id
        ORDER BY s.last_offset LIMIT 1) AS oldest_message,
       p.last_created_at AS newest_message,
       c.last_consumed_at
FROM queen.partitions p
LEFT JOIN LATERAL (
    SELECT max(lc.committed_offset) AS max_committed,
           sum(CASE WHEN lc.lease_expires_at > now()
                    THEN greatest(lc.lease_end_offset - lc.committed_offset, 0) ELSE 0 END) AS processing,
           max(lc.last_consumed_at) AS last_consumed_at
    FROM queen.log_consumers lc WHERE lc.partition_id = p.id) c ON true
LEFT JOIN LATERAL (
    SELECT count(*) AS dead FROM queen.dead_letters dl WHERE dl.partition_id = p.id) d ON true;

-- One row per completed cycle of a leader-gated job. The primary key makes a
-- cycle run at most once even if two replicas take the lock one after the other.
CREATE TABLE queen.job_runs (
    job         text NOT NULL,
    cycle       bigint NOT NULL,
    server_id   text NOT NULL,
    started_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at timestamptz,
    affected    bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (job, cycle)
);

-- Throughput of each replica, one row per replica per stats interval (not gated).
CREATE TABLE queen.replica_stats (
    server_id text NOT NULL,
    bucket    timestamptz NOT NULL,
    pushed    bigint NOT NULL,
    popped    bigint NOT NULL,
    acked     bigint NOT NULL,
    PRIMARY KEY (server_id, bucket)
);
