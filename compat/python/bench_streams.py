"""Benchmark: a tumbling-window count over a 100 000-message backlog through
the official streaming SDK (queen-mq 2.6.0, `queen.streams`), unchanged.

Run by `bench.sh streams`, which starts a broker on a fresh database and passes
QUEEN_URL, BENCH_BROKER_PID and BENCH_DB. The backlog is pushed first (not
measured); then one SDK runner processes it with its defaults (batch 200, up
to 4 partitions per pop) and the clock and the CPU counters run from its
start until it has processed every message. CPU is read from /proc: the
broker's process, and PostgreSQL's processes that work for the benchmark
database (its backends plus the shared background processes), as
crates/queen-bench/src/procstat.rs does. The sink is checked afterwards:
every closed window emitted once with its exact count.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import List

from queen import Queen, Stream

from benchcpu import TCK, cpu_ticks, pg_cpu_between, postgres_ticks, push_backlog

URL = os.environ["QUEEN_URL"]
BROKER_PID = int(os.environ["BENCH_BROKER_PID"])
DB = os.environ["BENCH_DB"]
TOTAL = int(os.environ.get("BENCH_MESSAGES", "100000"))
PARTITIONS = int(os.environ.get("BENCH_PARTITIONS", "4"))
WINDOW_S = 10
# events 40 ms apart per partition: 250 per 10 s window
STEP_MS = 40
BASE = 1_700_000_000_000
async def read_sink(client: Queen, sink: str) -> List[dict]:
    out: List[dict] = []
    while True:
        got = await client.queue(sink).group("bench-check").batch(1000).wait(False).pop()
        if not got:
            return out
        out.extend(m["data"] for m in got)


async def main() -> int:
    tag = str(int(time.time()))
    src, sink, name = f"bench-src-{tag}", f"bench-sink-{tag}", f"bench-tumbling-{tag}"
    client = Queen(url=URL)
    t = time.monotonic()
    await push_backlog(URL, src, PARTITIONS, TOTAL, lambda p, i: {"ts": BASE + i * STEP_MS, "n": 1})
    print(f"backlog: {TOTAL} messages in {PARTITIONS} partitions pushed in {time.monotonic() - t:.1f}s")

    stream = (
        Stream.from_(client.queue(src))
        .window_tumbling(seconds=WINDOW_S, event_time=lambda m: m["data"]["ts"])
        .reduce(lambda acc, v: acc + v["n"], 0)
        .to(client.queue(sink))
    )
    pg0, br0, me0 = postgres_ticks(DB), cpu_ticks(BROKER_PID), cpu_ticks(os.getpid())
    t0 = time.monotonic()
    runner = await stream.run(query_id=name, url=URL)
    try:
        while runner.metrics()["messagesTotal"] < TOTAL:
            if time.monotonic() - t0 > 1800:
                print(f"gave up after 30 min: {runner.metrics()}")
                return 1
            await asyncio.sleep(0.05)
        t1 = time.monotonic()
        pg1, br1, me1 = postgres_ticks(DB), cpu_ticks(BROKER_PID), cpu_ticks(os.getpid())
    finally:
        await runner.stop()
    m = runner.metrics()
    secs = t1 - t0
    broker_cpu = (br1 - br0) / TCK
    pg_cpu = pg_cpu_between(pg0, pg1)
    client_cpu = (me1 - me0) / TCK

    # the check: every closed window once, with its exact count; the last
    # window of each partition stays open (no later event moves the watermark)
    rows = await read_sink(client, sink)
    per = TOTAL // PARTITIONS
    per_window = WINDOW_S * 1000 // STEP_MS
    closed = (per * STEP_MS) // (WINDOW_S * 1000) - (1 if per % per_window == 0 else 0)
    want = {float(per_window)} if rows else set()
    got_counts = {float(r["value"]) for r in rows}
    ok = len(rows) == closed * PARTITIONS and got_counts == want and m["errorsTotal"] == 0
    await client.close()

    result = {
        "messages": TOTAL,
        "partitions": PARTITIONS,
        "seconds": round(secs, 2),
        "msg_per_s": round(TOTAL / secs),
        "broker_cpu_s": round(broker_cpu, 2),
        "postgres_cpu_s": round(pg_cpu, 2),
        "client_cpu_s": round(client_cpu, 2),
        "broker_us_per_msg": round(broker_cpu / TOTAL * 1e6, 1),
        "postgres_us_per_msg": round(pg_cpu / TOTAL * 1e6, 1),
        "client_us_per_msg": round(client_cpu / TOTAL * 1e6, 1),
        "cycles": m["cyclesTotal"],
        "windows_emitted": len(rows),
        "windows_expected": closed * PARTITIONS,
        "errors": m["errorsTotal"],
        "sink_exact": ok,
    }
    print(json.dumps(result, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
