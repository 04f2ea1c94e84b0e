-- queen.message_at(partition, offset): the message stored at one offset of a
-- partition, read out of its segment. Nothing when retention removed it;
-- `deleted` is true when it was deleted through the admin API.
-- Called by: the store's admin reads (`Store::message_detail`, and the
-- message payload of traces).

CREATE OR REPLACE FUNCTION queen.message_at(p_partition_id uuid, p_offset bigint)
RETURNS TABLE (message_id uuid, transaction_id text, trace_id uuid, payload text,
               producer_sub text, created_at timestamptz, deleted boolean)
LANGUAGE sql STABLE AS $$
    SELECT s.message_ids[i], s.transaction_ids[i], s.trace_ids[i], s.payloads[i],
           s.producer_subs[i], s.created_at,
           coalesce(p_offset = ANY (s.deleted_offsets), false)
    FROM (SELECT sg.*, (p_offset - sg.first_offset + 1)::integer AS i
          FROM queen.segments sg
          WHERE sg.partition_id = p_partition_id AND sg.last_offset >= p_offset
          ORDER BY sg.last_offset LIMIT 1) s
    WHERE s.first_offset <= p_offset
$$;
