"""Last-value consumer groups through the official clients as they ship:
conflation() on consume() and pop(), the refusals, the stored policy."""

import asyncio

import httpx
import pytest

from compat import V1, Consumer, Ctx, msgs, push_spread, scenario, wait_until


@scenario()
async def test_conflating_consume_runs_once_per_partition_on_the_newest(ctx: Ctx):
    q = ctx.q("lv-consume")
    g = ctx.q("g")
    await push_spread(ctx, q, 4, 6)
    runs = []

    async def handler(batch):
        runs.extend(m["data"] for m in msgs(batch))

    c = Consumer(ctx.client.queue(q).group(g).conflation().timeout_millis(500), handler)
    ok = await wait_until(lambda: len(runs) >= 4, 20)
    await asyncio.sleep(1.0)  # anything older would arrive now
    await c.stop()
    assert c.error is None, c.error
    assert ok, runs
    assert sorted((d["p"], d["n"]) for d in runs) == [(p, 5) for p in range(4)], runs
    # nothing older afterwards, and the group is reported as conflating
    assert await ctx.client.queue(q).group(g).conflation().wait(False).pop() == []
    depth = await ctx.client.admin.get_queue_depth(q, g)
    assert depth["conflation"] is True, depth
    assert depth["effectivePending"] == depth["partitionsPending"] == 0, depth
    # a second group on the same queue still sees everything
    everything = await ctx.client.queue(q).group(ctx.q("g2")).batch(100).partitions(4).wait(False).pop()
    assert len(everything) == 24, len(everything)


@scenario()
async def test_conflating_pop_and_ack(ctx: Ctx):
    q = ctx.q("lv-pop")
    g = ctx.q("g")
    await push_spread(ctx, q, 1, 3)
    got = await ctx.client.queue(q).group(g).conflation().wait(False).pop()
    assert [m["data"]["n"] for m in got] == [2], got
    assert (await ctx.client.ack(got[0], True, {"group": g}))["success"] is True
    await ctx.client.queue(q).partition("p0").push([{"data": {"p": 0, "n": 3}}, {"data": {"p": 0, "n": 4}}])
    got = await ctx.client.queue(q).group(g).conflation().wait(False).pop()
    assert [m["data"]["n"] for m in got] == [4], got
    last = ctx.last("GET", "/api/v1/pop/")
    assert "conflation=true" in last.query and last.response_json()["conflation"] is True


@scenario()
async def test_conflation_refusals_reach_the_caller(ctx: Ctx):
    if V1:
        pytest.skip("queen-mq 1.3.0 logs a refused pop and returns [], and has no commit_on_delivery")
    q = ctx.q("lv-refuse")
    await push_spread(ctx, q, 1, 2)
    with pytest.raises(httpx.HTTPStatusError) as no_group:
        await ctx.client.queue(q).conflation().wait(False).pop()
    assert no_group.value.response.status_code == 400
    assert "consumerGroup" in no_group.value.response.json()["error"]
    with pytest.raises(httpx.HTTPStatusError) as commit:
        await ctx.client.queue(q).group(ctx.q("g")).conflation().commit_on_delivery().wait(False).pop()
    assert commit.value.response.status_code == 400
    assert "autoAck" in commit.value.response.json()["error"]
    # nothing was taken: a plain pop still gets every message
    got = await ctx.client.queue(q).group(ctx.q("g3")).wait(False).pop()
    assert [m["data"]["n"] for m in got] == [0, 1], got


@scenario()
async def test_a_group_registered_without_conflation_keeps_its_policy(ctx: Ctx):
    q = ctx.q("lv-conflict")
    g = ctx.q("g")
    await push_spread(ctx, q, 1, 3)
    first = await ctx.client.queue(q).group(g).batch(1).wait(False).pop()
    assert [m["data"]["n"] for m in first] == [0]
    await ctx.client.ack(first, True, {"group": g})
    # the declaration conflicts with the stored policy: warned, served as stored
    got = await ctx.client.queue(q).group(g).batch(10).conflation().wait(False).pop()
    assert [m["data"]["n"] for m in got] == [1, 2], got
    body = ctx.last("GET", "/api/v1/pop/").response_json()
    assert body["conflationConflict"] is True and "conflation" not in body, body
    groups = await ctx.client.admin.list_consumer_groups()
    mine = [e for e in groups if e.get("name") == g and e.get("queueName") == q]
    assert mine and mine[0]["conflation"] is False, mine
