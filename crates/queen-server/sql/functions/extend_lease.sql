-- queen.extend_lease(lease_id, seconds): extends every unexpired partition
-- lease held under a lease id. Returns the earliest new expiry and how many
-- partition leases were extended; when none was, `reason` says why (expired,
-- not active, not found).
-- A lease is found without an index on lease_id (migration V24): a lease of
-- one partition names its cursor row's key (queen.lease_key), a lease shared
-- by several partitions is the lease_group of each of its rows. Every row
-- holding the id is one of these: only queen.lease_mint's ids are stored
-- unshared, and a shared id is stored with its lease_group in one update.
-- Called by: `Store::extend_lease`, for lease extension requests.

CREATE OR REPLACE FUNCTION queen.extend_lease(p_lease_id uuid, p_seconds integer)
RETURNS TABLE (expires_at timestamptz, renewed integer, reason text)
LANGUAGE plpgsql AS $$
DECLARE
    v_key     bigint := queen.lease_key(p_lease_id);
    v_held    boolean;
    v_stopped boolean;
BEGIN
    WITH up AS (
        UPDATE queen.log_consumers lc
        SET lease_expires_at = greatest(lc.lease_expires_at, now() + make_interval(secs => p_seconds))
        WHERE (lc.cursor_key = v_key OR lc.lease_group = p_lease_id)
          AND lc.lease_id = p_lease_id AND lc.lease_expires_at > now()
        RETURNING lc.lease_expires_at
    )
    SELECT min(up.lease_expires_at), count(*)::integer INTO expires_at, renewed FROM up;
    IF renewed > 0 THEN
        reason := NULL;
        RETURN NEXT;
        RETURN;
    END IF;
    SELECT count(*) > 0, bool_or(lc.lease_expires_at IS NOT NULL) INTO v_held, v_stopped
    FROM queen.log_consumers lc
    WHERE (lc.cursor_key = v_key OR lc.lease_group = p_lease_id) AND lc.lease_id = p_lease_id;
    reason := CASE WHEN v_stopped THEN 'Lease already expired'
                   WHEN v_held THEN 'Lease not active'
                   ELSE 'Lease not found' END;
    RETURN NEXT;
END;
$$;
