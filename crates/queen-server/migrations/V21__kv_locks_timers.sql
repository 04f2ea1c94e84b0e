-- Key/value rows (also the permits of locks and semaphores, namespace
-- `queen-locks`) and pending timers (issue 21).
--
-- Versions of KV rows come from one sequence, so a later write of a key
-- always carries a higher version than any earlier one, across deletes,
-- re-creates, expiry and restarts: a sequence never goes back, not even when
-- the transaction that drew a number rolls back. Lock tokens are these
-- versions, which is why fencing tokens only rise.
CREATE SEQUENCE queen.kv_version_seq AS bigint;

-- Keys compare in byte order (COLLATE "C"): prefix pages and cursors are
-- byte-ordered whatever the database's collation. A row is live while
-- expires_at is NULL (forever) or in the future; expired rows are ignored by
-- every read and write and pruned in the background.
CREATE TABLE queen.kv (
    ns          text COLLATE "C" NOT NULL,
    key         text COLLATE "C" NOT NULL,
    value       jsonb NOT NULL,
    version     bigint NOT NULL,
    expires_at  timestamptz,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (ns, key)
);
CREATE INDEX kv_expires_at_idx ON queen.kv (expires_at) WHERE expires_at IS NOT NULL;

-- One pending timer per (queue, timer_key). The sweeper fires a due timer by
-- appending its message and deleting the row in one transaction.
CREATE TABLE queen.timers (
    queue         text NOT NULL,
    timer_key     text COLLATE "C" NOT NULL,
    partition     text NOT NULL,
    deliver_at    timestamptz NOT NULL,
    txn           text NOT NULL,
    message_id    uuid NOT NULL,
    payload       text NOT NULL,
    encrypted     boolean NOT NULL DEFAULT false,
    producer_sub  text,
    attempts      integer NOT NULL DEFAULT 0,
    last_error    text,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    PRIMARY KEY (queue, timer_key)
);
CREATE INDEX timers_deliver_at_idx ON queen.timers (deliver_at);
