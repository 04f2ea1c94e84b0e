-- queen.lease_key(lease_id): the cursor_key a lease id minted by
-- queen.lease_mint starts with. Any other id (a lease shared by several
-- partitions) reads as some number too, which then names no row holding it.
-- Called by: queen.extend_lease.

CREATE OR REPLACE FUNCTION queen.lease_key(p_lease_id uuid)
RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT ('x' || encode(substring(uuid_send(p_lease_id) FROM 1 FOR 8), 'hex'))::bit(64)::bigint
$$;
