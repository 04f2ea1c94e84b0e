-- A reference 0.15 database as the reference's own procedures leave it
-- (shared/spec/reference-schema-0.15.md §2, §3, §6), at fixed times with
-- microseconds, except the live lease, which runs from now.
--
-- orders (push-created: namespace 'orders', task ''):
--   p1: tx-1..tx-3 of one push (one created_at, ids break the tie), tx-4,
--       tx-5 (a smaller id than tx-4, a later time: order is by time first),
--       tx-6 (a JSON string payload); tx-1 carries a traceId and two traces.
--     cg1: cursor on tx-2, a live lease of 2 (tx-3, tx-4: delivered again).
--     __QUEUE_MODE__: cursor on tx-4, a lease that expired (not a lease).
--     cg-new (mode new at 10:00:03): cursor moved onto tx-5 by its first pop.
--   p2: o2-1..o2-4, o2-4 stamped exactly at cg-new's start (counts as after).
--     cg1: cursor on o2-4 (all consumed). cg-new: seeded row, cursor unset.
--     no queue-mode row: everything pending.
--   empty: no messages (a real partition), cg1 seeded with an unset cursor.
-- jobs (configured: namespace '', retryLimit 1, encryption on):
--   Default: j-1, j-2, j-4 sealed the reference's way (AES-256-GCM under key
--     000102…1f, the first 12 of 16 IV bytes as nonce; jsonb key order),
--     j-3 in clear (a queue may hold a mix).
--     __QUEUE_MODE__: j-1 dead-lettered ('boom', twice: two rows to fold),
--       cursor on j-1. workers: j-2 dead-lettered ('Retries exhausted').
-- Besides: a subscription scoped to a namespace (not importable), a query
-- of the streams engine (not imported), derived and telemetry rows (never
-- read), both maintenance flags off.

INSERT INTO queen.queues (id, name, namespace, task, created_at) VALUES
    ('a0000000-0000-4000-8000-000000000001', 'orders', 'orders', '', '2026-11-30 09:59:59.000001+00');
INSERT INTO queen.queues (id, name, namespace, task, lease_time, retry_limit, retry_delay, ttl, priority,
                          dead_letter_queue, dlq_after_max_retries, delayed_processing, window_buffer,
                          retention_seconds, completed_retention_seconds, retention_enabled,
                          encryption_enabled, max_wait_time_seconds, max_queue_size, created_at) VALUES
    ('a0000000-0000-4000-8000-000000000002', 'jobs', '', '', 60, 1, 2500, 7200, 5,
     true, true, 0, 0, 86400, 3600, true, true, 0, 10000, '2026-11-30 09:59:59.500000+00');

INSERT INTO queen.partitions (id, queue_id, name, created_at, last_activity) VALUES
    ('b0000000-0000-4000-8000-000000000001', 'a0000000-0000-4000-8000-000000000001', 'p1', '2026-11-30 10:00:00.100001+00', '2026-11-30 10:00:00.100001+00'),
    ('b0000000-0000-4000-8000-000000000002', 'a0000000-0000-4000-8000-000000000001', 'p2', '2026-11-30 10:00:00.500000+00', '2026-11-30 10:00:00.500000+00'),
    ('b0000000-0000-4000-8000-000000000003', 'a0000000-0000-4000-8000-000000000001', 'empty', '2026-11-30 10:00:00.700000+00', '2026-11-30 10:00:00.700000+00'),
    ('b0000000-0000-4000-8000-000000000004', 'a0000000-0000-4000-8000-000000000002', 'Default', '2026-11-30 09:59:59.500000+00', '2026-11-30 09:59:59.500000+00');

