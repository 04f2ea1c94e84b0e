-- queen.claim_partition(...): claims one partition for a consumer group and
-- returns up to p_batch messages after the group's cursor, under a fresh
-- lease for p_lease_seconds (60 s when not positive). The lease id, on every
-- row: p_lease_id itself when p_lease_shared (one lease over several
-- partitions, also stored as the row's lease_group), else minted from the
-- cursor row's key and p_lease_id (queen.lease_mint). Returns
-- nothing, and claims nothing, when the group holds a live lease there, the
-- cursor row is being claimed concurrently, the window buffer is still open,
-- or nothing is deliverable. A hole or a segment still inside the queue's
-- delay ends the delivered run; offsets deleted one by one are skipped. With
-- p_auto_ack the cursor moves past the returned messages and no lease is
-- taken. On first contact the cursor starts where queen.subscription_start
-- and queen.offset_before put it; the row is made under the advisory lock of
-- queen.cursor_lock_key, which a wildcard claim (p_sub_scope '') only tries:
-- when another transaction is making that row right now it claims nothing
-- rather than wait for it.
-- The locking read leaves a cursor row under a live lease unlocked (locking
-- writes the tuple), and skips a row another pop is claiming right now.
-- With p_conflate (a consumer group with last-value delivery, conflation)
-- the one message returned is the newest visible one: the newest offset
-- past the cursor that is outside the queue's delay (a suffix of the
-- partition) and not deleted one by one. The lease still covers everything
-- from the cursor up to it, so the ack of that message commits all of it,
-- and nothing behind it is delivered to the group afterwards.
-- With p_ttl_seconds > 0 (the queue's ttl) the messages past the cursor that
-- are older than that when the pop would deliver them are passed over
-- first: a prefix of the partition, whole segments (created_at never moves
-- backwards). They go to the group's dead-letter queue with an error saying
-- they expired when p_expire_dlq, else they are counted in the cursor row's
-- total_expired; the cursor moves past them and what follows is delivered.
-- Retry holds (the queue's retryDelay, p_retry_delay_ms > 0): a cursor row
-- with no lease owner (lease_id NULL) and lease_expires_at in the future is
-- a partition resting after a failed delivery, skipped like a live lease.
-- An expired lease (an owner and lease_expires_at past) counts one failed
-- delivery attempt of the partition's head (attempts, attempt_end), and
-- with a retry delay becomes such a hold, from the expiry plus
-- queen.retry_wait of that attempt: while it lasts the call returns one
-- marker row (msg_offset NULL, retry_after_ms the milliseconds left) and
-- claims nothing. Every message row carries its delivery attempt: attempts
-- + 1 up to attempt_end, else 1.
-- Called by: `Store::claim` for pops of one partition, and queen.pop_queue
-- for every candidate of a wildcard pop.

CREATE OR REPLACE FUNCTION queen.claim_partition(
    p_partition_id   uuid,
    p_queue_name     text,
    p_partition_name text,
    p_group          text,
    p_batch          integer,
    p_lease_id       uuid,
    p_lease_shared   boolean,
    p_lease_seconds  integer,
    p_auto_ack       boolean,
    p_delay_seconds  integer,
    p_window_seconds integer,
    p_sub_scope      text,
    p_sub_mode       text,
    p_sub_from       text,
    p_holder         text,
    p_conflate       boolean DEFAULT false,
    p_ttl_seconds    integer DEFAULT 0,
    p_expire_dlq     boolean DEFAULT false,
    p_retry_delay_ms integer DEFAULT 0,
    p_retry_backoff  double precision DEFAULT 1,
    p_retry_max_ms   integer DEFAULT 0
) RETURNS TABLE (msg_offset bigint, message_id uuid, transaction_id text, trace_id uuid,
                 payload text, producer_sub text, created_at timestamptz, lease_id uuid,
                 attempt integer, retry_after_ms bigint)
LANGUAGE plpgsql
-- the statements inside get one generic plan each, made once per connection:
-- re-planning them on every call was a quarter of the call's CPU (issue 19,
-- docs/benchmarks.md), and none of their plans depends on the parameters
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    c         queen.log_consumers%ROWTYPE;
    v_next    bigint;
    v_low     bigint;
    v_lastc   timestamptz;
    v_start   bigint;
    v_from    bigint;      -- first delivered offset
    v_exp     bigint;      -- last expired offset
    v_expired bigint;      -- messages expired (not counting offsets deleted one by one)
    v_quiet   boolean;     -- the window buffer lets the partition be delivered
    v_end     bigint;
    v_stop    bigint;      -- last offset of the deliverable run
    v_hi      bigint;      -- last_offset of the run's last segment
    v_deleted bigint[] := '{}';   -- offsets of the run removed one by one
    v_last    bigint;
    v_count   integer;
    v_lease   uuid;
    v_until   timestamptz; -- end of the hold an expired lease becomes
    s         record;
BEGIN
    -- a row under a live lease is not locked: locking writes the tuple
    SELECT * INTO c FROM queen.log_consumers lc
    WHERE lc.partition_id = p_partition_id AND lc.consumer_group = p_group
      AND (lc.lease_expires_at IS NULL OR lc.lease_expires_at <= now())
    FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        IF EXISTS (SELECT 1 FROM queen.log_consumers lc
                   WHERE lc.partition_id = p_partition_id AND lc.consumer_group = p_group) THEN
            RETURN;   -- leased, or another pop holds the row right now
        END IF;
        IF p_sub_scope = '' THEN
            IF NOT pg_try_advisory_xact_lock(21023, queen.cursor_lock_key(p_partition_id, p_group)) THEN
                RETURN;   -- another pop is making the row right now
            END IF;
        ELSE
            PERFORM pg_advisory_xact_lock(21023, queen.cursor_lock_key(p_partition_id, p_group));
        END IF;
        INSERT INTO queen.log_consumers (partition_id, consumer_group, committed_offset)
        VALUES (p_partition_id, p_group,
                queen.offset_before(p_partition_id,
                    queen.subscription_start(p_group, p_queue_name, p_partition_name,
                                             p_sub_scope, p_sub_mode, p_sub_from)))
        ON CONFLICT DO NOTHING;
        -- a row another pop made meanwhile may be leased already: not locked
        -- either (a walk holds its locks to its end, and the lease's ack
        -- would wait for them)
        SELECT * INTO c FROM queen.log_consumers lc
        WHERE lc.partition_id = p_partition_id AND lc.consumer_group = p_group
          AND (lc.lease_expires_at IS NULL OR lc.lease_expires_at <= now())
        FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            RETURN;
        END IF;
    END IF;

    IF c.lease_id IS NOT NULL AND c.lease_expires_at IS NOT NULL
       AND c.lease_end_offset > c.committed_offset THEN
        -- an expired lease: one failed delivery of the head; with a retry
        -- delay the partition rests from the expiry on
        c.attempts := CASE WHEN c.attempt_end > c.committed_offset THEN c.attempts ELSE 0 END + 1;
        c.attempt_end := greatest(c.attempt_end, c.lease_end_offset);
        v_until := c.lease_expires_at + make_interval(secs => queen.retry_wait(
                       p_retry_delay_ms, p_retry_backoff, p_retry_max_ms, c.attempts) / 1000.0);
        UPDATE queen.log_consumers
        SET attempts = c.attempts, attempt_end = c.attempt_end, lease_id = NULL,
            lease_end_offset = committed_offset,
            lease_expires_at = CASE WHEN v_until > now() THEN v_until END
        WHERE partition_id = p_partition_id AND consumer_group = p_group;
        c.lease_expires_at := NULL;
        IF v_until > now() THEN
            RETURN QUERY SELECT NULL::bigint, NULL::uuid, NULL::text, NULL::uuid, NULL::text, NULL::text,
                                NULL::timestamptz, NULL::uuid, NULL::integer,
                                ceil(extract(epoch FROM v_until - now()) * 1000)::bigint;
            RETURN;
        END IF;
    END IF;

    SELECT pt.next_offset, pt.low_offset, pt.last_created_at INTO v_next, v_low, v_lastc
    FROM queen.partitions pt WHERE pt.id = p_partition_id;
    v_start := greatest(c.committed_offset + 1, v_low);
    v_quiet := p_window_seconds <= 0
               OR coalesce(v_lastc <= now() - make_interval(secs => p_window_seconds), true);
    IF p_ttl_seconds > 0 AND v_quiet AND v_start < v_next THEN
        -- the expired prefix: whole segments older than the ttl
        v_exp := v_start - 1;
        FOR s IN
            SELECT sg.last_offset, sg.created_at
            FROM queen.segments sg
            WHERE sg.partition_id = p_partition_id AND sg.last_offset >= v_start
            ORDER BY sg.last_offset
        LOOP
            EXIT WHEN s.created_at > now() - make_interval(secs => p_ttl_seconds);
            v_exp := s.last_offset;
        END LOOP;
        IF v_exp >= v_start THEN
            WITH gone AS (
                SELECT sg.first_offset + u.n - 1 AS off, u.mid, u.txn, u.tr, u.pl, u.ps, sg.created_at
                FROM queen.segments sg
                CROSS JOIN LATERAL unnest(sg.message_ids, sg.transaction_ids, sg.trace_ids, sg.payloads,
                                          coalesce(sg.producer_subs,
                                                   array_fill(NULL::text, ARRAY[cardinality(sg.message_ids)])))
                           WITH ORDINALITY AS u(mid, txn, tr, pl, ps, n)
                WHERE sg.partition_id = p_partition_id AND sg.last_offset BETWEEN v_start AND v_exp
                  AND sg.first_offset + u.n - 1 >= v_start
                  AND NOT (sg.deleted_offsets IS NOT NULL
                           AND (sg.first_offset + u.n - 1) = ANY (sg.deleted_offsets))
            ), filed AS (
                INSERT INTO queen.dead_letters (partition_id, consumer_group, msg_offset, message_id,
                                                transaction_id, trace_id, payload, producer_sub,
                                                error_message, retry_count, original_created_at)
                SELECT p_partition_id, p_group, g.off, g.mid, g.txn, g.tr, g.pl, g.ps,
                       format('Expired: older than the queue''s ttl of %s s', p_ttl_seconds),
                       c.retry_count, g.created_at
                FROM gone g
                WHERE p_expire_dlq
                -- the one unique key besides the id: (partition, group, offset);
                -- not named, since msg_offset is also this function's output
                ON CONFLICT DO NOTHING
            )
            SELECT count(*) INTO v_expired FROM gone;
            UPDATE queen.log_consumers
            SET committed_offset = v_exp, retry_count = 0,
                total_expired = total_expired + CASE WHEN p_expire_dlq THEN 0 ELSE v_expired END
            WHERE partition_id = p_partition_id AND consumer_group = p_group;
            c.committed_offset := v_exp;
            v_start := v_exp + 1;
        END IF;
    END IF;
    IF v_start >= v_next OR NOT v_quiet THEN
        IF c.lease_expires_at IS NOT NULL THEN
            UPDATE queen.log_consumers SET lease_expires_at = NULL
            WHERE partition_id = p_partition_id AND consumer_group = p_group;
        END IF;
        RETURN;
    END IF;

    IF p_conflate THEN
        -- the newest visible message; the delay hides a suffix, since
        -- created_at never moves backwards within a partition
        v_stop := NULL;
        FOR s IN
            SELECT sg.first_offset, sg.last_offset, sg.deleted_offsets
            FROM queen.segments sg
            WHERE sg.partition_id = p_partition_id AND sg.last_offset >= v_start
              AND (p_delay_seconds <= 0
                   OR sg.created_at <= now() - make_interval(secs => p_delay_seconds))
            ORDER BY sg.last_offset DESC
        LOOP
            v_last := s.last_offset;
            WHILE v_last >= greatest(s.first_offset, v_start)
                  AND v_last = ANY (coalesce(s.deleted_offsets, '{}')) LOOP
                v_last := v_last - 1;
            END LOOP;
            IF v_last >= greatest(s.first_offset, v_start) THEN
                v_stop := v_last;
                v_hi := s.last_offset;
                EXIT;
            END IF;
        END LOOP;
        -- nothing visible: the empty run, which releases a stale lease below
        v_stop := coalesce(v_stop, v_start - 1);
        v_from := greatest(v_stop, v_start);
    ELSE
        v_end := least(v_next - 1, v_start + p_batch - 1);

        -- the run of consecutive offsets from v_start: a hole or a segment still
        -- inside the queue's delay ends it (nothing after it is delivered either)
        v_stop := v_start - 1;
        FOR s IN
            SELECT sg.first_offset, sg.last_offset, sg.created_at, sg.deleted_offsets
            FROM queen.segments sg
            WHERE sg.partition_id = p_partition_id AND sg.last_offset >= v_start
            ORDER BY sg.last_offset
            LIMIT (v_end - v_start + 1)
        LOOP
            EXIT WHEN s.first_offset > v_stop + 1
                   OR (p_delay_seconds > 0 AND s.created_at > now() - make_interval(secs => p_delay_seconds));
            v_stop := least(s.last_offset, v_end);
            v_hi := s.last_offset;
            v_deleted := v_deleted || coalesce(s.deleted_offsets, '{}');
            EXIT WHEN v_stop = v_end;
        END LOOP;
        v_from := v_start;
    END IF;

    v_lease := CASE WHEN p_lease_shared THEN p_lease_id ELSE queen.lease_mint(c.cursor_key, p_lease_id) END;
    IF v_stop >= v_start THEN
        RETURN QUERY
            SELECT sg.first_offset + u.n - 1, u.mid, u.txn, u.tr, u.pl, u.ps, sg.created_at, v_lease,
                   CASE WHEN c.attempts > 0 AND sg.first_offset + u.n - 1 <= c.attempt_end
                        THEN c.attempts + 1 ELSE 1 END,
                   NULL::bigint
            FROM queen.segments sg
            CROSS JOIN LATERAL unnest(sg.message_ids, sg.transaction_ids, sg.trace_ids, sg.payloads,
                                      coalesce(sg.producer_subs,
                                               array_fill(NULL::text, ARRAY[cardinality(sg.message_ids)])))
                       WITH ORDINALITY AS u(mid, txn, tr, pl, ps, n)
            WHERE sg.partition_id = p_partition_id AND sg.last_offset BETWEEN v_from AND v_hi
              AND sg.first_offset + u.n - 1 BETWEEN v_from AND v_stop
              AND NOT ((sg.first_offset + u.n - 1) = ANY (v_deleted))
            ORDER BY 1;
        GET DIAGNOSTICS v_count = ROW_COUNT;
    ELSE
        v_count := 0;
    END IF;

    IF v_count = 0 THEN
        -- nothing deliverable; skip over messages that were deleted one by one
        UPDATE queen.log_consumers
        SET committed_offset = CASE WHEN v_stop >= v_start
                                    THEN greatest(committed_offset, v_stop)
                                    ELSE committed_offset END,
            lease_expires_at = NULL
        WHERE partition_id = p_partition_id AND consumer_group = p_group
          AND (v_stop >= v_start OR lease_expires_at IS NOT NULL);
        RETURN;
    END IF;

    -- the last delivered offset: the run's end unless deleted messages trail it
    v_last := v_stop;
    WHILE v_last = ANY (v_deleted) LOOP
        v_last := v_last - 1;
    END LOOP;

    IF p_auto_ack THEN
        UPDATE queen.log_consumers
        SET committed_offset = v_last, lease_expires_at = NULL, retry_count = 0,
            total_consumed = total_consumed + (v_last - c.committed_offset),
            batches_consumed = batches_consumed + 1, last_consumed_at = now(),
            lease_holder = p_holder
        WHERE partition_id = p_partition_id AND consumer_group = p_group;
    ELSE
        -- lease_group is written only for a shared lease: an update that
        -- changes no indexed column stays heap-only (migration V24)
        UPDATE queen.log_consumers
        SET lease_id = v_lease, lease_end_offset = v_last,
            lease_group = CASE WHEN p_lease_shared THEN p_lease_id ELSE lease_group END,
            lease_expires_at = now() + make_interval(secs => CASE WHEN p_lease_seconds > 0 THEN p_lease_seconds ELSE 60 END),
            lease_holder = p_holder
        WHERE partition_id = p_partition_id AND consumer_group = p_group;
    END IF;
END;
$$;
