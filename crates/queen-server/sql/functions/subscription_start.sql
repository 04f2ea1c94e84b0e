-- queen.subscription_start(group, queue, partition, scope, mode, from):
-- the subscription start of a consumer group on a partition, stored on first
-- contact as the subscription rules say (http-api.md, section 5.2). Returns
-- NULL for "from the oldest message". Queue mode (`__QUEUE_MODE__`) always
-- starts at the oldest message; an unparsable `from` counts as 'all'.
-- Called by: queen.claim_partition, on a group's first contact with a
-- partition.

CREATE OR REPLACE FUNCTION queen.subscription_start(
    p_group          text,
    p_queue_name     text,
    p_partition_name text,
    p_scope          text,      -- partition name for the partition route, '' for wildcard
    p_mode           text,      -- 'all' | 'new'
    p_from           text       -- NULL, 'now' or a timestamp
) RETURNS timestamptz
LANGUAGE plpgsql AS $$
DECLARE
    v_ts   timestamptz;
    v_mode text;
BEGIN
    IF p_group = '__QUEUE_MODE__' THEN
        RETURN NULL;
    END IF;
    SELECT cs.subscription_timestamp INTO v_ts
    FROM queen.consumer_subscriptions cs
    WHERE cs.consumer_group = p_group AND cs.queue_name = p_queue_name
      AND cs.partition_name IN (p_partition_name, '')
    ORDER BY cs.partition_name DESC
    LIMIT 1;
    IF FOUND THEN
        RETURN v_ts;
    END IF;

    v_ts := NULL;
    IF p_from IS NOT NULL AND p_from <> '' AND lower(p_from) <> 'now' THEN
        BEGIN
            v_ts := p_from::timestamptz;
            v_mode := 'timestamp';
        EXCEPTION WHEN others THEN
            v_ts := NULL;   -- unparsable: treated as 'all'
        END;
    END IF;
    IF v_ts IS NULL AND (lower(coalesce(p_from, '')) = 'now' OR p_mode = 'new') THEN
        v_ts := now();
        v_mode := 'new';
    END IF;
    IF v_ts IS NOT NULL THEN
        INSERT INTO queen.consumer_subscriptions
            (consumer_group, queue_name, partition_name, subscription_mode, subscription_timestamp)
        VALUES (p_group, p_queue_name, p_scope, v_mode, v_ts)
        ON CONFLICT DO NOTHING;
        SELECT cs.subscription_timestamp INTO v_ts
        FROM queen.consumer_subscriptions cs
        WHERE cs.consumer_group = p_group AND cs.queue_name = p_queue_name
          AND cs.partition_name IN (p_partition_name, '')
        ORDER BY cs.partition_name DESC
        LIMIT 1;
    END IF;
    RETURN v_ts;
END;
$$;
