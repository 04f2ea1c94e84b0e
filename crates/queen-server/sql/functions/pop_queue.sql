-- queen.pop_queue(...): a wildcard pop, claiming up to p_max_partitions
-- partitions of a queue for p_batch messages in all.
-- Candidates come from two passes:
--   1. p_hints, partition names in the order to try them (the broker's list
--      of recently written partitions, broker/recent.rs): those with messages
--      past the group's cursor and no live lease, least recently consumed
--      first. With p_report_drained, every hinted partition with nothing past
--      the cursor (or unknown) comes back first as a marker row (partition id
--      and name, every message column NULL), so the broker stops hinting it
--      for that group until it is written again. A leased partition is not
--      drained and is not reported.
--   2. only with p_walk: queen.walk_eligible, the floor for whatever the
--      hints miss (lost hints, restarts, expired leases).
-- Concurrent pops compute the same order, so each pass starts at one of its
-- first four candidates (chosen at random) and they do not all queue on one
-- cursor row.
-- The lease: p_lease_id itself, shared by every partition claimed, when
-- p_max_partitions > 1; else the one partition's own id minted from it (see
-- queen.claim_partition). Every message row carries it.
-- With p_conflate (a conflating consumer group) each claimed partition gives
-- its newest visible message only (queen.claim_partition), and messages
-- older than p_ttl_seconds are passed over (and dead-lettered with
-- p_expire_dlq) before anything is delivered.
-- Retry delays (p_retry_delay_ms > 0, with p_retry_backoff and
-- p_retry_max_ms: the queue's retry schedule): a candidate whose expired
-- lease queen.claim_partition turns into a hold gives its marker row
-- (message columns NULL, retry_after_ms set) and counts as no claim, so the
-- pop goes on to the next candidate. Every message row carries its delivery
-- attempt (queen.claim_partition).
-- Called by: `Store::claim`, for wildcard pops.

CREATE OR REPLACE FUNCTION queen.pop_queue(
    p_queue_id         uuid,
    p_queue_name       text,
    p_group            text,
    p_batch            integer,
    p_max_partitions   integer,
    p_lease_id         uuid,
    p_lease_seconds    integer,
    p_auto_ack         boolean,
    p_delay_seconds    integer,
    p_window_seconds   integer,
    p_sub_mode         text,
    p_sub_from         text,
    p_holder           text,
    p_hints            text[],     -- partition names, in the order to try them
    p_report_drained   boolean,
    p_walk             boolean,    -- false: only the hints, no walk
    p_conflate         boolean DEFAULT false,  -- one message per partition: its newest
    p_ttl_seconds      integer DEFAULT 0,      -- the queue's ttl (0: none)
    p_expire_dlq       boolean DEFAULT false,  -- expired messages go to the DLQ
    p_retry_delay_ms   integer DEFAULT 0,      -- the queue's retry schedule
    p_retry_backoff    double precision DEFAULT 1,
    p_retry_max_ms     integer DEFAULT 0
) RETURNS TABLE (partition_id uuid, partition_name text, msg_offset bigint, message_id uuid,
                 transaction_id text, trace_id uuid, payload text, producer_sub text,
                 created_at timestamptz, lease_id uuid, attempt integer, retry_after_ms bigint)
LANGUAGE plpgsql
-- the statements inside get one generic plan each, made once per connection:
-- re-planning them on every call was a quarter of the call's CPU (issue 19,
-- docs/benchmarks.md), and none of their plans depends on the parameters
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_left    integer := p_batch;
    v_claims  integer := 0;
    v_n       integer;
    v_ids     uuid[];
    v_names   text[];
    v_dids    uuid[];
    v_dnames  text[];
    v_tried   uuid[] := '{}';
    v_pass    integer;
    v_k       integer;
    v_held    boolean;
    j         integer;
