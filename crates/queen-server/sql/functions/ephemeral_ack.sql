-- POST /api/v1/ephemeral/ack (store/ephemeral.rs Store::ephemeral_ack): one
-- outcome per id, in order. 'stale' when the id's epoch is not the queue's
-- current incarnation (the contents it named are gone); 'unknown' when the
-- group holds no live lease on it (acked already, expired, another group);
-- else 'completed' retires it ('acked'), and 'failed'/'retry' send it back for
-- redelivery ('redelivered') unless its attempts reached retryLimit, when it is
-- dropped ('acked', counted in drops_retry). Rings it touched are reclaimed.
CREATE OR REPLACE FUNCTION queen.ephemeral_ack(p_queue text, p_group text, p_epochs bigint[],
                                               p_partitions text[], p_seqs bigint[],
                                               p_completed boolean[])
RETURNS TABLE (idx integer, outcome text)
LANGUAGE plpgsql AS $$
DECLARE
    s record;
    v_epoch bigint;
    i integer;
    v_attempts integer;
    v_expires timestamptz;
    v_dropped bigint := 0;
    v_part text;
BEGIN
    SELECT * INTO s FROM queen.ephemeral_settings(p_queue);
    SELECT q.epoch INTO v_epoch FROM queen.ephemeral_queues q WHERE q.queue = p_queue;
    FOR i IN 1 .. coalesce(cardinality(p_seqs), 0) LOOP
        idx := i;
        IF v_epoch IS NULL OR p_epochs[i] <> v_epoch THEN
            outcome := 'stale';
            RETURN NEXT;
            CONTINUE;
        END IF;
        SELECT l.attempts, l.expires_at INTO v_attempts, v_expires
        FROM queen.ephemeral_leases l
        WHERE l.queue = p_queue AND l.partition = p_partitions[i] AND l.grp = p_group
          AND l.seq = p_seqs[i]
        FOR UPDATE;
        IF NOT FOUND OR v_expires IS NULL OR v_expires <= clock_timestamp() THEN
            outcome := 'unknown';
        ELSIF p_completed[i] OR v_attempts >= s.retry_limit THEN
            DELETE FROM queen.ephemeral_leases l
            WHERE l.queue = p_queue AND l.partition = p_partitions[i] AND l.grp = p_group
              AND l.seq = p_seqs[i];
            IF NOT p_completed[i] THEN
                v_dropped := v_dropped + 1;
            END IF;
            outcome := 'acked';
        ELSE
            UPDATE queen.ephemeral_leases l SET expires_at = NULL
            WHERE l.queue = p_queue AND l.partition = p_partitions[i] AND l.grp = p_group
              AND l.seq = p_seqs[i];
            outcome := 'redelivered';
        END IF;
        RETURN NEXT;
    END LOOP;
    IF v_dropped > 0 THEN
        UPDATE queen.ephemeral_groups g SET dropped = g.dropped + v_dropped
        WHERE g.queue = p_queue AND g.grp = p_group;
        UPDATE queen.ephemeral_queues q SET drops_retry = q.drops_retry + v_dropped
        WHERE q.queue = p_queue;
    END IF;
    IF v_epoch IS NOT NULL THEN
        FOR v_part IN SELECT DISTINCT x FROM unnest(p_partitions) AS x LOOP
            PERFORM queen.ephemeral_reclaim(p_queue, v_part);
        END LOOP;
    END IF;
END
$$;
