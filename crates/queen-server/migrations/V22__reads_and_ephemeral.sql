-- Issue 21: reads by offset (no DDL) and ephemeral queues.
--
-- Ephemeral queues keep their declared configuration in a logged table (it
-- survives everything PostgreSQL survives) and their contents in UNLOGGED
-- tables: no WAL is written for them, they are not sent to standbys, and
-- crash recovery empties them. See docs/architecture.md, "Ephemeral queues".

-- One row per declared queue: the options as given to configure, clamped, with
-- the keys left at their defaults omitted (queen.ephemeral_settings fills them).
CREATE TABLE queen.ephemeral_declarations (
    queue       text PRIMARY KEY,
    options     jsonb NOT NULL,
    declared_at timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- One row per queue with contents (declared or implicit): the incarnation
-- (epoch, part of every message id) and the drop counters.
CREATE UNLOGGED TABLE queen.ephemeral_queues (
    queue        text PRIMARY KEY,
    epoch        bigint NOT NULL,
    drops_bounds bigint NOT NULL DEFAULT 0,
    drops_ttl    bigint NOT NULL DEFAULT 0,
    drops_retry  bigint NOT NULL DEFAULT 0,
    created_at   timestamptz NOT NULL DEFAULT now(),
    touched_at   timestamptz NOT NULL DEFAULT now()
);

-- One ring per (queue, partition); next_seq is allocated under this row's lock.
CREATE UNLOGGED TABLE queen.ephemeral_partitions (
    queue     text NOT NULL,
    partition text NOT NULL,
    next_seq  bigint NOT NULL DEFAULT 1,
    PRIMARY KEY (queue, partition)
);

-- Consumer groups a queue has seen ('__QUEUE_MODE__' for pops without one),
-- with the messages each dropped after the retry limit.
CREATE UNLOGGED TABLE queen.ephemeral_groups (
    queue   text NOT NULL,
    grp     text NOT NULL,
    dropped bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, grp)
);

-- Per (queue, partition, group): the last sequence number handed out.
CREATE UNLOGGED TABLE queen.ephemeral_cursors (
    queue     text NOT NULL,
    partition text NOT NULL,
    grp       text NOT NULL,
    cursor    bigint NOT NULL,
    PRIMARY KEY (queue, partition, grp)
);

CREATE UNLOGGED TABLE queen.ephemeral_messages (
    queue       text NOT NULL,
    partition   text NOT NULL,
    seq         bigint NOT NULL,
    payload     text NOT NULL,
    bytes       integer NOT NULL,
    enqueued_at timestamptz NOT NULL,
    PRIMARY KEY (queue, partition, seq)
);

-- Unacked deliveries per group; expires_at NULL = waiting for redelivery.
CREATE UNLOGGED TABLE queen.ephemeral_leases (
    queue      text NOT NULL,
    partition  text NOT NULL,
    grp        text NOT NULL,
    seq        bigint NOT NULL,
    attempts   integer NOT NULL,
    expires_at timestamptz,
    PRIMARY KEY (queue, partition, grp, seq)
);

-- Reclaim asks "does any group still hold this message".
CREATE INDEX ephemeral_leases_message ON queen.ephemeral_leases (queue, partition, seq);
