-- POST /api/v1/ephemeral/push (store/ephemeral.rs Store::ephemeral_push):
-- appends p_payloads to one ring, all or nothing. Creates the queue (implicit)
-- and the partition on first use; a new partition gets a cursor at its start
-- for every group the queue has seen. Over maxLength/maxBytes the queue's
-- policy decides: 'reject' appends nothing and answers refused, 'dropOldest'
-- evicts from the head of the queue (oldest first, across its partitions,
-- counted in drops_bounds). Then the broker-wide bound: when the bytes of
-- every other queue (their ephemeral_queues.bytes, never below what they
-- hold) plus this queue's bytes after the push exceed p_total_max, nothing
-- is appended and over_budget is answered (503 ephemeral_unavailable). The
-- queue row is locked first, so pushes of one queue take turns and the
-- per-queue bounds hold; pushes of different queues at the same moment each
-- see the others' committed bytes only.
CREATE OR REPLACE FUNCTION queen.ephemeral_push(p_queue text, p_partition text, p_payloads text[],
                                                p_total_max bigint)
RETURNS TABLE (pushed integer, evicted bigint, refused boolean, over_budget boolean)
LANGUAGE plpgsql AS $$
DECLARE
    s record;
    v_n integer := coalesce(cardinality(p_payloads), 0);
    v_len bigint;
    v_bytes bigint;
    v_new_bytes bigint;
    v_first bigint;
    v_after bigint;
    v_others bigint;
    v_evicted_bytes bigint := 0;
BEGIN
    pushed := 0; evicted := 0; refused := false; over_budget := false;
    SELECT * INTO s FROM queen.ephemeral_settings(p_queue);
    INSERT INTO queen.ephemeral_queues AS q (queue, epoch)
    VALUES (p_queue, floor(random() * 4503599627370496)::bigint)
    ON CONFLICT (queue) DO UPDATE SET touched_at = now();
    IF v_n = 0 THEN
        RETURN NEXT;
        RETURN;
    END IF;
    PERFORM queen.ephemeral_expire(p_queue, s.ttl_seconds);
    SELECT coalesce(sum(octet_length(x)), 0) INTO v_new_bytes FROM unnest(p_payloads) AS x;
    IF v_n > s.max_length OR v_new_bytes > s.max_bytes THEN
        -- can never fit, whatever is evicted
        refused := true;
        RETURN NEXT;
        RETURN;
    END IF;
    SELECT count(*), coalesce(sum(m.bytes), 0) INTO v_len, v_bytes
    FROM queen.ephemeral_messages m WHERE m.queue = p_queue;
    IF v_len + v_n > s.max_length OR v_bytes + v_new_bytes > s.max_bytes THEN
        IF s.policy <> 'dropOldest' THEN
            refused := true;
            RETURN NEXT;
            RETURN;
        END IF;
        -- after eviction the queue holds at most its maxBytes
        v_after := least(v_bytes + v_new_bytes, s.max_bytes);
    ELSE
        v_after := v_bytes + v_new_bytes;
    END IF;
    SELECT coalesce(sum(q.bytes), 0) INTO v_others
    FROM queen.ephemeral_queues q WHERE q.queue <> p_queue;
    IF v_others + v_after > p_total_max THEN
        over_budget := true;
        RETURN NEXT;
        RETURN;
    END IF;
    IF v_len + v_n > s.max_length OR v_bytes + v_new_bytes > s.max_bytes THEN
        -- evict the shortest head whose removal makes room
        WITH ordered AS (
            SELECT m.partition, m.seq, m.bytes,
                   row_number() OVER w AS rn,
                   sum(m.bytes) OVER w AS cum
            FROM queen.ephemeral_messages m
            WHERE m.queue = p_queue
            WINDOW w AS (ORDER BY m.enqueued_at, m.partition, m.seq)
        ), victims AS (
            SELECT o.partition, o.seq FROM ordered o
            WHERE (v_len - (o.rn - 1)) + v_n > s.max_length
               OR (v_bytes - (o.cum - o.bytes)) + v_new_bytes > s.max_bytes
        ), gone AS (
            DELETE FROM queen.ephemeral_messages m USING victims v
            WHERE m.queue = p_queue AND m.partition = v.partition AND m.seq = v.seq
            RETURNING m.partition, m.seq, m.bytes
        ), leases AS (
            DELETE FROM queen.ephemeral_leases l USING gone
            WHERE l.queue = p_queue AND l.partition = gone.partition AND l.seq = gone.seq
        )
        SELECT count(*), coalesce(sum(gone.bytes), 0) INTO evicted, v_evicted_bytes FROM gone;
        UPDATE queen.ephemeral_queues SET drops_bounds = drops_bounds + evicted WHERE queue = p_queue;
    END IF;
    INSERT INTO queen.ephemeral_partitions (queue, partition) VALUES (p_queue, p_partition)
    ON CONFLICT DO NOTHING;
    IF FOUND THEN
        INSERT INTO queen.ephemeral_cursors (queue, partition, grp, cursor)
        SELECT p_queue, p_partition, g.grp, 0 FROM queen.ephemeral_groups g WHERE g.queue = p_queue
        ON CONFLICT DO NOTHING;
    END IF;
    UPDATE queen.ephemeral_partitions p SET next_seq = p.next_seq + v_n
    WHERE p.queue = p_queue AND p.partition = p_partition
    RETURNING p.next_seq - v_n INTO v_first;
    INSERT INTO queen.ephemeral_messages (queue, partition, seq, payload, bytes, enqueued_at)
    SELECT p_queue, p_partition, v_first + u.o - 1, u.payload, octet_length(u.payload), clock_timestamp()
    FROM unnest(p_payloads) WITH ORDINALITY AS u(payload, o);
    UPDATE queen.ephemeral_queues q SET bytes = v_bytes - v_evicted_bytes + v_new_bytes
    WHERE q.queue = p_queue;
    pushed := v_n;
    RETURN NEXT;
END
$$;
