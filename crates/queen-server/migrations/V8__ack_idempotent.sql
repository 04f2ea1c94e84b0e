-- queen.ack_batch: an ack of a message the group has already committed is an
-- idempotent success whatever lease it names. Before, a retried ack whose first
-- answer was lost got "Invalid or expired lease" once another consumer had
-- leased the partition again, telling the client its ack failed when it had not.

CREATE OR REPLACE FUNCTION queen.ack_batch(
    p_group          text,
    p_partition_ids  uuid[],
    p_txn_ids        text[],
    p_lease_ids      uuid[],
    p_statuses       text[],
    p_errors         text[],
    p_in_tx          boolean
) RETURNS TABLE (idx integer, success boolean, error text, queue_name text,
                 partition_name text, lease_released boolean, dlq boolean)
LANGUAGE plpgsql AS $$
DECLARE
    it         record;
    c          queen.log_consumers%ROWTYPE;
    v_limit    integer;
    v_active   boolean;
    v_status   text;
    v_released uuid[] := '{}';
    g          record;
    v_fast     uuid[] := '{}';
    v_valid    boolean[];
    v_top      bigint;
    v_top_i    integer;
    v_rel      boolean;
    j          integer;
BEGIN
    -- Fast path: a partition whose items are all `completed` acks of known
    -- messages under one lease (or none) needs one cursor update, to the
    -- highest valid offset, instead of one per message. Outcomes are the same
    -- as applying the items one by one in offset order.
    IF NOT p_in_tx THEN
        FOR g IN
            SELECT a.pid, q.name AS qname, pt.name AS pname,
                   array_agg(a.i::integer ORDER BY km.msg_offset, a.i) AS idxs,
                   array_agg(km.msg_offset ORDER BY km.msg_offset, a.i) AS offs,
                   (array_agg(a.lid))[1] AS lid
            FROM unnest(p_partition_ids, p_txn_ids, p_lease_ids, p_statuses)
                 WITH ORDINALITY AS a(pid, txn, lid, st, i)
            JOIN queen.message_keys km ON km.partition_id = a.pid AND km.transaction_id = a.txn
            JOIN queen.partitions pt ON pt.id = a.pid
            JOIN queen.queues q ON q.id = pt.queue_id
            GROUP BY a.pid, q.name, pt.name
            HAVING count(*) > 1
               AND count(*) = (SELECT count(*) FROM unnest(p_partition_ids) AS x(pid) WHERE x.pid = a.pid)
               AND bool_and(lower(coalesce(a.st, 'completed')) IN ('completed', 'success'))
               AND (bool_and(a.lid IS NULL) OR (bool_and(a.lid IS NOT NULL) AND count(DISTINCT a.lid) = 1))
            ORDER BY a.pid
        LOOP
            SELECT * INTO c FROM queen.log_consumers lc
            WHERE lc.partition_id = g.pid AND lc.consumer_group = p_group FOR UPDATE;
            CONTINUE WHEN NOT FOUND;   -- first contact: the one-by-one path creates the cursor
            v_fast := v_fast || g.pid;
            v_active := c.lease_expires_at IS NOT NULL AND c.lease_expires_at > now();
            v_valid := ARRAY(
                SELECT g.lid IS NULL
                       OR o <= c.committed_offset
                       OR (c.lease_id = g.lid AND v_active)
                FROM unnest(g.offs) AS o);
            v_top := NULL;
            v_top_i := NULL;
            FOR j IN 1 .. cardinality(g.idxs) LOOP
                IF v_valid[j] AND g.offs[j] > c.committed_offset AND (v_top IS NULL OR g.offs[j] > v_top) THEN
                    v_top := g.offs[j];
                    v_top_i := g.idxs[j];
                END IF;
            END LOOP;
            v_rel := false;
            IF v_top IS NOT NULL THEN
                v_rel := c.lease_expires_at IS NOT NULL AND v_top >= coalesce(c.lease_end_offset, 0);
                UPDATE queen.log_consumers
                SET committed_offset = v_top,
                    lease_expires_at = CASE WHEN v_rel THEN NULL ELSE lease_expires_at END,
                    retry_count = CASE WHEN v_rel THEN 0 ELSE retry_count END,
                    total_consumed = total_consumed + (v_top - c.committed_offset),
                    batches_consumed = batches_consumed + CASE WHEN v_rel THEN 1 ELSE 0 END,
                    last_consumed_at = now()
                WHERE partition_id = g.pid AND consumer_group = p_group;
            END IF;
            FOR j IN 1 .. cardinality(g.idxs) LOOP
                idx := g.idxs[j]; queue_name := g.qname; partition_name := g.pname; dlq := false;
                success := v_valid[j];
                error := CASE WHEN v_valid[j] THEN NULL ELSE 'Invalid or expired lease' END;
                lease_released := v_rel AND g.idxs[j] = v_top_i;
                RETURN NEXT;
            END LOOP;
        END LOOP;
    END IF;

    FOR it IN
        SELECT a.i::integer AS i, a.pid, a.txn, a.lid, lower(coalesce(a.st, 'completed')) AS st, a.err,
               k.msg_offset AS off, q.name AS qname, pt.name AS pname, q.retry_limit
        FROM unnest(p_partition_ids, p_txn_ids, p_lease_ids, p_statuses, p_errors)
             WITH ORDINALITY AS a(pid, txn, lid, st, err, i)
        LEFT JOIN queen.partitions pt ON pt.id = a.pid
        LEFT JOIN queen.queues q ON q.id = pt.queue_id
        LEFT JOIN queen.message_keys k ON k.partition_id = a.pid AND k.transaction_id = a.txn
        WHERE NOT (a.pid = ANY (v_fast))
        ORDER BY a.pid, k.msg_offset NULLS LAST, a.i
    LOOP
        idx := it.i; queue_name := it.qname; partition_name := it.pname;
        success := false; error := NULL; lease_released := false; dlq := false;
        v_status := CASE it.st WHEN 'success' THEN 'completed' ELSE it.st END;

        IF it.off IS NULL THEN
            error := 'Message not found';
            IF p_in_tx THEN RAISE EXCEPTION 'ACK operation failed: Message not found' USING ERRCODE = 'P0002'; END IF;
            RETURN NEXT; CONTINUE;
        END IF;
        IF v_status NOT IN ('completed', 'failed', 'retry', 'dlq') THEN
            IF p_in_tx THEN RAISE EXCEPTION 'ACK operation failed: Invalid status %', it.st USING ERRCODE = '22023'; END IF;
            RETURN NEXT; CONTINUE;
        END IF;

        SELECT * INTO c FROM queen.log_consumers lc
        WHERE lc.partition_id = it.pid AND lc.consumer_group = p_group FOR UPDATE;
        IF NOT FOUND THEN
            IF it.lid IS NOT NULL THEN
                error := 'Invalid or expired lease';
                IF p_in_tx THEN RAISE EXCEPTION 'ACK operation failed: Invalid or expired lease' USING ERRCODE = 'P0001'; END IF;
                RETURN NEXT; CONTINUE;
            END IF;
            -- first contact through an ack: the cursor starts right before this message
            INSERT INTO queen.log_consumers (partition_id, consumer_group, committed_offset)
            VALUES (it.pid, p_group, it.off - 1);
            SELECT * INTO c FROM queen.log_consumers lc
            WHERE lc.partition_id = it.pid AND lc.consumer_group = p_group FOR UPDATE;
        END IF;

        IF it.off <= c.committed_offset THEN
            -- already done for this group, whatever lease the ack names (an ack
            -- retried after its answer was lost): idempotent success
            success := true;
            RETURN NEXT; CONTINUE;
        END IF;

        v_active := c.lease_expires_at IS NOT NULL AND c.lease_expires_at > now();
        IF it.lid IS NOT NULL AND NOT (c.lease_id = it.lid AND v_active) THEN
            error := 'Invalid or expired lease';
            IF p_in_tx THEN RAISE EXCEPTION 'ACK operation failed: Invalid or expired lease' USING ERRCODE = 'P0001'; END IF;
            RETURN NEXT; CONTINUE;
        END IF;

        success := true;

        IF v_status = 'failed' AND p_in_tx THEN
            v_status := 'dlq';
            c.retry_count := 0;
        END IF;
        IF v_status = 'failed' AND c.retry_count >= coalesce(it.retry_limit, 3) THEN
            v_status := 'dlq';
        END IF;

        IF v_status = 'failed' OR v_status = 'retry' THEN
            -- only the first failure of a batch counts; later ones find the lease gone
            IF NOT (it.pid = ANY (v_released)) THEN
                UPDATE queen.log_consumers
                SET lease_expires_at = NULL,
                    retry_count = retry_count + CASE WHEN v_status = 'failed' THEN 1 ELSE 0 END
                WHERE partition_id = it.pid AND consumer_group = p_group;
                lease_released := c.lease_expires_at IS NOT NULL;
                v_released := v_released || it.pid;
            END IF;
            RETURN NEXT; CONTINUE;
        END IF;

        IF v_status = 'dlq' THEN
            PERFORM queen.dead_letter(it.pid, p_group, it.off,
                                      coalesce(it.err, 'Retries exhausted'), c.retry_count);
            dlq := true;
        END IF;

        -- completed or dead-lettered: the cursor moves to this message
        lease_released := c.lease_expires_at IS NOT NULL AND it.off >= coalesce(c.lease_end_offset, 0);
        UPDATE queen.log_consumers
        SET committed_offset = it.off,
            lease_expires_at = CASE WHEN lease_released THEN NULL ELSE lease_expires_at END,
            retry_count = CASE WHEN lease_released OR dlq THEN 0 ELSE retry_count END,
            total_consumed = total_consumed + (it.off - c.committed_offset),
            batches_consumed = batches_consumed + CASE WHEN lease_released THEN 1 ELSE 0 END,
            last_consumed_at = now()
        WHERE partition_id = it.pid AND consumer_group = p_group;
        RETURN NEXT;
    END LOOP;
END;
$$;
