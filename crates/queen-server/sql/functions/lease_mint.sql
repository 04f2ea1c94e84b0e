-- queen.lease_mint(key, nonce): the id of a lease of one cursor row: the
-- row's cursor_key (8 bytes, big-endian) followed by the last 8 bytes of
-- `nonce` (a random v4 UUID from the broker), so that two leases of one row
-- differ and queen.extend_lease finds the row from the id alone
-- (queen.lease_key reads the key back).
-- Called by: queen.claim_partition and sql/statements/consume_flight.sql,
-- whenever they lease one partition.

CREATE OR REPLACE FUNCTION queen.lease_mint(p_key bigint, p_nonce uuid)
RETURNS uuid
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT encode(int8send(p_key) || substring(uuid_send(p_nonce) FROM 9 FOR 8), 'hex')::uuid
$$;
