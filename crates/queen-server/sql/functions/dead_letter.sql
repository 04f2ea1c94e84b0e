-- queen.dead_letter(partition, group, offset, error, retries): writes the DLQ
-- entry of one message for one consumer group, copying the message out of
-- its segment so the entry outlives retention. A second entry for the same
-- (partition, group, offset) is ignored.
-- Called by: queen.ack_batch (a `dlq` ack, or `failed` with no retries left).

CREATE OR REPLACE FUNCTION queen.dead_letter(
    p_partition_id uuid, p_group text, p_offset bigint, p_error text, p_retry_count integer
) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO queen.dead_letters (partition_id, consumer_group, msg_offset, message_id,
                                    transaction_id, trace_id, payload, producer_sub,
                                    error_message, retry_count, original_created_at)
    SELECT p_partition_id, p_group, p_offset,
           s.message_ids[i], s.transaction_ids[i], s.trace_ids[i], s.payloads[i],
           s.producer_subs[i], p_error, p_retry_count, s.created_at
    FROM (SELECT sg.*, (p_offset - sg.first_offset + 1)::integer AS i
          FROM queen.segments sg
          WHERE sg.partition_id = p_partition_id AND sg.last_offset >= p_offset
          ORDER BY sg.last_offset LIMIT 1) s
    WHERE s.first_offset <= p_offset
    ON CONFLICT (partition_id, consumer_group, msg_offset) DO NOTHING
$$;
