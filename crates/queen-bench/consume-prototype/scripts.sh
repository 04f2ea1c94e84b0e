#!/usr/bin/env bash
# Writes the pgbench scripts of docs/benchmarks.md, "Consume path: where the
# time goes and the plan", for queue QUEUE_ID (name QUEUE, 16 partitions
# p0..p15, queue mode) into DIR:
#   old_bB.sql  today's functions, as the broker calls them: pop_queue, then ack_batch
#   new_bB.sql  proto.pop_fast + proto.ack_lease (proto.sql, PL/pgSQL)
#   st_bB.sql   the same two steps as single statements (what the broker would prepare)
#   grp_b1.sql  st_b1 for 8 pops at once (one claim statement, one ack statement)
#   floor.sql   two single-row cursor updates: the least a pop and an ack can cost
# Each pgbench transaction is one pop (and its ack when it got messages).
#   scripts.sh QUEUE_ID QUEUE DIR
set -euo pipefail
qid=$1 queue=$2 dir=$3
hints="{p0,p1,p2,p3,p4,p5,p6,p7,p8,p9,p10,p11,p12,p13,p14,p15}"
g=__QUEUE_MODE__
mkdir -p "$dir"
claim() { # $1 batch, $2 partitions per statement
  echo "WITH pick AS (SELECT lc.partition_id, pt.name, greatest(lc.committed_offset + 1, pt.low_offset) AS s, least(pt.next_offset - 1, greatest(lc.committed_offset + 1, pt.low_offset) + $1 - 1) AS e FROM unnest('$hints'::text[]) WITH ORDINALITY AS h(name, n) JOIN queen.partitions pt ON pt.queue_id = '$qid' AND pt.name = h.name JOIN queen.log_consumers lc ON lc.partition_id = pt.id AND lc.consumer_group = '$g' WHERE (lc.lease_expires_at IS NULL OR lc.lease_expires_at <= now()) AND pt.next_offset > greatest(lc.committed_offset + 1, pt.low_offset) ORDER BY lc.last_consumed_at NULLS FIRST, h.n LIMIT $2 FOR UPDATE OF lc SKIP LOCKED), c AS (UPDATE queen.log_consumers l SET lease_id = :lease::uuid, lease_end_offset = pick.e, lease_expires_at = now() + interval '300 s', lease_holder = 'bench' FROM pick WHERE l.partition_id = pick.partition_id AND l.consumer_group = '$g' RETURNING pick.partition_id, pick.name, pick.s, pick.e), seg AS (SELECT c.partition_id, c.name, greatest(sg.first_offset, c.s) AS first, sg.message_ids[greatest(c.s - sg.first_offset + 1, 1) : c.e - sg.first_offset + 1] AS mids, sg.transaction_ids[greatest(c.s - sg.first_offset + 1, 1) : c.e - sg.first_offset + 1] AS txns, sg.trace_ids[greatest(c.s - sg.first_offset + 1, 1) : c.e - sg.first_offset + 1] AS trs, sg.payloads[greatest(c.s - sg.first_offset + 1, 1) : c.e - sg.first_offset + 1] AS pls, sg.producer_subs[greatest(c.s - sg.first_offset + 1, 1) : c.e - sg.first_offset + 1] AS subs, sg.created_at, sg.deleted_offsets, sg.last_offset FROM c JOIN queen.segments sg ON sg.partition_id = c.partition_id AND sg.last_offset >= c.s AND sg.last_offset <= (SELECT min(x.last_offset) FROM queen.segments x WHERE x.partition_id = c.partition_id AND x.last_offset >= c.e))"
}
for b in 1 10 100; do
  cat > "$dir/old_b$b.sql" <<EOF
SELECT gen_random_uuid() AS lease \gset
SELECT count(*) AS n, min(partition_id::text) AS pid, array_agg(transaction_id ORDER BY msg_offset) AS txns FROM queen.pop_queue('$qid', '$queue', '$g', $b, 1, :lease::uuid, 300, false, 0, 0, '', '', 'bench', '$hints', true, false) WHERE msg_offset IS NOT NULL \gset
\if :n > 0
SELECT count(*) FROM queen.ack_batch('$g', array_fill(:pid::uuid, ARRAY[:n::int]), :txns::text[], array_fill(:lease::uuid, ARRAY[:n::int]), array_fill('completed'::text, ARRAY[:n::int]), array_fill(NULL::text, ARRAY[:n::int]), false);
\endif
EOF
  cat > "$dir/new_b$b.sql" <<EOF
