-- A queue q16 of 16 partitions, 600 segments of 100 messages of 100 bytes
-- each (960 000 messages), and a queue-mode cursor on each partition, written
-- straight into the tables (no broker needed). For statements.py.
INSERT INTO queen.queues (id, name) VALUES ('00000000-0000-0000-0000-000000000001', 'q16');
INSERT INTO queen.partitions (id, queue_id, name, next_offset)
SELECT ('00000000-0000-0000-0001-' || lpad(p::text, 12, '0'))::uuid, '00000000-0000-0000-0000-000000000001', 'p' || p, 60001
FROM generate_series(0, 15) p;
INSERT INTO queen.segments (partition_id, last_offset, first_offset, created_at, message_ids, transaction_ids, trace_ids, payloads)
SELECT pt.id, s * 100 + 100, s * 100 + 1, now(),
       array(SELECT gen_random_uuid() FROM generate_series(1, 100)),
       array(SELECT 't' || (s * 100 + i) FROM generate_series(1, 100) i),
       array_fill(NULL::uuid, ARRAY[100]),
       array(SELECT '{"x":"' || repeat('a', 90) || '"}' FROM generate_series(1, 100))
FROM queen.partitions pt, generate_series(0, 599) s;
INSERT INTO queen.message_keys
SELECT sg.partition_id, u.t, sg.first_offset + u.n - 1, gen_random_uuid()
FROM queen.segments sg, unnest(sg.transaction_ids) WITH ORDINALITY u(t, n);
INSERT INTO queen.log_consumers (partition_id, consumer_group, committed_offset)
SELECT id, '__QUEUE_MODE__', 0 FROM queen.partitions;
ANALYZE;
