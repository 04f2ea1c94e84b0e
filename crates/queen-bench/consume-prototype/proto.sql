-- Prototypes of a cheaper consume path (docs/benchmarks.md, "Consume path:
-- where the time goes and the plan"). Measured with pgbench against a private
-- PostgreSQL; not part of the server. Load with psql -f into a migrated database.

CREATE SCHEMA IF NOT EXISTS proto;

-- Pop: ONE statement finds, locks and leases the first free candidate (no
-- per-candidate function call, no failed claims: rows locked by a concurrent
-- pop are skipped, leased ones filtered before locking), ONE statement reads
-- the leased range as stored (array slices of 1-2 segment rows).
CREATE OR REPLACE FUNCTION proto.pop_fast(p_queue_id uuid, p_group text, p_batch integer,
        p_lease_id uuid, p_lease_seconds integer, p_holder text, p_hints text[])
RETURNS TABLE(partition_id uuid, partition_name text, first_offset bigint, message_ids uuid[],
              transaction_ids text[], trace_ids uuid[], payloads text[], producer_subs text[],
              created_at timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    v_pid   uuid;
    v_name  text;
    v_start bigint;
    v_end   bigint;
BEGIN
    WITH c AS (
        SELECT lc.partition_id, pt.name,
               greatest(lc.committed_offset + 1, pt.low_offset) AS s,
               least(pt.next_offset - 1, greatest(lc.committed_offset + 1, pt.low_offset) + p_batch - 1) AS e
        FROM unnest(p_hints) WITH ORDINALITY AS h(name, n)
        JOIN queen.partitions pt ON pt.queue_id = p_queue_id AND pt.name = h.name
        JOIN queen.log_consumers lc ON lc.partition_id = pt.id AND lc.consumer_group = p_group
        WHERE (lc.lease_expires_at IS NULL OR lc.lease_expires_at <= now())
          AND pt.next_offset > greatest(lc.committed_offset + 1, pt.low_offset)
        ORDER BY lc.last_consumed_at NULLS FIRST, h.n
        LIMIT 1
        FOR UPDATE OF lc SKIP LOCKED)
    UPDATE queen.log_consumers l
    SET lease_id = p_lease_id, lease_end_offset = c.e,
        lease_expires_at = now() + make_interval(secs => CASE WHEN p_lease_seconds > 0 THEN p_lease_seconds ELSE 60 END),
        lease_holder = p_holder
    FROM c
    WHERE l.partition_id = c.partition_id AND l.consumer_group = p_group
    RETURNING c.partition_id, c.name, c.s, c.e INTO v_pid, v_name, v_start, v_end;
    IF NOT FOUND THEN
        RETURN;   -- the caller reports drained hints on an empty pop only
    END IF;
    -- (design: a hole, deleted offsets or a delayed segment in the range
    -- falls back to the row path; never the case in this benchmark)
    RETURN QUERY
        SELECT v_pid, v_name, greatest(sg.first_offset, v_start),
               sg.message_ids[greatest(v_start - sg.first_offset + 1, 1) : v_end - sg.first_offset + 1],
               sg.transaction_ids[greatest(v_start - sg.first_offset + 1, 1) : v_end - sg.first_offset + 1],
               sg.trace_ids[greatest(v_start - sg.first_offset + 1, 1) : v_end - sg.first_offset + 1],
               sg.payloads[greatest(v_start - sg.first_offset + 1, 1) : v_end - sg.first_offset + 1],
               sg.producer_subs[greatest(v_start - sg.first_offset + 1, 1) : v_end - sg.first_offset + 1],
               sg.created_at
        FROM queen.segments sg
        WHERE sg.partition_id = v_pid AND sg.last_offset >= v_start AND sg.first_offset <= v_end
        ORDER BY sg.last_offset;
END;
$$;

-- Ack of a whole lease: ONE statement moves the cursor when the acked ids
-- are exactly the lease's messages in order (checked against the segments'
-- arrays, no per-message SQL). NULL: not that case, use ack_batch.
CREATE OR REPLACE FUNCTION proto.ack_lease(p_group text, p_partition_id uuid, p_lease_id uuid,
        p_txn_ids text[])
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_done bigint;
BEGIN
    UPDATE queen.log_consumers lc
    SET committed_offset = lc.lease_end_offset, lease_expires_at = NULL, retry_count = 0,
        total_consumed = lc.total_consumed + (lc.lease_end_offset - lc.committed_offset),
        batches_consumed = lc.batches_consumed + 1, last_consumed_at = now()
    WHERE lc.partition_id = p_partition_id AND lc.consumer_group = p_group
      AND lc.lease_id = p_lease_id AND lc.lease_expires_at > now()
      AND lc.lease_end_offset - lc.committed_offset = cardinality(p_txn_ids)
      AND p_txn_ids = ARRAY(
            SELECT u.t
            FROM queen.segments sg,
                 unnest(sg.transaction_ids[greatest(lc.committed_offset + 2 - sg.first_offset, 1)
                                           : lc.lease_end_offset + 1 - sg.first_offset])
                     WITH ORDINALITY AS u(t, n)
            WHERE sg.partition_id = p_partition_id AND sg.last_offset > lc.committed_offset
              AND sg.first_offset <= lc.lease_end_offset
            ORDER BY sg.last_offset, u.n)
    RETURNING lc.committed_offset INTO v_done;
    RETURN v_done;
END;
$$;
