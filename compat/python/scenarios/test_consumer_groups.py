"""Consumer groups: fan-out, load sharing, subscription modes, delete, subscription update."""

import asyncio
from datetime import datetime, timedelta, timezone

from compat import Consumer, Ctx, data_of, iso_now, msgs, scenario, wait_until


async def _pop_group(ctx: Ctx, q: str, group: str, **kw):
    b = ctx.client.queue(q).group(group).batch(50).wait(False)
    if kw.get("mode"):
        b = b.subscription_mode(kw["mode"])
    if kw.get("since"):
        b = b.subscription_from(kw["since"])
    return await b.pop()


@scenario()
async def test_fan_out_to_groups(ctx: Ctx):
    q = ctx.q("fanout")
    g1, g2 = ctx.q("g-a"), ctx.q("g-b")
    await ctx.client.queue(q).create()
    await ctx.client.queue(q).push([{"data": {"n": i}} for i in range(4)])
    seen = {g1: [], g2: []}

    def handler_for(g):
        async def handler(m):
            seen[g].extend(x["data"]["n"] for x in msgs(m))
        return handler

    await asyncio.wait_for(asyncio.gather(
        ctx.client.queue(q).group(g1).batch(1).limit(4).timeout_millis(1000).consume(handler_for(g1)),
        ctx.client.queue(q).group(g2).batch(2).limit(4).timeout_millis(1000).consume(handler_for(g2)),
    ), 30)
    assert seen[g1] == [0, 1, 2, 3] and seen[g2] == [0, 1, 2, 3], seen
    assert all((e.request_json() or {}).get("consumerGroup") in (g1, g2) for e in ctx.calls("POST", "/api/v1/ack"))
    assert await _pop_group(ctx, q, g1) == [] and await _pop_group(ctx, q, g2) == []
    # Queue mode is a separate cursor and still sees everything.
    assert len(await ctx.client.queue(q).batch(10).wait(False).pop()) == 4


@scenario()
async def test_load_sharing_within_a_group(ctx: Ctx):
    q = ctx.q("share")
    group = ctx.q("g-share")
    await ctx.client.queue(q).create()
    for p in range(4):
        await ctx.client.queue(q).partition(f"p{p}").push([{"data": {"p": p, "i": i}} for i in range(3)])
    got = {"A": [], "B": []}

    def handler_for(name):
        async def handler(m):
            for x in msgs(m):
                got[name].append((x["data"]["p"], x["data"]["i"]))
            await asyncio.sleep(0.15)
        return handler

    a = Consumer(ctx.client.queue(q).group(group).batch(1).partitions(1).timeout_millis(1000), handler_for("A"))
    b = Consumer(ctx.client.queue(q).group(group).batch(1).partitions(1).timeout_millis(1000), handler_for("B"))
    ok = await wait_until(lambda: len(got["A"]) + len(got["B"]) >= 12, 40)
    await asyncio.gather(a.stop(), b.stop())
    assert a.error is None and b.error is None, (a.error, b.error)
    everything = got["A"] + got["B"]
    assert ok, got
    assert sorted(everything) == sorted((p, i) for p in range(4) for i in range(3)), "each message exactly once per group"
    assert got["A"] and got["B"], f"one consumer did all the work: {got}"
    for name in ("A", "B"):  # per-partition order holds for each consumer
        for p in range(4):
            seq = [i for (pp, i) in got[name] if pp == p]
            assert seq == sorted(seq), (name, p, seq)
    assert await _pop_group(ctx, q, group) == []


@scenario()
async def test_subscription_modes(ctx: Ctx):
    q = ctx.q("subscribe")
    await ctx.client.queue(q).create()
    await ctx.client.queue(q).push([{"data": "old-1"}, {"data": "old-2"}])
    await asyncio.sleep(0.3)

    g_all, g_new, g_from = ctx.q("g-all"), ctx.q("g-new"), ctx.q("g-from")
    # all: from the oldest message.
    assert data_of(await _pop_group(ctx, q, g_all, mode="all")) == ["old-1", "old-2"]
    # new: nothing that was there before the group's first pop.
    assert await _pop_group(ctx, q, g_new, mode="new") == []
    assert "subscriptionMode=new" in ctx.last("GET", "/api/v1/pop/").query

    await asyncio.sleep(0.3)
    since = iso_now()
    await asyncio.sleep(0.3)
    await ctx.client.queue(q).push([{"data": "new-1"}])

    got_new = await _pop_group(ctx, q, g_new, mode="new")
    assert data_of(got_new) == ["new-1"], got_new
    # from a timestamp: only what was created at or after it.
    got_from = await _pop_group(ctx, q, g_from, since=since)
    assert data_of(got_from) == ["new-1"], got_from
    assert "subscriptionFrom=" in ctx.last("GET", "/api/v1/pop/").query
    # a timestamp in the past before everything: all of it.
    got_early = await _pop_group(ctx, q, ctx.q("g-early"), since="2000-01-01T00:00:00Z")
    assert data_of(got_early) == ["old-1", "old-2", "new-1"], got_early


@scenario()
async def test_delete_consumer_group(ctx: Ctx):
    q = ctx.q("cg-delete")
    group = ctx.q("g-del")
    await ctx.client.queue(q).push([{"data": {"n": i}} for i in range(3)])
    got = await _pop_group(ctx, q, group)
    assert len(got) == 3
    assert (await ctx.client.ack(got, True, {"group": group}))["success"] is True
    assert await _pop_group(ctx, q, group) == []

    res = await ctx.client.delete_consumer_group(group)
    call = ctx.last("DELETE", "/api/v1/consumer-groups/")
    assert call.status == 200 and "deleteMetadata=true" in call.query, call.describe()
    assert res.get("success") is True, res
    # Brand new again: consumes from the oldest message.
    again = await _pop_group(ctx, q, group)
    assert data_of(again) == [{"n": 0}, {"n": 1}, {"n": 2}], again
    assert (await ctx.client.ack(again, True, {"group": group}))["success"] is True

    res2 = await ctx.client.delete_consumer_group(group, delete_metadata=False)
    assert res2.get("success") is True, res2
    assert "deleteMetadata=false" in ctx.last("DELETE", "/api/v1/consumer-groups/").query


@scenario()
async def test_update_consumer_group_subscription_timestamp(ctx: Ctx):
    q = ctx.q("cg-subts")
    group = ctx.q("g-subts")
    await ctx.client.queue(q).partition("p1").push({"data": "before"})
    # First contact in 'new' mode stores a subscription timestamp for the group.
    assert await ctx.client.queue(q).group(group).subscription_mode("new").wait(False).pop() == []

    future = (datetime.now(timezone.utc) + timedelta(hours=1)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    res = await ctx.client.update_consumer_group_timestamp(group, future)
    call = ctx.last("POST", "/subscription")
    assert call.status == 200, call.describe()
    assert (call.request_json() or {}).get("subscriptionTimestamp") == future
    assert res.get("success") is True and res.get("consumerGroup") == group, res

    # A partition the group has not consumed yet starts at the stored (future) timestamp.
    await ctx.client.queue(q).partition("p2").push({"data": "after-update"})
    assert await _pop_group(ctx, q, group) == [], "the rewritten subscription timestamp was not honoured"
