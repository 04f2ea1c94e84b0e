-- The effective options of an ephemeral queue: its declaration
-- (queen.ephemeral_declarations, keys left at their default omitted) over the
-- defaults, which live here and nowhere else. Called by the other
-- ephemeral_* functions and by store/ephemeral.rs for queues() and configure.
CREATE OR REPLACE FUNCTION queen.ephemeral_settings(p_queue text)
RETURNS TABLE (max_bytes bigint, max_length integer, policy text, ttl_seconds integer,
               lease_seconds integer, retry_limit integer, window_ms integer,
               window_count integer, declared boolean)
LANGUAGE sql STABLE AS $$
    SELECT coalesce((d.options ->> 'maxBytes')::bigint, 16777216),
           coalesce((d.options ->> 'maxLength')::integer, 10000),
           coalesce(d.options ->> 'policy', 'reject'),
           coalesce((d.options ->> 'ttlSeconds')::integer, 0),
           coalesce((d.options ->> 'leaseSeconds')::integer, 30),
           coalesce((d.options ->> 'retryLimit')::integer, 5),
           coalesce((d.options -> 'windowBuffer' ->> 'ms')::integer, 0),
           coalesce((d.options -> 'windowBuffer' ->> 'count')::integer, 0),
           d.queue IS NOT NULL
    FROM (SELECT 1) AS one
    LEFT JOIN queen.ephemeral_declarations d ON d.queue = p_queue
$$;
