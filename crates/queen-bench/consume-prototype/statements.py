#!/usr/bin/env python3
"""Writes the pgbench scripts of docs/benchmarks.md, "Consume path, part 2",
into DIR, from the server's own statement files (run from the repository root):
  new_bB.sql  sql/statements/consume_flight.sql twice, as store/consume.rs sends it for a
              flight of one pop and then for a flight of one ack
  old_bB.sql  queen.pop_queue + queen.ack_batch, as before them
for the queue of fill_direct.sql (16 partitions p0..p15, queue mode).
  statements.py DIR"""
import os
import sys

d = sys.argv[1]
os.makedirs(d, exist_ok=True)
qid = '00000000-0000-0000-0000-000000000001'
g = '__QUEUE_MODE__'
hints = "{" + ",".join(f"p{i}" for i in range(16)) + "}"
root = 'crates/queen-server/sql/statements/'


def load(name):
    text = open(root + name).read()
    return "\n".join(l for l in text.split("\n") if not l.lstrip().startswith("--"))


def bind(text, sub):
    for k in sorted(sub, key=len, reverse=True):
        text = text.replace(k, sub[k])
    return text


no_pops = {'$1': 'NULL', '$2': 'NULL', '$3': '0', '$4': "'{}'", '$5': '0', '$6': 'NULL', '$7': "'{}'",
           '$14': 'NULL', '$15': 'NULL', '$16': 'NULL'}
no_acks = {'$8': "'{}'", '$9': "'{}'", '$10': "'{}'", '$11': "'{}'", '$12': "'{}'", '$13': "'{}'"}
for b in (1, 10, 100):
    p = bind(load('consume_flight.sql'), {'$1': f"'{qid}'", '$2': f"'{g}'", '$3': str(b), '$4': 'ARRAY[:lease]',
                                          '$5': '300', '$6': "'bench'", '$7': f"'{hints}'", '$14': "'q16'",
                                          '$15': "'all'", '$16': 'NULL', **no_acks})
    # the broker zips the arrays itself; pgbench needs the ids for the ack in one
    # row, and the lease id the statement minted (queen.lease_mint)
    i = p.index("\nSELECT 'pop'::text AS kind")
    p = (p[:i] + ",\nseg AS (\n" + p[i + 1:] + "\n)\nSELECT count(*) AS n, min(partition_id::text) AS pid, min(lease_id::text) AS minted, "
         "array_agg(u.t ORDER BY seg.first_offset, u.k) AS txns FROM seg, "
         "unnest(seg.transaction_ids) WITH ORDINALITY u(t, k) WHERE seg.kind = 'pop' \\gset")
    a = bind(load('consume_flight.sql'), {**no_pops, '$8': f"ARRAY['{g}']", '$9': 'ARRAY[:pid]::uuid[]',
                                          '$10': 'ARRAY[:minted]::uuid[]', '$11': 'ARRAY[1]',
                                          '$12': 'ARRAY[cardinality(:txns::text[])]', '$13': ':txns'})
    with open(f'{d}/new_b{b}.sql', 'w') as f:
        f.write("SELECT gen_random_uuid() AS lease \\gset\n" + p + "\n\\if :n > 0\n" + a + ";\n\\endif\n")
    with open(f'{d}/old_b{b}.sql', 'w') as f:
        f.write(f"""SELECT gen_random_uuid() AS lease \\gset
SELECT count(*) AS n, min(partition_id::text) AS pid, array_agg(transaction_id ORDER BY msg_offset) AS txns FROM queen.pop_queue('{qid}', 'q16', '{g}', {b}, 1, :lease::uuid, 300, false, 0, 0, '', '', 'bench', '{hints}', true, false) WHERE msg_offset IS NOT NULL \\gset
\\if :n > 0
SELECT count(*) FROM queen.ack_batch('{g}', array_fill(:pid::uuid, ARRAY[:n::int]), :txns::text[], array_fill(:lease::uuid, ARRAY[:n::int]), array_fill('completed'::text, ARRAY[:n::int]), array_fill(NULL::text, ARRAY[:n::int]), false);
\\endif
""")