SELECT gen_random_uuid() AS lease \gset
SELECT count(*) AS n, min(partition_id::text) AS pid, array_agg(t ORDER BY o) AS txns FROM (SELECT p.partition_id, u.t, p.first_offset + u.k AS o FROM proto.pop_fast('$qid', '$g', $b, :lease::uuid, 300, 'bench', '$hints') p, unnest(p.transaction_ids) WITH ORDINALITY u(t, k)) x \gset
\if :n > 0
SELECT proto.ack_lease('$g', :pid::uuid, :lease::uuid, :txns::text[]);
\endif
EOF
  cat > "$dir/st_b$b.sql" <<EOF
SELECT gen_random_uuid() AS lease \gset
$(claim $b 1) SELECT count(*) AS n, min(partition_id::text) AS pid, array_agg(u.t ORDER BY seg.last_offset, u.k) AS txns FROM seg, unnest(seg.txns) WITH ORDINALITY u(t, k) \gset
\if :n > 0
UPDATE queen.log_consumers lc SET committed_offset = lc.lease_end_offset, lease_expires_at = NULL, retry_count = 0, total_consumed = lc.total_consumed + (lc.lease_end_offset - lc.committed_offset), batches_consumed = lc.batches_consumed + 1, last_consumed_at = now() WHERE lc.partition_id = :pid::uuid AND lc.consumer_group = '$g' AND lc.lease_id = :lease::uuid AND lc.lease_expires_at > now() AND lc.lease_end_offset - lc.committed_offset = cardinality(:txns::text[]) AND :txns::text[] = ARRAY(SELECT u.t FROM queen.segments sg, unnest(sg.transaction_ids[greatest(lc.committed_offset + 2 - sg.first_offset, 1) : lc.lease_end_offset + 1 - sg.first_offset]) WITH ORDINALITY AS u(t, n) WHERE sg.partition_id = :pid::uuid AND sg.last_offset > lc.committed_offset AND sg.last_offset <= (SELECT min(x.last_offset) FROM queen.segments x WHERE x.partition_id = :pid::uuid AND x.last_offset >= lc.lease_end_offset) ORDER BY sg.last_offset, u.n) RETURNING lc.committed_offset;
\endif
EOF
done
cat > "$dir/grp_b1.sql" <<EOF
SELECT gen_random_uuid() AS lease \gset
$(claim 1 8) SELECT count(*) AS n, array_agg(partition_id ORDER BY partition_id) AS pids, array_agg(txns[1] ORDER BY partition_id) AS txns FROM seg \gset
\if :n > 0
UPDATE queen.log_consumers lc SET committed_offset = lc.lease_end_offset, lease_expires_at = NULL, retry_count = 0, total_consumed = lc.total_consumed + (lc.lease_end_offset - lc.committed_offset), batches_consumed = lc.batches_consumed + 1, last_consumed_at = now() FROM unnest(:pids::uuid[], :txns::text[]) AS a(pid, txn) WHERE lc.partition_id = a.pid AND lc.consumer_group = '$g' AND lc.lease_id = :lease::uuid AND lc.lease_expires_at > now() AND lc.lease_end_offset = lc.committed_offset + 1 AND a.txn = (SELECT sg.transaction_ids[lc.lease_end_offset - sg.first_offset + 1] FROM queen.segments sg WHERE sg.partition_id = a.pid AND sg.last_offset >= lc.lease_end_offset ORDER BY sg.last_offset LIMIT 1);
\endif
EOF
cat > "$dir/floor.sql" <<EOF
SELECT gen_random_uuid() AS lease \gset
\set p random(0, 15)
UPDATE queen.log_consumers SET lease_holder = 'x' WHERE partition_id = (SELECT id FROM queen.partitions WHERE queue_id = '$qid' AND name = 'p' || :p) AND consumer_group = '$g';
UPDATE queen.log_consumers SET lease_holder = 'y' WHERE partition_id = (SELECT id FROM queen.partitions WHERE queue_id = '$qid' AND name = 'p' || :p) AND consumer_group = '$g';
EOF
