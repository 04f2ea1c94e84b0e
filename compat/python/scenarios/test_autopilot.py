"""Pop autopilot through the official clients as they ship (1.3.0 and
2.6.0 both): consume() and pop() leave batch and partitions to the broker
(autopilot=true) unless pinned."""

import asyncio
import os

from compat import Consumer, Ctx, msgs, push_spread, scenario, wait_until


@scenario()
async def test_default_consume_gets_broker_sized_batches(ctx: Ctx):
    q = ctx.q("ap-consume")
    await push_spread(ctx, q, 4, 150)
    batches = []

    async def handler(batch):
        batches.append(len(msgs(batch)))

    c = Consumer(ctx.client.queue(q).timeout_millis(1000), handler)
    ok = await wait_until(lambda: sum(batches) >= 600, 40)
    await c.stop()
    assert c.error is None, c.error
    assert ok, batches
    assert sum(batches) == 600, batches
    assert max(batches) >= 50, f"the broker sized the batches: {batches}"
    pops = [e for e in ctx.calls("GET", "/api/v1/pop/") if e.status == 200 and e.response_json()]
    first = pops[0]
    assert "autopilot=true" in first.query and "batch=" not in first.query, first.describe()
    echo = first.response_json()["autopilot"]
    assert echo["batch"] >= 100 and echo["partitions"] >= 1, first.describe()


@scenario()
async def test_pop_result_reports_the_decision(ctx: Ctx):
    q = ctx.q("ap-pop")
    await push_spread(ctx, q, 2, 120)
    res = await ctx.client.queue(q).group(ctx.q("g")).wait(False).pop_result()
    assert len(res.messages) == 100, len(res.messages)
    assert res.autopilot is not None
    assert (res.autopilot.partitions, res.autopilot.batch) == (1, 100), res.autopilot
    assert res.autopilot.wait_millis == 100, res.autopilot


@scenario()
async def test_pinned_knobs_stay_pinned(ctx: Ctx):
    q = ctx.q("ap-pinned")
    await push_spread(ctx, q, 3, 10)
    g = ctx.q("g")
    res = await ctx.client.queue(q).group(g).batch(5).wait(False).pop_result()
    assert len(res.messages) == 5
    assert res.autopilot is not None and res.autopilot.batch == 5, res.autopilot
    last = ctx.last("GET", "/api/v1/pop/")
    assert "autopilot=true" in last.query and "batch=5" in last.query, last.describe()
    # both pinned: the pre-autopilot request, no echo
    res = await ctx.client.queue(q).group(ctx.q("g2")).batch(4).partitions(2).wait(False).pop_result()
    assert 1 <= len(res.messages) <= 4
    assert res.autopilot is None
    assert "autopilot" not in ctx.last("GET", "/api/v1/pop/").query


@scenario()
async def test_autopilot_off_by_environment_and_builder(ctx: Ctx):
    q = ctx.q("ap-off")
    await push_spread(ctx, q, 1, 10)
    old = os.environ.get("QUEEN_SDK_POP_AUTOPILOT")
    os.environ["QUEEN_SDK_POP_AUTOPILOT"] = "off"
    try:
        client = ctx.new_client()
    finally:
        if old is None:
            del os.environ["QUEEN_SDK_POP_AUTOPILOT"]
        else:
            os.environ["QUEEN_SDK_POP_AUTOPILOT"] = old
    res = await client.queue(q).group(ctx.q("g")).wait(False).pop_result()
    assert len(res.messages) == 1, "the client's own default batch (1)"
    assert res.autopilot is None
    last = ctx.last("GET", "/api/v1/pop/")
    assert "autopilot" not in last.query and "batch=1" in last.query, last.describe()
    res = await ctx.client.queue(q).group(ctx.q("g")).autopilot(False).wait(False).pop_result()
    assert len(res.messages) == 1 and res.autopilot is None


@scenario()
async def test_non_waiting_consume_is_paced_by_the_advice(ctx: Ctx):
    q = ctx.q("ap-pace")
    await ctx.client.queue(q).create()
    seen = []

    async def handler(batch):
        seen.extend(msgs(batch))

    c = Consumer(ctx.client.queue(q).wait(False).timeout_millis(500), handler)
    await asyncio.sleep(1.0)
    await ctx.client.queue(q).push([{"data": {"n": 1}}])
    ok = await wait_until(lambda: len(seen) == 1, 10)
    await c.stop()
    assert c.error is None, c.error
    assert ok
    empty = [
        e for e in ctx.calls("GET", "/api/v1/pop/")
        if e.status == 200 and not (e.response_json() or {}).get("messages")
    ]
    assert empty, "empty autopilot pops are answered with a body"
    assert all(e.response_json()["autopilot"].get("waitMs") == 100 for e in empty), empty[0].describe()
