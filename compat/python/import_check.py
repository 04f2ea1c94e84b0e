"""After `queen-server import` of the reference fixture
(crates/queen-server/tests/integration/reference/), consumers on the
unchanged official client carry on: every pending message of every group
exactly once, in partition order, the leased ones of the source delivered
again, nothing consumed delivered again, dead letters listed, traces
readable. Run by compat/python/import.sh; QUEEN_URL points at the broker.
"""

import asyncio
import os
import sys

from queen import Queen

URL = os.environ["QUEEN_URL"]


async def drain(client: Queen, queue: str, group: str):
    """Pops (batch 2, no wait) and acks until empty; returns (partition, txn, data)."""
    seen = []
    for _ in range(100):
        b = client.queue(queue).batch(2).wait(False)
        if group != "__QUEUE_MODE__":
            b = client.queue(queue).group(group).batch(2).wait(False)
        got = await b.pop()
        if not got:
            return seen
        seen.extend((m["partition"], m["transactionId"], m["data"]) for m in got)
        ctx = {"group": group} if group != "__QUEUE_MODE__" else None
        res = await client.ack(got, True, ctx)
        assert res.get("success", True) is not False, res
    raise AssertionError(f"{queue}/{group} never drained")


def of(seen, partition):
    return [t for (p, t, _) in seen if p == partition]


async def main() -> int:
    client = Queen(url=URL, timeout_millis=15000, retry_attempts=2, retry_delay_millis=200)
    try:
        cg1 = await drain(client, "orders", "cg1")
        assert of(cg1, "p1") == ["tx-3", "tx-4", "tx-5", "tx-6"], cg1  # tx-3, tx-4 were leased in the source
        assert of(cg1, "p2") == [], cg1
        assert [d for (_, _, d) in cg1][3] == "six", cg1
        qm = await drain(client, "orders", "__QUEUE_MODE__")
        assert of(qm, "p1") == ["tx-5", "tx-6"], qm
        assert of(qm, "p2") == ["o2-1", "o2-2", "o2-3", "o2-4"], qm
        new = await drain(client, "orders", "cg-new")
        assert of(new, "p1") == ["tx-6"] and of(new, "p2") == ["o2-4"], new
        jobs = await drain(client, "jobs", "__QUEUE_MODE__")
        assert [(t, d) for (_, t, d) in jobs] == [
            ("j-2", {"job": 2, "secret": "s2"}),
            ("j-3", {"job": 3}),
            ("j-4", [4, "four"]),
        ], jobs
        workers = await drain(client, "jobs", "workers")
        assert of(workers, "Default") == ["j-3", "j-4"], workers
        for q, g in [("orders", "cg1"), ("orders", "__QUEUE_MODE__"), ("orders", "cg-new"),
                     ("jobs", "__QUEUE_MODE__"), ("jobs", "workers")]:
            again = await drain(client, q, g)
            assert again == [], (q, g, again)

        dlq = await client.queue("jobs").dlq().get()
        dead = sorted((m["transactionId"], m.get("errorMessage"), m["data"]) for m in dlq["messages"])
        assert dead == [("j-1", "boom", {"job": 1}), ("j-2", "Retries exhausted", {"job": 2, "secret": "s2"})], dlq

        first = await client.queue("orders").group("reader").batch(1).wait(False).pop()
        assert first and first[0]["transactionId"] == "tx-1", first
        traces = await client.admin.get_traces_for_message(first[0]["partitionId"], "tx-1")
        kinds = sorted(t["event_type"] for t in traces["traces"])
        assert kinds == ["info", "processing"], traces
        names = sorted(n for t in traces["traces"] for n in t["trace_names"])
        assert names == ["order-flow", "order-flow", "tenant-a"], traces

        # a push through this broker to the encrypted queue, for import.sh to
        # open the reference's way
        pushed = await client.queue("jobs").push({"data": {"from": "queen-rs"}, "transactionId": "ours-1"})
        assert pushed and pushed[0].get("status") in ("queued", None), pushed
    finally:
        await client.close()
    print("import_check: every group carried on exactly once")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
