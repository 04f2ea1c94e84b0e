-- The reference Queen 0.15 layout, written from the facts of
-- shared/spec/reference-schema-0.15.md (section 1), not copied from the
-- reference: the tables an importer reads, with their columns, defaults,
-- keys and indexes, plus the derived and telemetry tables it must not need.
-- The schema names `queen` and `queen_streams` are replaced by the tests
-- when the source lives beside this broker's schema in one database.

CREATE SCHEMA IF NOT EXISTS queen;
CREATE SCHEMA IF NOT EXISTS queen_streams;

-- 1.2
CREATE TABLE queen.queues (
    id                          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name                        varchar(255) NOT NULL UNIQUE,
    namespace                   varchar(255),
    task                        varchar(255),
    priority                    integer DEFAULT 0,
    lease_time                  integer DEFAULT 300,
    retry_limit                 integer DEFAULT 3,
    retry_delay                 integer DEFAULT 1000,
    ttl                         integer DEFAULT 3600,
    dead_letter_queue           boolean DEFAULT false,
    dlq_after_max_retries       boolean DEFAULT false,
    delayed_processing          integer DEFAULT 0,
    window_buffer               integer DEFAULT 0,
    retention_seconds           integer DEFAULT 0,
    completed_retention_seconds integer DEFAULT 0,
    retention_enabled           boolean DEFAULT false,
    encryption_enabled          boolean DEFAULT false,
    max_wait_time_seconds       integer DEFAULT 0,
    max_queue_size              integer DEFAULT 0,
    created_at                  timestamptz DEFAULT now()
);

-- 1.3
CREATE TABLE queen.partitions (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    queue_id      uuid NOT NULL REFERENCES queen.queues (id) ON DELETE CASCADE,
    name          varchar(255) NOT NULL DEFAULT 'Default',
    created_at    timestamptz DEFAULT now(),
    last_activity timestamptz DEFAULT now(),
    UNIQUE (queue_id, name)
);

-- 1.4
CREATE TABLE queen.messages (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    transaction_id varchar(255) NOT NULL,
    trace_id       uuid DEFAULT gen_random_uuid(),
    partition_id   uuid NOT NULL REFERENCES queen.partitions (id) ON DELETE CASCADE,
    payload        jsonb NOT NULL,
    created_at     timestamptz DEFAULT now(),
    is_encrypted   boolean DEFAULT false,
    producer_sub   text
);
CREATE UNIQUE INDEX idx_messages_partition_transaction ON queen.messages (partition_id, transaction_id);
CREATE INDEX idx_messages_partition_created ON queen.messages (partition_id, created_at, id);

-- 1.5
CREATE TABLE queen.partition_consumers (
    id                       uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    partition_id             uuid NOT NULL REFERENCES queen.partitions (id) ON DELETE CASCADE,
    consumer_group           varchar(255) NOT NULL DEFAULT '__QUEUE_MODE__',
    last_consumed_id         uuid DEFAULT '00000000-0000-0000-0000-000000000000',
    last_consumed_created_at timestamptz,
    last_consumed_at         timestamptz,
    total_messages_consumed  bigint DEFAULT 0,
    total_batches_consumed   bigint DEFAULT 0,
    lease_expires_at         timestamptz,
    lease_acquired_at        timestamptz,
    message_batch            jsonb,
    batch_size               integer DEFAULT 0,
    acked_count              integer DEFAULT 0,
    worker_id                varchar(255),
    pending_estimate         bigint,
    last_stats_update        timestamptz,
    batch_retry_count        integer DEFAULT 0,
    created_at               timestamptz DEFAULT now(),
    UNIQUE (partition_id, consumer_group),
    CHECK ((last_consumed_id = '00000000-0000-0000-0000-000000000000' AND last_consumed_created_at IS NULL)
        OR (last_consumed_id <> '00000000-0000-0000-0000-000000000000' AND last_consumed_created_at IS NOT NULL))
) WITH (fillfactor = 50);
CREATE INDEX idx_partition_consumers_worker ON queen.partition_consumers (worker_id) WHERE worker_id IS NOT NULL;

