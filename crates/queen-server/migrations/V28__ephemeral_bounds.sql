-- Issue 33: a broker-wide bound on ephemeral contents, and the collector of
-- idle implicit queues (client-surface-2.6.md §10.5-10.6).
--
-- bytes: the payload bytes of the queue as its last push left them (set by
-- queen.ephemeral_push under the queue row's lock, refreshed by
-- queen.ephemeral_collect, 0 after a reset). Pops and acks that free
-- messages do not lower it at once, so the sum over every queue is never
-- below what is held: the bound a push checks is never exceeded by the
-- counts it reads.
ALTER TABLE queen.ephemeral_queues ADD COLUMN bytes bigint NOT NULL DEFAULT 0;

-- ephemeral_push takes the bound and answers whether it refused for it.
DROP FUNCTION IF EXISTS queen.ephemeral_push(text, text, text[]);
