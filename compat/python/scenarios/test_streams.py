"""The streaming SDK (queen.streams, 2.6.0) against /streams/v1, unchanged.

Every scenario uses event time taken from the payload (`ts`, epoch ms), and
pushes its events one at a time, waiting for the runner to have processed
each before the next, so watermarks, late data and window closes are exact
and the expected sink content can be written down. The sink is read back
through an ordinary consumer group and compared value for value.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from typing import Any, Dict, List

import pytest

from compat import QUEEN_URL, V2, Ctx, scenario, wait_until

pytestmark = pytest.mark.skipif(not V2, reason="queen-mq 1.x has no streaming SDK")

if V2:
    from queen import Stream, token_bucket_gate

# a multiple of every window size used below
BASE = 1_700_000_000_000


def ev_time(m: Dict[str, Any]) -> int:
    return m["data"]["ts"]


def count_sum(acc: Dict[str, int], v: Dict[str, Any]) -> Dict[str, int]:
    return {"count": acc["count"] + 1, "sum": acc["sum"] + v["n"]}


def labelled(v: Dict[str, int], c: Dict[str, Any]) -> Dict[str, Any]:
    """Post-window map: the window's start (seconds after BASE) and its value."""
    return {"start": (c["windowStart"] - BASE) // 1000, **v}


async def read_sink(ctx: Ctx, sink: str, want: int, timeout: float = 20.0, settle: float = 1.5) -> List[Any]:
    """Everything in `sink` once at least `want` messages are there (and a
    moment more, so an extra emission would show)."""
    seen: List[Any] = []

    async def enough() -> bool:
        nonlocal seen
        seen = await sink_contents(ctx, sink)
        return len(seen) >= want

    await wait_until(enough, timeout, interval=0.25)
    await asyncio.sleep(settle)
    return await sink_contents(ctx, sink)


async def sink_contents(ctx: Ctx, sink: str) -> List[Any]:
    group = ctx.q("chk")
    out: List[Any] = []
    for _ in range(50):
        got = await ctx.client.queue(sink).group(group).batch(1000).wait(False).pop()
        if not got:
            break
        out.extend(m["data"] for m in got)
    return out


async def feed(ctx: Ctx, runner: Any, src: str, events: List[Dict[str, Any]], partition: str = "p1") -> None:
    """Push events one by one; each is processed before the next is pushed."""
    for ev in events:
        before = runner.metrics()["messagesTotal"]
        await ctx.client.queue(src).partition(partition).push([{"data": ev}])
        ok = await wait_until(lambda: runner.metrics()["messagesTotal"] > before, 15, 0.02)
        assert ok, f"the runner did not process {ev}: {runner.metrics()}"


def ev(sec: float, n: int = 1) -> Dict[str, Any]:
    return {"ts": BASE + int(sec * 1000), "n": n}


async def start(stream: Any, name: str, **opts: Any) -> Any:
    opts.setdefault("max_wait_millis", 200)
    return await stream.run(query_id=name, url=QUEEN_URL, **opts)


def by_start(rows: List[Dict[str, Any]]) -> Dict[int, Dict[str, Any]]:
    out: Dict[int, Dict[str, Any]] = {}
    for r in rows:
        assert r["start"] not in out, f"window {r['start']} emitted twice: {rows}"
        out[r["start"]] = r
    return out


@scenario(timeout=90)
async def test_stream_tumbling_window_exact(ctx: Ctx):
    src, sink, name = ctx.q("st-src"), ctx.q("st-sink"), ctx.q("st-q")
    q = ctx.client
    stream = (
        Stream.from_(q.queue(src))
        .window_tumbling(seconds=10, event_time=ev_time)
        .reduce(count_sum, {"count": 0, "sum": 0})
        .map(labelled)
        .to(q.queue(sink))
    )
    runner = await start(stream, name)
    try:
        await feed(ctx, runner, src, [ev(1, 1), ev(4, 2), ev(9, 3), ev(12, 10), ev(19, 20), ev(25, 100), ev(41, 0)])
        rows = await read_sink(ctx, sink, 3)
    finally:
        await runner.stop()
    assert by_start(rows) == {
        0: {"start": 0, "count": 3, "sum": 6},
        10: {"start": 10, "count": 2, "sum": 30},
        20: {"start": 20, "count": 1, "sum": 100},
    }, rows
    assert runner.metrics()["errorsTotal"] == 0, runner.metrics()


@scenario(timeout=90)
async def test_stream_sliding_window_exact(ctx: Ctx):
    src, sink, name = ctx.q("sl-src"), ctx.q("sl-sink"), ctx.q("sl-q")
    q = ctx.client
    stream = (
        Stream.from_(q.queue(src))
        .window_sliding(size=10, slide=5, event_time=ev_time)
        .reduce(count_sum, {"count": 0, "sum": 0})
        .map(labelled)
        .to(q.queue(sink))
    )
    runner = await start(stream, name)
    try:
        # windows [-5,5) [0,10) [5,15) [10,20) [15,25); 40 closes them all
        await feed(ctx, runner, src, [ev(2, 1), ev(7, 2), ev(12, 4), ev(40, 0)])
        rows = await read_sink(ctx, sink, 4)
    finally:
        await runner.stop()
    assert by_start(rows) == {
        -5: {"start": -5, "count": 1, "sum": 1},
        0: {"start": 0, "count": 2, "sum": 3},
        5: {"start": 5, "count": 2, "sum": 6},
        10: {"start": 10, "count": 1, "sum": 4},
    }, rows


@scenario(timeout=90)
async def test_stream_session_window_exact(ctx: Ctx):
    src, sink, name = ctx.q("ss-src"), ctx.q("ss-sink"), ctx.q("ss-q")
    q = ctx.client
    stream = (
        Stream.from_(q.queue(src))
        .window_session(gap=5, event_time=ev_time, idle_flush_ms=0)
        .reduce(count_sum, {"count": 0, "sum": 0})
        .to(q.queue(sink))
    )
    runner = await start(stream, name)
    try:
        # sessions {0,1,3} and {20,22}; 60 closes the second
        await feed(ctx, runner, src, [ev(0, 1), ev(1, 2), ev(3, 4), ev(20, 8), ev(22, 16), ev(60, 0)])
        rows = await read_sink(ctx, sink, 2)
    finally:
        await runner.stop()
    assert sorted(rows, key=lambda r: r["sum"]) == [
        {"count": 3, "sum": 7},
        {"count": 2, "sum": 24},
    ], rows


@scenario(timeout=90)
async def test_stream_cron_window_exact(ctx: Ctx):
    src, sink, name = ctx.q("sc-src"), ctx.q("sc-sink"), ctx.q("sc-q")
    q = ctx.client
    stream = (
        Stream.from_(q.queue(src))
        .window_cron(every="minute", event_time=ev_time)
        .reduce(count_sum, {"count": 0, "sum": 0})
        .map(labelled)
        .to(q.queue(sink))
    )
    runner = await start(stream, name)
    try:
        # BASE is 20 s into its minute: minutes start at -20, 40, 100 (s after BASE)
        await feed(ctx, runner, src, [ev(0, 1), ev(39, 2), ev(41, 4), ev(99, 8), ev(130, 0)])
        rows = await read_sink(ctx, sink, 2)
    finally:
        await runner.stop()
    assert by_start(rows) == {
        -20: {"start": -20, "count": 2, "sum": 3},
        40: {"start": 40, "count": 2, "sum": 12},
    }, rows


@scenario(timeout=90)
async def test_stream_event_time_late_data(ctx: Ctx):
    src, sink, name = ctx.q("lt-src"), ctx.q("lt-sink"), ctx.q("lt-q")
    q = ctx.client
    stream = (
        Stream.from_(q.queue(src))
        .window_tumbling(seconds=10, event_time=ev_time, allowed_lateness=5)
        .reduce(count_sum, {"count": 0, "sum": 0})
        .map(labelled)
        .to(q.queue(sink))
    )
    runner = await start(stream, name)
    try:
        await feed(
            ctx,
            runner,
            src,
            [
                ev(1, 1),
                ev(12, 10),   # watermark 7: window [0,10) still open
                ev(8, 2),     # late but within the lateness (8 >= 7): counted
                ev(16, 20),   # watermark 11: [0,10) closes with 1 + 2
                ev(4, 1000),  # behind the watermark: dropped
                ev(31, 0),    # watermark 26: [10,20) closes
            ],
        )
        rows = await read_sink(ctx, sink, 2)
    finally:
        await runner.stop()
    assert by_start(rows) == {
        0: {"start": 0, "count": 2, "sum": 3},
        10: {"start": 10, "count": 2, "sum": 30},
    }, rows
    assert runner.metrics()["lateEventsTotal"] == 1, runner.metrics()


@scenario(timeout=120)
async def test_stream_reduce_across_many_cycles(ctx: Ctx):
    src, sink, name = ctx.q("rd-src"), ctx.q("rd-sink"), ctx.q("rd-q")
    q = ctx.client
    stream = (
        Stream.from_(q.queue(src))
        .window_tumbling(seconds=1000, event_time=ev_time)
        .reduce(count_sum, {"count": 0, "sum": 0})
        .to(q.queue(sink))
    )
    # 100 events in one window, pushed in bursts of 10 and read 7 at a time
    runner = await start(stream, name, batch_size=7)
    try:
        for burst in range(10):
            await q.queue(src).partition("p1").push([{"data": ev(burst * 10 + i, burst * 10 + i)} for i in range(10)])
            await asyncio.sleep(0.05)
        assert await wait_until(lambda: runner.metrics()["messagesTotal"] >= 100, 30)
        assert runner.metrics()["cyclesTotal"] >= 15, runner.metrics()
        assert await sink_contents(ctx, sink) == [], "the window closed early"
        await feed(ctx, runner, src, [ev(2000, 0)])
        rows = await read_sink(ctx, sink, 1)
    finally:
        await runner.stop()
    assert rows == [{"count": 100, "sum": 4950}], rows


@scenario(timeout=90)
async def test_stream_gate_admits_at_its_rate(ctx: Ctx):
    src, sink, name = ctx.q("gt-src"), ctx.q("gt-sink"), ctx.q("gt-q")
    q = ctx.client
    await q.queue(src).config({"lease_time": 2}).create()
    stream = Stream.from_(q.queue(src)).gate(token_bucket_gate(capacity=5, refill_per_sec=0.0001)).to(q.queue(sink))
    await q.queue(src).partition("p1").push([{"data": {"n": i}} for i in range(12)])
    runner = await start(stream, name)
    try:
        rows = await read_sink(ctx, sink, 5, settle=3.0)
    finally:
        await runner.stop()
    assert rows == [{"n": i} for i in range(5)], rows
    # the rest is still pending for the query's group, in order
    await asyncio.sleep(2.5)
    rest = await q.queue(src).group(f"streams.{name}").batch(100).wait(False).pop()
    assert [m["data"]["n"] for m in rest] == list(range(5, 12)), rest


@scenario(timeout=120)
async def test_stream_two_workers_share_partitions(ctx: Ctx):
    src, sink, name = ctx.q("tw-src"), ctx.q("tw-sink"), ctx.q("tw-q")
    q = ctx.client
    q2 = ctx.new_client()

    def build(client: Any) -> Any:
        return (
            Stream.from_(client.queue(src))
            .window_tumbling(seconds=10, event_time=ev_time)
            .reduce(count_sum, {"count": 0, "sum": 0})
            .map(lambda v, c: {"p": c["partition"], "start": (c["windowStart"] - BASE) // 1000, **v})
            .to(client.queue(sink))
        )

    parts = [f"p{i}" for i in range(6)]
    a = await start(build(q), name, batch_size=5, max_partitions=2)
    b = await start(build(q2), name, batch_size=5, max_partitions=2)
    try:
        for p in parts:
            # 30 events: windows 0, 10, 20 of 10 events each, then a closer
            await q.queue(src).partition(p).push([{"data": ev(i, 1)} for i in range(30)] + [{"data": ev(100, 0)}])
        rows = await read_sink(ctx, sink, 3 * len(parts), timeout=60, settle=3.0)
    finally:
        await a.stop()
        await b.stop()
    keys = sorted((r["p"], r["start"]) for r in rows)
    assert keys == sorted((p, s) for p in parts for s in (0, 10, 20)), rows
    assert all(r["count"] == 10 and r["sum"] == 10 for r in rows), rows
    assert a.metrics()["messagesTotal"] > 0 and b.metrics()["messagesTotal"] > 0, (a.metrics(), b.metrics())


WORKER = textwrap.dedent(
    """
    import asyncio, sys
    from queen import Queen, Stream
    url, src, sink, name, base = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])

    async def slow(m):
        await asyncio.sleep(0.02)
        return m["data"]

    async def main():
        q = Queen(url=url)
        stream = (
            Stream.from_(q.queue(src))
            .map(slow)
            .window_tumbling(seconds=10, event_time=lambda m: m["data"]["ts"])
            .reduce(lambda a, v: {"count": a["count"] + 1, "sum": a["sum"] + v["n"]}, {"count": 0, "sum": 0})
            .map(lambda v, c: {"start": (c["windowStart"] - base) // 1000, **v})
            .to(q.queue(sink))
        )
        await stream.run(query_id=name, url=url, batch_size=15, max_wait_millis=200)
        print("running", flush=True)
        while True:
            await asyncio.sleep(1)

    asyncio.run(main())
    """
)


@scenario(timeout=150)
async def test_stream_worker_killed_mid_cycle_resumes_exactly(ctx: Ctx):
    src, sink, name = ctx.q("kl-src"), ctx.q("kl-sink"), ctx.q("kl-q")
    q = ctx.client
    await q.queue(src).config({"lease_time": 3}).create()
    # 120 events, 1 s apart: twelve windows of 10, then one that closes them
    events = [{"data": ev(i, i)} for i in range(120)] + [{"data": ev(500, 0)}]
    await q.queue(src).partition("p1").push(events)
    script = os.path.join(os.environ.get("QUEEN_COMPAT_OUT", "/tmp"), f"stream-worker-{os.getpid()}.py")
    with open(script, "w") as f:
        f.write(WORKER)
    args = [sys.executable, script, QUEEN_URL, src, sink, name, str(BASE)]

    first = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # let it commit a few windows, then kill it in the middle of a cycle
        assert await wait_until(lambda: sink_count_at_least(ctx, sink, 3), 40, 0.05)
        await asyncio.sleep(0.15)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        killed_at = len(await sink_contents(ctx, sink))
        ctx.note(f"worker killed with {killed_at} windows in the sink")
        assert killed_at < 12, "the first worker finished before it was killed"
        second = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            rows = await read_sink(ctx, sink, 12, timeout=60, settle=3.0)
        finally:
            second.send_signal(signal.SIGKILL)
            second.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(10)
    assert by_start(rows) == {
        s: {"start": s, "count": 10, "sum": sum(range(s, s + 10))} for s in range(0, 120, 10)
    }, rows


async def sink_count_at_least(ctx: Ctx, sink: str, n: int) -> bool:
    return len(await sink_contents(ctx, sink)) >= n
