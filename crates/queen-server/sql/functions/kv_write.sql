-- queen.kv_write(op, ns, key, value, ttl_seconds, forever, expect, delta,
-- min, max, now): decides and applies one single-key KV operation (put,
-- putIfAbsent, delete, incr, check) and returns its verdict.
--
-- The key is serialised by a transaction-scoped advisory lock (class 21021,
-- the hash of ns/key), taken before the row is read: under READ COMMITTED
-- every later statement of this function sees what the previous holder
-- committed, so of N concurrent putIfAbsent exactly one applies and N
-- concurrent incr +1 leave N. The lock lasts until the caller's transaction
-- ends, so a KV write inside POST /api/v1/transaction is decided and kept
-- (or rolled back) together with the acks and pushes beside it.
--
-- A row is live iff expires_at IS NULL or expires_at > p_now (the call's one
-- "now"). Versions come from queen.kv_version_seq. incr keeps a live row's
-- expiry (TTL is create-only); every other write replaces it.
-- reason: exists | absent | version | limit | type (NULL when applied). An
-- incr whose result is beyond what a JSON number holds (|x| > 1.8e308) raises.
-- Called by: store/kv.rs (POST /api/v1/kv, transaction riders, locks).

CREATE OR REPLACE FUNCTION queen.kv_write(
    p_op       text,
    p_ns       text,
    p_key      text,
    p_value    jsonb,
    p_ttl      integer,
    p_forever  boolean,
    p_expect   bigint,
    p_delta    numeric,
    p_min      numeric,
    p_max      numeric,
    p_now      timestamptz
) RETURNS TABLE (applied boolean, reason text, value jsonb, version bigint)
LANGUAGE plpgsql AS $$
DECLARE
    cur_value   jsonb;
    cur_version bigint;
    cur_expiry  timestamptz;
    live        boolean;
    new_value   jsonb;
    new_version bigint;
    expiry      timestamptz;
    candidate   numeric;
BEGIN
    PERFORM pg_advisory_xact_lock(21021, hashtext(p_ns || '/' || p_key));
    SELECT k.value, k.version, k.expires_at INTO cur_value, cur_version, cur_expiry
      FROM queen.kv k
     WHERE k.ns = p_ns AND k.key = p_key
       AND (k.expires_at IS NULL OR k.expires_at > p_now);
    live := FOUND;
    IF NOT live THEN
        cur_value := NULL;
        cur_version := 0;
    END IF;
    expiry := CASE WHEN p_forever THEN NULL
                   ELSE p_now + make_interval(secs => p_ttl) END;

    IF p_op = 'check' THEN
        IF (p_expect = 0 AND NOT live) OR (live AND cur_version = p_expect) THEN
            RETURN QUERY SELECT true, NULL::text, NULL::jsonb, p_expect;
        ELSIF p_expect = 0 THEN
            RETURN QUERY SELECT false, 'exists'::text, cur_value, cur_version;
        ELSIF NOT live THEN
            RETURN QUERY SELECT false, 'absent'::text, NULL::jsonb, 0::bigint;
        ELSE
            RETURN QUERY SELECT false, 'version'::text, cur_value, cur_version;
        END IF;
        RETURN;
    END IF;

    -- the expect precondition, shared by put, putIfAbsent and delete
    IF p_expect IS NOT NULL THEN
        IF p_expect = 0 AND live THEN
            RETURN QUERY SELECT false, 'exists'::text, cur_value, cur_version;
            RETURN;
        ELSIF p_expect > 0 AND NOT live THEN
            RETURN QUERY SELECT false, 'absent'::text, NULL::jsonb, 0::bigint;
            RETURN;
        ELSIF p_expect > 0 AND cur_version <> p_expect THEN
            RETURN QUERY SELECT false, 'version'::text, cur_value, cur_version;
            RETURN;
        END IF;
    END IF;

    IF p_op = 'delete' THEN
        IF p_expect = 0 THEN
            -- "must not exist" held: nothing to delete, nothing written
            RETURN QUERY SELECT true, NULL::text, NULL::jsonb, 0::bigint;
            RETURN;
        END IF;
        -- an expired, unpruned row goes too, but only a live one counts
        DELETE FROM queen.kv k WHERE k.ns = p_ns AND k.key = p_key;
        IF live THEN
            RETURN QUERY SELECT true, NULL::text, cur_value, cur_version;
        ELSE
            RETURN QUERY SELECT false, 'absent'::text, NULL::jsonb, 0::bigint;
        END IF;
        RETURN;
    END IF;

    IF p_op = 'incr' THEN
        IF live AND jsonb_typeof(cur_value) <> 'number' THEN
            RETURN QUERY SELECT false, 'type'::text, cur_value, cur_version;
            RETURN;
        END IF;
        candidate := COALESCE((cur_value #>> '{}')::numeric, 0) + p_delta;
        -- a number a JSON reader (and the broker) cannot hold is refused, not
        -- stored: the whole call fails with a 400 naming delta
        IF abs(candidate) > 1.7976931348623157e308 THEN
            RAISE EXCEPTION 'delta: incr of key % gives a number beyond the range of a JSON number (about 1.8e308)',
                quote_literal(p_key) USING ERRCODE = 'P0001';
        END IF;
        IF (p_min IS NOT NULL AND candidate < p_min)
           OR (p_max IS NOT NULL AND candidate > p_max) THEN
            RETURN QUERY SELECT false, 'limit'::text, cur_value, cur_version;
            RETURN;
        END IF;
        new_value := to_jsonb(trim_scale(candidate));
        new_version := nextval('queen.kv_version_seq');
        -- a live row keeps its expiry; an upsert (not an UPDATE) so that a
        -- row the pruner removed meanwhile is written back, not lost
        INSERT INTO queen.kv AS k (ns, key, value, version, expires_at, updated_at)
        VALUES (p_ns, p_key, new_value, new_version,
                CASE WHEN live THEN cur_expiry ELSE expiry END, p_now)
        ON CONFLICT (ns, key) DO UPDATE
           SET value = EXCLUDED.value, version = EXCLUDED.version,
               expires_at = EXCLUDED.expires_at, updated_at = EXCLUDED.updated_at;
        RETURN QUERY SELECT true, NULL::text, new_value, new_version;
        RETURN;
    END IF;

    IF p_op IN ('put', 'putIfAbsent') THEN
        new_version := nextval('queen.kv_version_seq');
        INSERT INTO queen.kv AS k (ns, key, value, version, expires_at, updated_at)
        VALUES (p_ns, p_key, p_value, new_version, expiry, p_now)
        ON CONFLICT (ns, key) DO UPDATE
           SET value = EXCLUDED.value, version = EXCLUDED.version,
               expires_at = EXCLUDED.expires_at, updated_at = EXCLUDED.updated_at;
        RETURN QUERY SELECT true, NULL::text, p_value, new_version;
        RETURN;
    END IF;

    RAISE EXCEPTION 'queen.kv_write: unknown op %', p_op USING ERRCODE = '22023';
END;
$$;