INSERT INTO queen.messages (id, transaction_id, trace_id, partition_id, payload, created_at, is_encrypted, producer_sub) VALUES
    ('019ad000-0000-7000-8000-000000000001', 'tx-1', '11111111-1111-4111-8111-111111111111', 'b0000000-0000-4000-8000-000000000001', '{"n": 1}', '2026-11-30 10:00:00.100001+00', false, NULL),
    ('019ad000-0000-7001-8000-000000000002', 'tx-2', NULL, 'b0000000-0000-4000-8000-000000000001', '{"n": 2}', '2026-11-30 10:00:00.100001+00', false, NULL),
    ('019ad000-0000-7002-8000-000000000003', 'tx-3', NULL, 'b0000000-0000-4000-8000-000000000001', '{"n": 3}', '2026-11-30 10:00:00.100001+00', false, NULL),
    ('019ad000-0000-7005-8000-000000000004', 'tx-4', NULL, 'b0000000-0000-4000-8000-000000000001', '{"n": 4, "big": 12345678901234567890}', '2026-11-30 10:00:01.200002+00', false, NULL),
    ('019ad000-0000-7004-8000-000000000005', 'tx-5', NULL, 'b0000000-0000-4000-8000-000000000001', '{"n": 5}', '2026-11-30 10:00:02.300003+00', false, NULL),
    ('019ad000-0000-7006-8000-000000000006', 'tx-6', NULL, 'b0000000-0000-4000-8000-000000000001', '"six"', '2026-11-30 10:00:05.000000+00', false, NULL),
    ('019ad000-0001-7000-8000-000000000001', 'o2-1', NULL, 'b0000000-0000-4000-8000-000000000002', '{"m": 1}', '2026-11-30 10:00:00.500000+00', false, 'alice'),
    ('019ad000-0001-7000-8000-000000000002', 'o2-2', NULL, 'b0000000-0000-4000-8000-000000000002', '{"m": 2}', '2026-11-30 10:00:00.600000+00', false, 'alice'),
    ('019ad000-0001-7000-8000-000000000003', 'o2-3', NULL, 'b0000000-0000-4000-8000-000000000002', 'null', '2026-11-30 10:00:02.900000+00', false, NULL),
    ('019ad000-0001-7000-8000-000000000004', 'o2-4', NULL, 'b0000000-0000-4000-8000-000000000002', '{"m": 4}', '2026-11-30 10:00:03.000000+00', false, NULL),
    ('019ad000-0002-7000-8000-000000000001', 'j-1', NULL, 'b0000000-0000-4000-8000-000000000004',
     '{"iv": "EREREREREREREREREREREQ==", "authTag": "dc/8cHfioLwVvZ6uTUIK8w==", "encrypted": "+0L+0NoiFZ8V"}', '2026-11-30 10:01:00.000001+00', true, NULL),
    ('019ad000-0002-7000-8000-000000000002', 'j-2', NULL, 'b0000000-0000-4000-8000-000000000004',
     '{"iv": "IiIiIiIiIiIiIiIiIiIiIg==", "authTag": "gsKd8yGAo50NH7rqjvV7EA==", "encrypted": "BjZUqQzSoCirv/zP7IuHCeRcRX4ppqg="}', '2026-11-30 10:01:00.000002+00', true, NULL),
    ('019ad000-0002-7000-8000-000000000003', 'j-3', NULL, 'b0000000-0000-4000-8000-000000000004', '{"job": 3}', '2026-11-30 10:01:00.000003+00', false, NULL),
    ('019ad000-0002-7000-8000-000000000004', 'j-4', NULL, 'b0000000-0000-4000-8000-000000000004',
     '{"iv": "ZGVmZ2hpamtsbW5vcHFycw==", "authTag": "qWeoGjHFGeXugN20hWhgfw==", "encrypted": "Ey/yRB+GI+wcPw=="}', '2026-11-30 10:01:00.000004+00', true, NULL);

INSERT INTO queen.partition_consumers (partition_id, consumer_group, last_consumed_id, last_consumed_created_at,
        last_consumed_at, total_messages_consumed, total_batches_consumed, worker_id, lease_acquired_at,
        lease_expires_at, batch_size, acked_count, batch_retry_count) VALUES
    -- cg1 on p1: mid-way, a live lease of 2 after the cursor
    ('b0000000-0000-4000-8000-000000000001', 'cg1', '019ad000-0000-7001-8000-000000000002', '2026-11-30 10:00:00.100001+00',
     '2026-11-30 10:05:00+00', 2, 0, '019ad0ff-0000-7000-8000-0000000000c1', now() - interval '10 seconds',
     now() + interval '1 hour', 2, 0, 0),
    -- queue mode on p1: an expired lease is no lease
    ('b0000000-0000-4000-8000-000000000001', '__QUEUE_MODE__', '019ad000-0000-7005-8000-000000000004', '2026-11-30 10:00:01.200002+00',
     '2026-11-30 10:06:00+00', 4, 0, '019ad0ff-0000-7000-8000-0000000000c2', now() - interval '2 hours',
     now() - interval '1 hour', 1, 0, 0),
    -- cg-new on p1: its first pop (mode new) moved the cursor onto the last message before its start
    ('b0000000-0000-4000-8000-000000000001', 'cg-new', '019ad000-0000-7004-8000-000000000005', '2026-11-30 10:00:02.300003+00',
     '2026-11-30 10:00:03+00', 0, 0, NULL, NULL, NULL, 0, 0, 0),
    -- cg1 on p2: everything consumed (batch counters stale, no lease)
    ('b0000000-0000-4000-8000-000000000002', 'cg1', '019ad000-0001-7000-8000-000000000004', '2026-11-30 10:00:03.000000+00',
     '2026-11-30 10:07:00+00', 4, 0, NULL, NULL, NULL, 4, 4, 0),
    -- cg-new on p2: seeded by the subscription, cursor unset
    ('b0000000-0000-4000-8000-000000000002', 'cg-new', '00000000-0000-0000-0000-000000000000', NULL,
     '2026-11-30 10:00:03+00', 0, 0, NULL, NULL, NULL, 0, 0, 0),
    -- cg1 on the empty partition
    ('b0000000-0000-4000-8000-000000000003', 'cg1', '00000000-0000-0000-0000-000000000000', NULL,
     NULL, 0, 0, NULL, NULL, NULL, 0, 0, 0),
    -- jobs, queue mode: j-1 dead-lettered after a failed retry
    ('b0000000-0000-4000-8000-000000000004', '__QUEUE_MODE__', '019ad000-0002-7000-8000-000000000001', '2026-11-30 10:01:00.000001+00',
     '2026-11-30 10:02:05+00', 0, 0, '019ad0ff-0000-7000-8000-0000000000c3', now() - interval '3 hours',
     now() - interval '2 hours', 2, 1, 1),
    -- jobs, workers: j-2 dead-lettered
    ('b0000000-0000-4000-8000-000000000004', 'workers', '019ad000-0002-7000-8000-000000000002', '2026-11-30 10:01:00.000002+00',
     '2026-11-30 10:03:00+00', 1, 0, NULL, NULL, NULL, 2, 2, 0);

