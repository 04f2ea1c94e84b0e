-- Reads by offset, POST /api/v1/fetch (store/reads.rs Store::fetch): for each
-- entry (queue, partition, wire offset, byte budget) one 'bounds' row with the
-- partition's high watermark and log start, then up to p_max_records 'record'
-- rows from that offset on. Wire offsets are stored offsets minus one, so wire
-- offset 0 is a partition's first message. At least one record per entry whose
-- offset is below its high watermark, unless the call's own budget is spent.
-- Reads only: no cursor, lease or counter moves. STABLE, so every entry is read
-- in the one snapshot of the calling statement and bounds and records agree.
CREATE OR REPLACE FUNCTION queen.fetch_records(
    p_queues text[],
    p_partitions text[],
    p_offsets bigint[],
    p_max_bytes bigint[],
    p_call_max_bytes bigint,
    p_max_records integer)
RETURNS TABLE (idx integer, kind text, high bigint, low bigint, msg_offset bigint,
               transaction_id text, payload text, created_at timestamptz)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    i integer;
    v_queue uuid;
    v_pid uuid;
    v_next bigint;
    v_low bigint;
    v_from bigint;
    v_budget bigint;
    v_call_left bigint := p_call_max_bytes;
    v_count integer;
    v_seg record;
    v_off bigint;
    v_len bigint;
BEGIN
    FOR i IN 1 .. coalesce(cardinality(p_queues), 0) LOOP
        idx := i;
        msg_offset := NULL; transaction_id := NULL; payload := NULL; created_at := NULL;
        v_queue := NULL;
        SELECT q.id INTO v_queue FROM queen.queues q WHERE q.name = p_queues[i];
        IF v_queue IS NULL THEN
            kind := 'unknown_queue'; high := 0; low := 0;
            RETURN NEXT;
            CONTINUE;
        END IF;
        SELECT p.id, p.next_offset, p.low_offset INTO v_pid, v_next, v_low
        FROM queen.partitions p WHERE p.queue_id = v_queue AND p.name = p_partitions[i];
        IF NOT FOUND THEN
            kind := 'bounds'; high := 0; low := 0;
            RETURN NEXT;
            CONTINUE;
        END IF;
        kind := 'bounds'; high := v_next - 1; low := v_low - 1;
        RETURN NEXT;
        -- out of range, at the end, or the call's budget spent: bounds only
        CONTINUE WHEN p_offsets[i] < low OR p_offsets[i] >= high OR v_call_left <= 0;
        v_from := p_offsets[i] + 1;
        v_budget := least(p_max_bytes[i], v_call_left);
        v_count := 0;
        kind := 'record';
        <<segs>>
        FOR v_seg IN
            SELECT s.first_offset, s.last_offset, s.created_at, s.transaction_ids, s.payloads,
                   s.deleted_offsets
            FROM queen.segments s
            WHERE s.partition_id = v_pid AND s.last_offset >= v_from
            ORDER BY s.last_offset
        LOOP
            -- a WHILE loop: an integer FOR loop would narrow offsets to integer
            v_off := greatest(v_from, v_seg.first_offset);
            WHILE v_off <= v_seg.last_offset LOOP
                IF v_seg.deleted_offsets IS NOT NULL AND v_off = ANY (v_seg.deleted_offsets) THEN
                    v_off := v_off + 1;
                    CONTINUE;
                END IF;
                payload := v_seg.payloads[v_off - v_seg.first_offset + 1];
                v_len := octet_length(payload);
                EXIT segs WHEN v_count > 0 AND v_len > v_budget;
                msg_offset := v_off - 1;
                transaction_id := v_seg.transaction_ids[v_off - v_seg.first_offset + 1];
                created_at := v_seg.created_at;
                RETURN NEXT;
                v_count := v_count + 1;
                v_budget := v_budget - v_len;
                v_call_left := v_call_left - v_len;
                v_off := v_off + 1;
                EXIT segs WHEN v_count >= p_max_records OR v_budget <= 0;
            END LOOP;
        END LOOP;
    END LOOP;
END
$$;
