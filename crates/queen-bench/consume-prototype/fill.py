#!/usr/bin/env python3
"""Pushes PER messages to each of PARTS partitions p0.. of QUEUE through a broker
on 127.0.0.1:6710, 100 per request, payloads of SIZE bytes (random text):
    fill.py QUEUE PARTS PER SIZE TAG
(TAG makes the transactionIds of one fill unique.)"""
import json, sys, urllib.request, random, string, concurrent.futures as cf
queue, parts, per, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
alpha = string.ascii_letters + string.digits
def body(p, b):
    items = []
    for i in range(100):
        pad = ''.join(random.choice(alpha) for _ in range(size - 10))
        items.append({"queue": queue, "partition": f"p{p}", "transactionId": f"{queue}-{p}-{b}-{i}-{sys.argv[5]}", "payload": {"pad": pad}})
    return json.dumps({"items": items}).encode()
def push(args):
    p, b = args
    req = urllib.request.Request("http://127.0.0.1:6710/api/v1/push", data=body(p, b), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        res = json.load(r)
        assert all(x["status"] == "queued" for x in res), res[:2]
jobs = [(p, b) for b in range(per // 100) for p in range(parts)]
with cf.ThreadPoolExecutor(8) as ex:
    list(ex.map(push, jobs))
print("pushed", len(jobs) * 100)