INSERT INTO queen.consumer_groups_metadata (consumer_group, queue_name, partition_name, namespace, task,
        subscription_mode, subscription_timestamp, created_at) VALUES
    ('cg-new', 'orders', '', '', '', 'new', '2026-11-30 10:00:03.000000+00', '2026-11-30 10:00:03.000000+00'),
    ('cg-ns', '', '', 'orders', '', 'new', '2026-11-30 10:00:04.000000+00', '2026-11-30 10:00:04.000000+00');

INSERT INTO queen.dead_letter_queue (id, message_id, partition_id, consumer_group, error_message, retry_count,
        original_created_at, failed_at) VALUES
    ('d0000000-0000-4000-8000-000000000001', '019ad000-0002-7000-8000-000000000001', 'b0000000-0000-4000-8000-000000000004',
     '__QUEUE_MODE__', 'boom', 1, '2026-11-30 10:01:00.000001+00', '2026-11-30 10:02:00+00'),
    ('d0000000-0000-4000-8000-000000000002', '019ad000-0002-7000-8000-000000000001', 'b0000000-0000-4000-8000-000000000004',
     '__QUEUE_MODE__', 'boom again', 1, '2026-11-30 10:01:00.000001+00', '2026-11-30 10:02:05+00'),
    ('d0000000-0000-4000-8000-000000000003', '019ad000-0002-7000-8000-000000000002', 'b0000000-0000-4000-8000-000000000004',
     'workers', 'Retries exhausted', 1, '2026-11-30 10:01:00.000002+00', '2026-11-30 10:03:00+00');

INSERT INTO queen.message_traces (id, message_id, partition_id, transaction_id, consumer_group, event_type, data,
        created_at, worker_id) VALUES
    ('e0000000-0000-4000-8000-000000000001', '019ad000-0000-7000-8000-000000000001', 'b0000000-0000-4000-8000-000000000001',
     'tx-1', 'cg1', 'processing', '{"step": 1}', '2026-11-30 10:00:10.000001+00', 'worker-a'),
    ('e0000000-0000-4000-8000-000000000002', '019ad000-0000-7000-8000-000000000001', 'b0000000-0000-4000-8000-000000000001',
     'tx-1', '__QUEUE_MODE__', 'info', '{"step": 2}', '2026-11-30 10:00:11.000002+00', NULL);
INSERT INTO queen.message_trace_names (trace_id, trace_name) VALUES
    ('e0000000-0000-4000-8000-000000000001', 'order-flow'),
    ('e0000000-0000-4000-8000-000000000001', 'tenant-a'),
    ('e0000000-0000-4000-8000-000000000002', 'order-flow');

INSERT INTO queen.system_state (key, value) VALUES
    ('maintenance_mode', '{"enabled": false}'),
    ('pop_maintenance_mode', '{"enabled": false}');

INSERT INTO queen_streams.queries (name, source_queue, sink_queue, config_hash) VALUES
    ('order-counts', 'orders', 'order-counts', 'h1');

-- derived and telemetry: wrong on purpose (an importer must not read them)
INSERT INTO queen.partition_lookup (queue_name, partition_id, last_message_id, last_message_created_at) VALUES
    ('orders', 'b0000000-0000-4000-8000-000000000001', '019ad000-0000-7000-8000-000000000001', '2026-11-30 10:00:00.100001+00');
INSERT INTO queen.messages_consumed (partition_id, consumer_group, messages_completed, messages_failed) VALUES
    ('b0000000-0000-4000-8000-000000000001', 'cg1', 99, 0);