-- 1.6
CREATE TABLE queen.consumer_groups_metadata (
    id                     uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    consumer_group         text NOT NULL,
    queue_name             text NOT NULL DEFAULT '',
    partition_name         text NOT NULL DEFAULT '',
    namespace              text NOT NULL DEFAULT '',
    task                   text NOT NULL DEFAULT '',
    subscription_mode      text,
    subscription_timestamp timestamptz NOT NULL,
    created_at             timestamptz DEFAULT now(),
    UNIQUE (consumer_group, queue_name, partition_name, namespace, task)
);

-- 1.7
CREATE TABLE queen.dead_letter_queue (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    message_id          uuid REFERENCES queen.messages (id) ON DELETE CASCADE,
    partition_id        uuid REFERENCES queen.partitions (id) ON DELETE CASCADE,
    consumer_group      varchar(255),
    error_message       text,
    retry_count         integer DEFAULT 0,
    original_created_at timestamptz,
    failed_at           timestamptz DEFAULT now()
);
CREATE INDEX idx_dlq_partition ON queen.dead_letter_queue (partition_id);
CREATE INDEX idx_dlq_consumer_group ON queen.dead_letter_queue (consumer_group);
CREATE INDEX idx_dlq_failed_at ON queen.dead_letter_queue (failed_at DESC);
CREATE INDEX idx_dlq_message_group ON queen.dead_letter_queue (message_id, consumer_group);

-- 1.8
CREATE TABLE queen.message_traces (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    message_id     uuid REFERENCES queen.messages (id) ON DELETE CASCADE,
    partition_id   uuid REFERENCES queen.partitions (id) ON DELETE CASCADE,
    transaction_id varchar(255),
    consumer_group varchar(255),
    event_type     varchar(100) DEFAULT 'info',
    data           jsonb,
    created_at     timestamptz DEFAULT now(),
    worker_id      varchar(255)
);
CREATE INDEX idx_message_traces_partition_id ON queen.message_traces (partition_id);

CREATE TABLE queen.message_trace_names (
    trace_id   uuid REFERENCES queen.message_traces (id) ON DELETE CASCADE,
    trace_name text,
    PRIMARY KEY (trace_id, trace_name)
);

CREATE TABLE queen.system_state (
    key        text PRIMARY KEY,
    value      jsonb,
    updated_at timestamptz DEFAULT now()
);

CREATE TABLE queen_streams.queries (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name         text NOT NULL UNIQUE,
    source_queue text,
    sink_queue   text,
    config_hash  text,
    created_at   timestamptz DEFAULT now(),
    updated_at   timestamptz DEFAULT now()
);
CREATE TABLE queen_streams.state (
    query_id     uuid REFERENCES queen_streams.queries (id) ON DELETE CASCADE,
    partition_id uuid,
    key          text,
    value        jsonb,
    updated_at   timestamptz DEFAULT now(),
    PRIMARY KEY (query_id, partition_id, key)
);

-- 1.9: derived and telemetry (never read by an importer)
CREATE TABLE queen.partition_lookup (
    id                      uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    queue_name              varchar(255) NOT NULL REFERENCES queen.queues (name) ON DELETE CASCADE,
    partition_id            uuid NOT NULL REFERENCES queen.partitions (id) ON DELETE CASCADE,
    last_message_id         uuid,
    last_message_created_at timestamptz,
    updated_at              timestamptz DEFAULT now(),
    UNIQUE (queue_name, partition_id)
);
CREATE TABLE queen.consumer_watermarks (
    queue_name         varchar(255),
    consumer_group     varchar(255),
    last_empty_scan_at timestamptz,
    PRIMARY KEY (queue_name, consumer_group)
);
CREATE TABLE queen.stats (
    stat_type text,
    stat_key  text,
    data      jsonb,
    PRIMARY KEY (stat_type, stat_key)
);
CREATE TABLE queen.messages_consumed (
    id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    partition_id       uuid,
    consumer_group     varchar(255),
    messages_completed integer,
    messages_failed    integer,
    acked_at           timestamptz DEFAULT now()
);
