"""Benchmark: the official client's default consume() against .batch(100).

Run by `bench.sh consume`, which starts a broker on a fresh database and
passes QUEEN_URL, BENCH_BROKER_PID and BENCH_DB. For each run a backlog of
BENCH_MESSAGES (20 000) messages over BENCH_PARTITIONS (16) partitions is
pushed to a queue of its own (not measured); then one consume() loop of the
2.6.0 client, as it ships, drains it: `default` names no batch (the client
sends autopilot=true and the broker sizes the pops), `batch100` calls
.batch(100). The clock and the CPU counters run from the loop's start until
its handler has seen every message. Runs go A B A B, so a machine that slows
down during the benchmark shows in the pairs. Every message is checked to be
handled exactly once.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Dict, List

from queen import Queen

from benchcpu import TCK, cpu_ticks, pg_cpu_between, postgres_ticks, push_backlog

URL = os.environ["QUEEN_URL"]
BROKER_PID = int(os.environ["BENCH_BROKER_PID"])
DB = os.environ["BENCH_DB"]
TOTAL = int(os.environ.get("BENCH_MESSAGES", "20000"))
PARTITIONS = int(os.environ.get("BENCH_PARTITIONS", "16"))


async def drain(client: Queen, queue: str, batch: int | None) -> Dict[str, object]:
    seen: Dict[tuple, int] = {}
    pops: List[int] = []
    done = asyncio.Event()

    async def handler(got) -> None:
        got = got if isinstance(got, list) else [got]
        pops.append(len(got))
        for m in got:
            key = (m["data"]["p"], m["data"]["n"])
            seen[key] = seen.get(key, 0) + 1
        if len(seen) >= TOTAL:
            done.set()

    builder = client.queue(queue).group("bench").timeout_millis(1000)
    if batch:
        builder = builder.batch(batch)
    stop = asyncio.Event()
    pg0, br0, me0 = postgres_ticks(DB), cpu_ticks(BROKER_PID), cpu_ticks(os.getpid())
    t0 = time.monotonic()
    async def run() -> None:
        # consume() answers a builder that runs when awaited
        await builder.consume(handler, signal=stop)

    task = asyncio.create_task(run())
    finished = asyncio.ensure_future(done.wait())
    await asyncio.wait({finished, task}, timeout=600, return_when=asyncio.FIRST_COMPLETED)
    if not done.is_set():
        finished.cancel()
        error = task.exception() if task.done() else "timed out after 600 s"
        raise RuntimeError(f"{len(seen)} of {TOTAL} messages handled: {error}")
    t1 = time.monotonic()
    pg1, br1, me1 = postgres_ticks(DB), cpu_ticks(BROKER_PID), cpu_ticks(os.getpid())
    stop.set()
    try:
        await asyncio.wait_for(task, 10)
    except asyncio.TimeoutError:
        task.cancel()
    secs = t1 - t0
    broker_cpu = (br1 - br0) / TCK
    pg_cpu = pg_cpu_between(pg0, pg1)
    return {
        "seconds": round(secs, 2),
        "msg_per_s": round(TOTAL / secs),
        "handler_calls": len(pops),
        "mean_batch": round(sum(pops) / max(len(pops), 1), 1),
        "broker_us_per_msg": round(broker_cpu / TOTAL * 1e6, 1),
        "postgres_us_per_msg": round(pg_cpu / TOTAL * 1e6, 1),
        "client_us_per_msg": round((me1 - me0) / TCK / TOTAL * 1e6, 1),
        "exactly_once": len(seen) == TOTAL and all(n == 1 for n in seen.values()),
    }


async def main() -> int:
    tag = str(int(time.time()))
    client = Queen(url=URL)
    runs = []
    for i, (label, batch) in enumerate(
        [("default", None), ("batch100", 100), ("default", None), ("batch100", 100)]
    ):
        queue = f"bench-consume-{tag}-{i}"
        await push_backlog(URL, queue, PARTITIONS, TOTAL, lambda p, i: {"p": p, "n": i})
        r = await drain(client, queue, batch)
        r["run"] = label
        runs.append(r)
        print(json.dumps(r), flush=True)
    await client.close()
    rate = {
        label: sum(r["msg_per_s"] for r in runs if r["run"] == label) / 2
        for label in ("default", "batch100")
    }
    print(
        json.dumps(
            {
                "messages": TOTAL,
                "partitions": PARTITIONS,
                "default_msg_per_s": round(rate["default"]),
                "batch100_msg_per_s": round(rate["batch100"]),
                "default_over_batch100": round(rate["default"] / rate["batch100"], 2),
            },
            indent=2,
        )
    )
    return 0 if all(r["exactly_once"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
