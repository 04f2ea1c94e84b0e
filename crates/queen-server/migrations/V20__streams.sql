-- Streams (/streams/v1): the queries the official streaming SDK registers and
-- the state its operators keep per (query, source partition, key). A schema
-- of its own, under the names the official suites clean up with
-- (`DELETE FROM queen_streams.queries WHERE name = $1`); a query's state goes
-- with it.

CREATE SCHEMA IF NOT EXISTS queen_streams;

CREATE TABLE queen_streams.queries (
    id            uuid PRIMARY KEY,
    name          text NOT NULL UNIQUE,
    source_queue  text NOT NULL,
    sink_queue    text,
    config_hash   text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);

-- partition_id is the source partition (queen.partitions.id) the state
-- belongs to; no foreign key: the state outlives nothing it needs, and a
-- dropped source queue leaves rows that only the query's removal clears.
CREATE TABLE queen_streams.state (
    query_id     uuid NOT NULL REFERENCES queen_streams.queries (id) ON DELETE CASCADE,
    partition_id uuid NOT NULL,
    key          text NOT NULL,
    value        jsonb NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (query_id, partition_id, key)
);
