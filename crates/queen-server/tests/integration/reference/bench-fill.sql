INSERT INTO queen.queues (id, name, namespace, task) VALUES ('a0000000-0000-4000-8000-00000000be00', 'bench', 'bench', '');
INSERT INTO queen.partitions (id, queue_id, name, created_at)
  SELECT gen_random_uuid(), 'a0000000-0000-4000-8000-00000000be00', 'p-' || lpad(i::text, 4, '0'), now() - interval '1 day'
  FROM generate_series(1, 1000) i;
-- 1 000 messages per partition, one push (one created_at) per 10 messages, ids ascending within a push
INSERT INTO queen.messages (id, transaction_id, partition_id, payload, created_at)
  SELECT gen_random_uuid(), 't-' || n, p.id,
         jsonb_build_object('n', n, 'partition', p.name, 'body', repeat('x', 200)),
         now() - interval '1 day' + (n / 10) * interval '1 millisecond'
  FROM queen.partitions p, generate_series(1, 1000) n;
-- a group half-way on every partition, queue mode at the start
INSERT INTO queen.partition_consumers (partition_id, consumer_group, last_consumed_id, last_consumed_created_at)
  SELECT DISTINCT ON (m.partition_id) m.partition_id, 'bench-g', m.id, m.created_at
  FROM queen.messages m WHERE m.transaction_id = 't-500' ORDER BY m.partition_id, m.created_at, m.id;
ANALYZE;
