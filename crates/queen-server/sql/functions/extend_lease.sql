-- queen.extend_lease(lease_id, seconds): extends every unexpired partition
-- lease held under a lease id. Returns the earliest new expiry and how many
-- partition leases were extended; when none was, `reason` says why (expired,
-- not active, not found).
-- Called by: `Store::extend_lease`, for lease extension requests.

CREATE OR REPLACE FUNCTION queen.extend_lease(p_lease_id uuid, p_seconds integer)
RETURNS TABLE (expires_at timestamptz, renewed integer, reason text)
LANGUAGE plpgsql AS $$
BEGIN
    WITH up AS (
        UPDATE queen.log_consumers lc
        SET lease_expires_at = greatest(lc.lease_expires_at, now() + make_interval(secs => p_seconds))
        WHERE lc.lease_id = p_lease_id AND lc.lease_expires_at > now()
        RETURNING lc.lease_expires_at
    )
    SELECT min(up.lease_expires_at), count(*)::integer INTO expires_at, renewed FROM up;
    IF renewed > 0 THEN
        reason := NULL;
    ELSIF EXISTS (SELECT 1 FROM queen.log_consumers lc
                  WHERE lc.lease_id = p_lease_id AND lc.lease_expires_at IS NOT NULL) THEN
        reason := 'Lease already expired';
    ELSIF EXISTS (SELECT 1 FROM queen.log_consumers lc WHERE lc.lease_id = p_lease_id) THEN
        reason := 'Lease not active';
    ELSE
        reason := 'Lease not found';
    END IF;
    RETURN NEXT;
END;
$$;
