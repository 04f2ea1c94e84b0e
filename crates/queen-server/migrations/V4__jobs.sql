-- Background jobs: retention, eviction, per-replica statistics.

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

-- Deletes up to p_batch expired segments of retention-enabled queues, oldest
-- first per partition, frees their transactionIds and moves low_offset up.
-- retentionSeconds: any message older than N s; completedRetentionSeconds:
-- messages older than N s that every group with a cursor on the partition has
-- passed (partitions without cursors are untouched). Returns segments deleted.
CREATE FUNCTION queen.apply_retention(p_batch integer)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_n integer;
BEGIN
    WITH victims AS (
        SELECT s.partition_id, s.last_offset
        FROM queen.segments s
        JOIN queen.partitions p ON p.id = s.partition_id
        JOIN queen.queues q ON q.id = p.queue_id
        WHERE q.retention_enabled
          AND ((q.retention_seconds > 0
                AND s.created_at < now() - make_interval(secs => q.retention_seconds))
            OR (q.completed_retention_seconds > 0
                AND s.created_at < now() - make_interval(secs => q.completed_retention_seconds)
                AND s.last_offset <= (SELECT min(lc.committed_offset) FROM queen.log_consumers lc
                                      WHERE lc.partition_id = s.partition_id)))
        ORDER BY s.partition_id, s.last_offset
        LIMIT p_batch
        FOR UPDATE OF s SKIP LOCKED
    ), del AS (
        DELETE FROM queen.segments s USING victims v
        WHERE s.partition_id = v.partition_id AND s.last_offset = v.last_offset
        RETURNING s.partition_id, s.last_offset, s.transaction_ids
    ), keys AS (
        DELETE FROM queen.message_keys k
        USING (SELECT d.partition_id, unnest(d.transaction_ids) AS txn FROM del d) x
        WHERE k.partition_id = x.partition_id AND k.transaction_id = x.txn
    ), low AS (
        UPDATE queen.partitions p SET low_offset = greatest(p.low_offset, m.top + 1)
        FROM (SELECT d.partition_id, max(d.last_offset) AS top FROM del d GROUP BY d.partition_id) m
        WHERE p.id = m.partition_id
    )
    SELECT count(*) INTO v_n FROM del;
    RETURN v_n;
END;
$$;

-- Removes partitions with no stored message and no activity for p_days days,
-- with their cursors. Returns partitions removed.
CREATE FUNCTION queen.cleanup_partitions(p_days integer, p_batch integer)
RETURNS integer
LANGUAGE sql AS $$
    WITH gone AS (
        DELETE FROM queen.partitions p
        WHERE p.id IN (
            SELECT pt.id FROM queen.partitions pt
            WHERE coalesce(pt.last_created_at, pt.created_at) < now() - make_interval(days => p_days)
              AND NOT EXISTS (SELECT 1 FROM queen.segments s WHERE s.partition_id = pt.id)
              AND NOT EXISTS (SELECT 1 FROM queen.log_consumers lc
                              WHERE lc.partition_id = pt.id AND lc.lease_expires_at > now())
            LIMIT p_batch)
        RETURNING p.id
    ), cursors AS (
        DELETE FROM queen.log_consumers lc USING gone g WHERE lc.partition_id = g.id
    )
    SELECT count(*)::integer FROM gone
$$;

-- Moves messages older than their queue's maxWaitTimeSeconds that a consumer
-- group has not consumed yet into that group's DLQ and advances its cursor past
-- them, at most p_batch messages per cursor. Leased cursors are left alone
-- (their messages are in flight). Returns messages evicted.
CREATE FUNCTION queen.evict_expired(p_batch integer)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    c       record;
    v_cut   bigint;
    v_total integer := 0;
    v_n     integer;
BEGIN
    FOR c IN
        SELECT lc.partition_id, lc.consumer_group, lc.committed_offset, q.max_wait_time_seconds
        FROM queen.log_consumers lc
        JOIN queen.partitions p ON p.id = lc.partition_id
        JOIN queen.queues q ON q.id = p.queue_id
        WHERE q.max_wait_time_seconds > 0
          AND p.next_offset - 1 > lc.committed_offset
          AND (lc.lease_expires_at IS NULL OR lc.lease_expires_at <= now())
        FOR UPDATE OF lc SKIP LOCKED
    LOOP
        SELECT max(s.last_offset) INTO v_cut
        FROM queen.segments s
        WHERE s.partition_id = c.partition_id
          AND s.created_at < now() - make_interval(secs => c.max_wait_time_seconds);
        CONTINUE WHEN v_cut IS NULL OR v_cut <= c.committed_offset;
        v_cut := least(v_cut, c.committed_offset + p_batch);

        INSERT INTO queen.dead_letters (partition_id, consumer_group, msg_offset, message_id,
                                        transaction_id, trace_id, payload, producer_sub,
                                        error_message, retry_count, original_created_at)
        SELECT c.partition_id, c.consumer_group, s.first_offset + u.n - 1, u.mid, u.txn, u.tr,
               u.pl, u.ps, 'Evicted: maxWaitTimeSeconds exceeded', 0, s.created_at
        FROM queen.segments s
        CROSS JOIN LATERAL unnest(s.message_ids, s.transaction_ids, s.trace_ids, s.payloads,
                                  coalesce(s.producer_subs, array_fill(NULL::text, ARRAY[cardinality(s.message_ids)])))
                   WITH ORDINALITY AS u(mid, txn, tr, pl, ps, n)
        WHERE s.partition_id = c.partition_id
          AND s.last_offset > c.committed_offset AND s.first_offset <= v_cut
          AND s.first_offset + u.n - 1 > c.committed_offset AND s.first_offset + u.n - 1 <= v_cut
          AND NOT coalesce(s.first_offset + u.n - 1 = ANY (s.deleted_offsets), false)
        ON CONFLICT (partition_id, consumer_group, msg_offset) DO NOTHING;
        GET DIAGNOSTICS v_n = ROW_COUNT;

        UPDATE queen.log_consumers
        SET committed_offset = v_cut, lease_expires_at = NULL, retry_count = 0
        WHERE partition_id = c.partition_id AND consumer_group = c.consumer_group;
        v_total := v_total + v_n;
    END LOOP;
    RETURN v_total;
END;
$$;
