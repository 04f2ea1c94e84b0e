"""Drives a broker for the callgrind count of docs/benchmarks.md ("The broker's
CPU per consumed message at batch 100"): `fill N` pushes N batches of 100
items, each batch into one of 16 partitions in turn; `cycle N` runs N
sequential pops of 100 (wildcard partition, no wait) each followed by the
ack/batch of its messages in queen-mq 2.6.0's body shape, over one
keep-alive connection. A dump directory keeps every answer's bytes.

Usage: consume-callgrind.py PORT QUEUE fill|cycle N [dump_dir]"""
import http.client, json, sys, os

port, queue, mode, n = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
dump = sys.argv[5] if len(sys.argv) > 5 else None
c = http.client.HTTPConnection("127.0.0.1", port)

def req(method, path, body=None):
    headers = {"Content-Type": "application/json"} if body is not None else {}
    c.request(method, path, body=body, headers=headers)
    r = c.getresponse()
    return r.status, r.read()

if mode == "fill":
    # n batches of 100, each into one partition, round robin over 16
    i = 0
    for b in range(n):
        items = []
        for _ in range(100):
            items.append({"queue": queue, "partition": f"p{b % 16}",
                          "payload": {"i": i, "pad": "x" * 80},
                          "transactionId": f"t-{i}"})
            i += 1
        s, body = req("POST", "/api/v1/push", json.dumps({"items": items}))
        assert s in (200, 201), (s, body[:200])
else:
    for k in range(n):
        s, body = req("GET", f"/api/v1/pop/queue/{queue}?batch=100&wait=false")
        assert s == 200, (s, body[:200])
        if dump:
            open(os.path.join(dump, f"pop{k}.json"), "wb").write(body)
        p = json.loads(body)
        # the shape queen-mq 2.6.0 sends (client.py ack): error null, leaseId last
        acks = [{"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                 "status": "completed", "error": None, "leaseId": m["leaseId"]}
                for m in p["messages"]]
        assert len(acks) == 100, len(acks)
        s, body = req("POST", "/api/v1/ack/batch",
                      json.dumps({"acknowledgments": acks, "consumerGroup": None}))
        assert s == 200, (s, body[:200])
        if dump:
            open(os.path.join(dump, f"ack{k}.json"), "wb").write(body)
        r = json.loads(body)
        assert all(x["success"] for x in r), body[:300]