BEGIN
    FOR v_pass IN 1 .. CASE WHEN p_walk THEN 2 ELSE 1 END LOOP
        IF v_pass = 1 THEN
            CONTINUE WHEN coalesce(cardinality(p_hints), 0) = 0;
            -- hinted partitions with messages past the group's cursor and no
            -- live lease, least recently consumed first; and the drained ones
            SELECT array_agg(e.id ORDER BY e.last_consumed_at NULLS FIRST, e.n) FILTER (WHERE e.eligible),
                   array_agg(e.name ORDER BY e.last_consumed_at NULLS FIRST, e.n) FILTER (WHERE e.eligible),
                   array_agg(e.id) FILTER (WHERE NOT e.pending),
                   array_agg(e.name) FILTER (WHERE NOT e.pending)
            INTO v_ids, v_names, v_dids, v_dnames
            FROM (SELECT x.*, x.pending AND (x.lease_expires_at IS NULL OR x.lease_expires_at <= now()) AS eligible
                  FROM (SELECT h.name, h.n, pt.id, lc.last_consumed_at, lc.lease_expires_at,
                               coalesce(pt.next_offset > greatest(coalesce(lc.committed_offset + 1, pt.low_offset),
                                                                  pt.low_offset), false) AS pending
                        FROM unnest(p_hints) WITH ORDINALITY AS h(name, n)
                        LEFT JOIN queen.partitions pt ON pt.queue_id = p_queue_id AND pt.name = h.name
                        LEFT JOIN LATERAL (
                            SELECT l.committed_offset, l.lease_expires_at, l.last_consumed_at
                            FROM queen.log_consumers l
                            WHERE l.partition_id = pt.id AND l.consumer_group = p_group
                            LIMIT 1) lc ON true) x) e;
            IF p_report_drained AND v_dnames IS NOT NULL THEN
                RETURN QUERY
                    SELECT d.id, d.name, NULL::bigint, NULL::uuid, NULL::text, NULL::uuid,
                           NULL::text, NULL::text, NULL::timestamptz, NULL::uuid, NULL::integer,
                           NULL::bigint
                    FROM unnest(v_dids, v_dnames) AS d(id, name);
            END IF;
        ELSE
            SELECT array_agg(w.id), array_agg(w.name) INTO v_ids, v_names
            FROM queen.walk_eligible(p_queue_id, p_group, p_delay_seconds, p_window_seconds,
                                     v_tried, p_max_partitions * 4 + 16) w;
        END IF;
        -- concurrent pops compute the same order: each starts at one of the
        -- first four, so they do not all queue on one cursor row
        v_k := floor(random() * least(coalesce(cardinality(v_ids), 0), 4))::integer;
        IF v_k > 0 THEN
            v_ids := v_ids[v_k + 1:] || v_ids[1:v_k];
            v_names := v_names[v_k + 1:] || v_names[1:v_k];
        END IF;
        FOR j IN 1 .. coalesce(cardinality(v_ids), 0) LOOP
            v_tried := v_tried || v_ids[j];
            RETURN QUERY
                SELECT v_ids[j], v_names[j], m.*
                FROM queen.claim_partition(v_ids[j], p_queue_name, v_names[j], p_group, v_left,
                                           p_lease_id, p_max_partitions > 1, p_lease_seconds, p_auto_ack, p_delay_seconds,
                                           p_window_seconds, '', p_sub_mode, p_sub_from, p_holder,
                                           p_conflate, p_ttl_seconds, p_expire_dlq, p_retry_delay_ms,
                                           p_retry_backoff, p_retry_max_ms) m;
            GET DIAGNOSTICS v_n = ROW_COUNT;
            IF v_n = 1 AND p_retry_delay_ms > 0 THEN
                -- one row: a message, or the marker of an expired lease put
                -- on hold (no lease owner, resting until lease_expires_at)
                SELECT l.lease_id IS NULL AND l.lease_expires_at > now() INTO v_held
                FROM queen.log_consumers l
                WHERE l.partition_id = v_ids[j] AND l.consumer_group = p_group;
                IF v_held THEN
                    v_n := 0;
                END IF;
            END IF;
            IF v_n > 0 THEN
                v_claims := v_claims + 1;
                v_left := v_left - v_n;
            END IF;
            EXIT WHEN v_claims >= p_max_partitions OR v_left <= 0;
        END LOOP;
        EXIT WHEN v_claims >= p_max_partitions OR v_left <= 0;
    END LOOP;
END;
$$;
