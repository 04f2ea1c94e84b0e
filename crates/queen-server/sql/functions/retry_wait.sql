-- queen.retry_wait(delay_ms, backoff, max_ms, attempt): how long, in
-- milliseconds, a partition rests after delivery attempt `attempt` (1 for a
-- first delivery) failed: delay_ms × backoff^(attempt − 1), at most max_ms
-- when it is positive and never more than 7 days (604 800 000 ms, the
-- largest retryDelay and retryDelayMax /configure takes). 0 when delay_ms is
-- not positive. The exponent is bounded, so no attempt count overflows.
-- Called by: queen.ack_batch (a failed ack) and queen.claim_partition (an
-- expired lease).

CREATE OR REPLACE FUNCTION queen.retry_wait(p_delay_ms integer, p_backoff double precision,
                                            p_max_ms integer, p_attempt integer)
RETURNS double precision
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN coalesce(p_delay_ms, 0) <= 0 THEN 0::double precision
                ELSE least(p_delay_ms * power(greatest(coalesce(p_backoff, 1), 1),
                                              least(greatest(p_attempt, 1) - 1, 64)),
                           CASE WHEN p_max_ms > 0 THEN least(p_max_ms, 604800000) ELSE 604800000 END)
           END
$$;
