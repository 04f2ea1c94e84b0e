-- GET /api/v1/ephemeral/pop (store/ephemeral.rs Store::ephemeral_pop): hands
-- out up to p_batch messages of one queue to one group ('__QUEUE_MODE__' for
-- pops without one), from the named partition or from every partition in name
-- order. Per partition, under the group's cursor row lock: leases that expired
-- go back for redelivery, or are dropped once attempts reached retryLimit
-- (drops_retry); then redeliveries first, in sequence order, with attempts + 1;
-- then forward from the cursor with attempts 1, moving the cursor. Every
-- message handed out gets a lease of leaseSeconds, unless p_auto_ack (no
-- lease: at most once). A group seen for the first time starts at the oldest
-- retained message of every partition. A wildcard pop skips partitions another
-- pop of the same group holds. Creates the queue (implicit), and the named
-- partition, on first use.
CREATE OR REPLACE FUNCTION queen.ephemeral_pop(p_queue text, p_partition text, p_group text,
                                               p_batch integer, p_auto_ack boolean)
RETURNS TABLE (partition text, seq bigint, attempts integer, payload text, epoch bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    s record;
    v_epoch bigint;
    v_part text;
    v_left integer := p_batch;
    v_cur bigint;
    v_dropped bigint;
    v_lease interval;
    r record;
BEGIN
    SELECT * INTO s FROM queen.ephemeral_settings(p_queue);
    v_lease := make_interval(secs => s.lease_seconds);
    -- a pop touches the queue (at most once a second, so pops rarely wait
    -- on the row): an implicit queue is collected only after
    -- EPHEMERAL_IDLE_SECONDS untouched (queen.ephemeral_collect). Should the
    -- collector hold the row, this waits for it and then creates the queue
    -- anew below.
    UPDATE queen.ephemeral_queues q SET touched_at = now()
    WHERE q.queue = p_queue AND q.touched_at < now() - interval '1 second';
    INSERT INTO queen.ephemeral_queues (queue, epoch)
    VALUES (p_queue, floor(random() * 4503599627370496)::bigint)
    ON CONFLICT DO NOTHING;
    SELECT q.epoch INTO v_epoch FROM queen.ephemeral_queues q WHERE q.queue = p_queue;
    PERFORM queen.ephemeral_expire(p_queue, s.ttl_seconds);
    INSERT INTO queen.ephemeral_groups (queue, grp) VALUES (p_queue, p_group) ON CONFLICT DO NOTHING;
    IF p_partition IS NOT NULL THEN
        INSERT INTO queen.ephemeral_partitions (queue, partition) VALUES (p_queue, p_partition)
        ON CONFLICT DO NOTHING;
        IF FOUND THEN
            INSERT INTO queen.ephemeral_cursors (queue, partition, grp, cursor)
            SELECT p_queue, p_partition, g.grp, 0 FROM queen.ephemeral_groups g WHERE g.queue = p_queue
            ON CONFLICT DO NOTHING;
        END IF;
    END IF;
    FOR v_part IN
        SELECT p.partition FROM queen.ephemeral_partitions p
        WHERE p.queue = p_queue AND (p_partition IS NULL OR p.partition = p_partition)
        ORDER BY p.partition
    LOOP
        EXIT WHEN v_left <= 0;
        -- a cursor for this group, at the oldest retained message, if it has none
        INSERT INTO queen.ephemeral_cursors AS c (queue, partition, grp, cursor)
        SELECT p_queue, v_part, p_group,
               coalesce((SELECT min(m.seq) FROM queen.ephemeral_messages m
                         WHERE m.queue = p_queue AND m.partition = v_part),
                        (SELECT p.next_seq FROM queen.ephemeral_partitions p
                         WHERE p.queue = p_queue AND p.partition = v_part)) - 1
        ON CONFLICT DO NOTHING;
        IF p_partition IS NULL THEN
            SELECT c.cursor INTO v_cur FROM queen.ephemeral_cursors c
            WHERE c.queue = p_queue AND c.partition = v_part AND c.grp = p_group
            FOR UPDATE SKIP LOCKED;
        ELSE
            SELECT c.cursor INTO v_cur FROM queen.ephemeral_cursors c
            WHERE c.queue = p_queue AND c.partition = v_part AND c.grp = p_group
            FOR UPDATE;
        END IF;
        CONTINUE WHEN NOT FOUND;
        -- expired leases: dropped at the retry limit, else back for redelivery
        DELETE FROM queen.ephemeral_leases l
        WHERE l.queue = p_queue AND l.partition = v_part AND l.grp = p_group
          AND l.expires_at <= clock_timestamp() AND l.attempts >= s.retry_limit;
        GET DIAGNOSTICS v_dropped = ROW_COUNT;
        IF v_dropped > 0 THEN
            UPDATE queen.ephemeral_groups g SET dropped = g.dropped + v_dropped
            WHERE g.queue = p_queue AND g.grp = p_group;
            UPDATE queen.ephemeral_queues q SET drops_retry = q.drops_retry + v_dropped
            WHERE q.queue = p_queue;
        END IF;
        UPDATE queen.ephemeral_leases l SET expires_at = NULL
        WHERE l.queue = p_queue AND l.partition = v_part AND l.grp = p_group
          AND l.expires_at <= clock_timestamp();
        -- redeliveries first
        FOR r IN
            SELECT l.seq, l.attempts, m.payload
            FROM queen.ephemeral_leases l
            JOIN queen.ephemeral_messages m
              ON m.queue = l.queue AND m.partition = l.partition AND m.seq = l.seq
            WHERE l.queue = p_queue AND l.partition = v_part AND l.grp = p_group
              AND l.expires_at IS NULL
            ORDER BY l.seq
            LIMIT v_left
        LOOP
            IF p_auto_ack THEN
                DELETE FROM queen.ephemeral_leases l
                WHERE l.queue = p_queue AND l.partition = v_part AND l.grp = p_group AND l.seq = r.seq;
            ELSE
                UPDATE queen.ephemeral_leases l
                SET attempts = l.attempts + 1, expires_at = clock_timestamp() + v_lease
                WHERE l.queue = p_queue AND l.partition = v_part AND l.grp = p_group AND l.seq = r.seq;
            END IF;
            partition := v_part; seq := r.seq; attempts := r.attempts + 1; payload := r.payload;
            epoch := v_epoch;
            RETURN NEXT;
            v_left := v_left - 1;
        END LOOP;
        -- then forward from the cursor
        IF v_left > 0 THEN
            FOR r IN
                SELECT m.seq, m.payload FROM queen.ephemeral_messages m
                WHERE m.queue = p_queue AND m.partition = v_part AND m.seq > v_cur
                ORDER BY m.seq
                LIMIT v_left
            LOOP
                IF NOT p_auto_ack THEN
                    INSERT INTO queen.ephemeral_leases (queue, partition, grp, seq, attempts, expires_at)
                    VALUES (p_queue, v_part, p_group, r.seq, 1, clock_timestamp() + v_lease);
                END IF;
                partition := v_part; seq := r.seq; attempts := 1; payload := r.payload;
                epoch := v_epoch;
                RETURN NEXT;
                v_cur := r.seq;
                v_left := v_left - 1;
            END LOOP;
            UPDATE queen.ephemeral_cursors c SET cursor = v_cur
            WHERE c.queue = p_queue AND c.partition = v_part AND c.grp = p_group AND c.cursor < v_cur;
        END IF;
        PERFORM queen.ephemeral_reclaim(p_queue, v_part);
    END LOOP;
END
$$;
