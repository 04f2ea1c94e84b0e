-- queen.evict_expired(batch): moves messages older than their queue's
-- maxWaitTimeSeconds that a consumer group has not consumed yet into that
-- group's DLQ and advances its cursor past them, at most `batch` messages
-- per cursor. Leased cursors are left alone (their messages are in flight).
-- Returns messages evicted.
-- Called by: the leader-gated eviction job (store/jobs.rs).

CREATE OR REPLACE FUNCTION queen.evict_expired(p_batch integer)
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
