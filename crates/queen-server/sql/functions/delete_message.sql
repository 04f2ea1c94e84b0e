-- queen.delete_message(partition, transaction_id): deletes one message
-- through the admin API. Its offset is recorded in the segment's
-- deleted_offsets, so pops skip it from now on, and its key is dropped, so
-- the transactionId is free again. Returns false when the message is
-- unknown.
-- Called by: `Store::delete_message`.

CREATE OR REPLACE FUNCTION queen.delete_message(p_partition_id uuid, p_transaction_id text)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_offset bigint;
BEGIN
    DELETE FROM queen.message_keys k
    WHERE k.partition_id = p_partition_id AND k.transaction_id = p_transaction_id
    RETURNING k.msg_offset INTO v_offset;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    UPDATE queen.segments s
    SET deleted_offsets = array_append(coalesce(s.deleted_offsets, '{}'), v_offset)
    WHERE s.partition_id = p_partition_id AND s.last_offset >= v_offset AND s.first_offset <= v_offset;
    RETURN true;
END;
$$;
