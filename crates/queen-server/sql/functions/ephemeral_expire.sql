-- Drops the messages of an ephemeral queue older than its ttlSeconds (and the
-- leases on them), counting them in drops_ttl. Called by ephemeral_push and
-- ephemeral_pop before they look at the ring; p_ttl_seconds 0 = no age limit.
CREATE OR REPLACE FUNCTION queen.ephemeral_expire(p_queue text, p_ttl_seconds integer)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_dropped bigint;
BEGIN
    IF p_ttl_seconds <= 0 THEN
        RETURN 0;
    END IF;
    WITH gone AS (
        DELETE FROM queen.ephemeral_messages m
        WHERE m.queue = p_queue
          AND m.enqueued_at < clock_timestamp() - make_interval(secs => p_ttl_seconds)
        RETURNING m.partition, m.seq
    ), leases AS (
        DELETE FROM queen.ephemeral_leases l USING gone
        WHERE l.queue = p_queue AND l.partition = gone.partition AND l.seq = gone.seq
    )
    SELECT count(*) INTO v_dropped FROM gone;
    IF v_dropped > 0 THEN
        UPDATE queen.ephemeral_queues SET drops_ttl = drops_ttl + v_dropped WHERE queue = p_queue;
    END IF;
    RETURN v_dropped;
END
$$;
