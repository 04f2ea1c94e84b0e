-- queen.push_batch(...): appends pushed messages to their partitions, one
-- call per push request or group-committed flight. Items arrive as parallel
-- arrays, already free of repeats inside the request.
-- Set-based: a fixed handful of statements however many partitions the call
-- writes to. Missing partitions are created, then all of them are locked in
-- id order (concurrent pushes never deadlock), so offsets are dense and
-- createdAt never moves backwards within a partition. Stored repeats are
-- found with one index probe of message_keys per item (a scalar subquery, so
-- the planner cannot turn it into a scan of the whole table).
-- Returns one row per item (idx is the 1-based array position): 'queued'
-- with the new message id, or 'duplicate' with the id of the message that
-- owns the transactionId already. With p_strict a stored duplicate raises
-- unique_violation instead (transactions).
-- p_skip (NULL for every call but queen.push_bounded's) lists positions
-- not to append: items refused by their queue's maxSize. They create no
-- partition and get no row.
-- The fresh messages of a queue with a maxSize are counted in
-- queen.queue_fill under p_slot: 4 (the default) for calls holding no slot
-- of queen.push_bounded, the slot held otherwise; NULL counts nothing (the
-- optimistic queen.push_bounded counts after taking its slot).
-- p_created_ats (NULL for every push path but the importer) gives items
-- their createdAt; each is raised to the partition's newest time and to the
-- items before it, so createdAt still never moves backwards, and the items
-- of one partition with one time make one segment.
-- Called by: the store's push path (`append_with`: the batcher's flights,
-- and pushes inside transactions), queen.push_bounded (pushes held to a
-- maxSize) and `queen-server import` (`store/import/target.rs`, through
-- `append_dated`).

CREATE OR REPLACE FUNCTION queen.push_batch(
    p_queue_ids      uuid[],
    p_partitions     text[],
    p_message_ids    uuid[],
    p_txn_ids        text[],
    p_trace_ids      uuid[],
    p_payloads       text[],
    p_producer_subs  text[],
    p_strict         boolean,
    p_created_ats    timestamptz[],
    p_skip           integer[] DEFAULT NULL,
    p_slot           smallint DEFAULT 4
) RETURNS TABLE (idx integer, status text, message_id uuid, partition_id uuid)
LANGUAGE plpgsql AS $$
DECLARE
    v_now   timestamptz := clock_timestamp();
    v_pids  uuid[];
    v_qids  uuid[];
    v_names text[];
    v_nexts bigint[];
    v_lasts timestamptz[];
    v_dup   text;
BEGIN
    -- 1. every partition exists
    INSERT INTO queen.partitions (id, queue_id, name)
    SELECT gen_random_uuid(), d.q, d.p
    FROM (SELECT DISTINCT t.q, t.p FROM unnest(p_queue_ids, p_partitions) WITH ORDINALITY AS t(q, p, i)
          WHERE p_skip IS NULL OR t.i <> ALL (p_skip)) d
    WHERE NOT EXISTS (SELECT 1 FROM queen.partitions pt WHERE pt.queue_id = d.q AND pt.name = d.p)
    ON CONFLICT (queue_id, name) DO NOTHING;

    -- 2. lock them in id order (concurrent pushes never deadlock) and read their offsets
    SELECT array_agg(l.id ORDER BY l.id), array_agg(l.queue_id ORDER BY l.id),
           array_agg(l.name ORDER BY l.id), array_agg(l.next_offset ORDER BY l.id),
           array_agg(l.last_created_at ORDER BY l.id)
    INTO v_pids, v_qids, v_names, v_nexts, v_lasts
    FROM (SELECT pt.id, pt.queue_id, pt.name, pt.next_offset, pt.last_created_at
          FROM queen.partitions pt
          JOIN (SELECT DISTINCT t.q, t.p
                FROM unnest(p_queue_ids, p_partitions) WITH ORDINALITY AS t(q, p, i)
                WHERE p_skip IS NULL OR t.i <> ALL (p_skip)) d
            ON pt.queue_id = d.q AND pt.name = d.p
          ORDER BY pt.id
          FOR UPDATE OF pt) l;

    IF p_strict THEN
        SELECT t.txn INTO v_dup
        FROM unnest(p_queue_ids, p_partitions, p_txn_ids) AS t(q, p, txn)
        JOIN unnest(v_pids, v_qids, v_names) AS x(pid, qid, pname) ON x.qid = t.q AND x.pname = t.p
        WHERE EXISTS (SELECT 1 FROM queen.message_keys k
                      WHERE k.partition_id = x.pid AND k.transaction_id = t.txn)
        LIMIT 1;
        IF FOUND THEN
            RAISE unique_violation USING MESSAGE =
                format('duplicate key value violates unique constraint "message_keys_pkey": transactionId %s already exists', v_dup);
        END IF;
    END IF;

    -- 3. classify, append and move the partitions forward, in one statement
    RETURN QUERY
    WITH parts AS (
        SELECT * FROM unnest(v_pids, v_qids, v_names, v_nexts, v_lasts)
                      AS x(pid, qid, pname, nxt, lastc)
    ), items AS (
        SELECT t.i::integer AS i, pa.pid, pa.nxt,
               greatest(coalesce(p_created_ats[t.i], v_now),
                        coalesce(pa.lastc, '-infinity'::timestamptz)) AS ca
        FROM unnest(p_queue_ids, p_partitions) WITH ORDINALITY AS t(q, p, i)
        JOIN parts pa ON pa.qid = t.q AND pa.pname = t.p
        WHERE p_skip IS NULL OR t.i <> ALL (p_skip)
    ), marked AS (
        SELECT it.i, it.pid, it.nxt, it.ca,
               (SELECT k.message_id FROM queen.message_keys k
                WHERE k.partition_id = it.pid AND k.transaction_id = p_txn_ids[it.i]) AS dup_id
        FROM items it
    ), fresh AS (
        SELECT m.i, m.pid,
               max(m.ca) OVER (PARTITION BY m.pid ORDER BY m.i) AS ca,
               m.nxt - 1 + row_number() OVER (PARTITION BY m.pid ORDER BY m.i) AS off
        FROM marked m
        WHERE m.dup_id IS NULL
    ), ins_keys AS (
        INSERT INTO queen.message_keys (partition_id, transaction_id, msg_offset, message_id)
        SELECT f.pid, p_txn_ids[f.i], f.off, p_message_ids[f.i] FROM fresh f
    ), ins_segments AS (
        INSERT INTO queen.segments (partition_id, last_offset, first_offset, created_at,
                                    message_ids, transaction_ids, trace_ids, payloads, producer_subs)
        SELECT f.pid, max(f.off), min(f.off), f.ca,
               array_agg(p_message_ids[f.i] ORDER BY f.off),
               array_agg(p_txn_ids[f.i] ORDER BY f.off),
               array_agg(p_trace_ids[f.i] ORDER BY f.off),
               array_agg(p_payloads[f.i] ORDER BY f.off),
               CASE WHEN bool_or(p_producer_subs[f.i] IS NOT NULL)
                    THEN array_agg(p_producer_subs[f.i] ORDER BY f.off) END
        FROM fresh f
        GROUP BY f.pid, f.ca
    ), moved AS (
        UPDATE queen.partitions pt
        SET next_offset = s.top + 1, last_created_at = s.ca
        FROM (SELECT f.pid, max(f.off) AS top, max(f.ca) AS ca FROM fresh f GROUP BY f.pid) s
        WHERE pt.id = s.pid
    ), counted AS (
        INSERT INTO queen.queue_fill (queue_id, slot, pushed)
        SELECT n.qid, p_slot, n.n
        FROM (SELECT pa.qid, count(*) AS n FROM fresh f JOIN parts pa ON pa.pid = f.pid
              WHERE p_slot IS NOT NULL GROUP BY pa.qid) n
        JOIN queen.queues q ON q.id = n.qid AND q.max_size > 0
        ON CONFLICT (queue_id, slot) DO UPDATE SET pushed = queen.queue_fill.pushed + excluded.pushed
    )
    SELECT m.i,
           CASE WHEN m.dup_id IS NULL THEN 'queued' ELSE 'duplicate' END,
           coalesce(m.dup_id, p_message_ids[m.i]),
           m.pid
    FROM marked m;
END;
$$;
