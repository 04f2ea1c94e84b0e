"""Reads that move nothing (queen-mq 2.6.0): fetch by offset, changed_since
with its safeTime, queue depth, and the retry of a dead letter."""

import asyncio

import httpx
import pytest

from compat import V1, Ctx, scenario

pytestmark = pytest.mark.skipif(V1, reason="queen-mq 1.3.0 has no fetch, changed_since, depth or retry")


async def push(ctx: Ctx, q: str, partition: str, values):
    await ctx.client.queue(q).partition(partition).push([{"data": {"n": v, "p": partition}} for v in values])


@scenario()
async def test_fetch_and_changed_since_move_no_consumer_group(ctx: Ctx):
    q = ctx.q("reads")
    group = ctx.q("g")
    await push(ctx, q, "a", range(5))
    await push(ctx, q, "b", range(3))

    # the group takes and acks the first two of a
    got = await ctx.client.queue(q).partition("a").group(group).batch(2).wait(False).pop()
    assert [m["data"]["n"] for m in got] == [0, 1], got
    await ctx.client.ack(got, True, {"group": group})
    before = await ctx.client.admin.get_queue_depth(q, group=group)
    assert before["pending"] == 6, before

    read = await ctx.client.queue(q).fetch(["a", "b", "never-written"])
    a, b, none = read["a"], read["b"], read["never-written"]
    assert [r["payload"] for r in a["records"]] == [{"n": i, "p": "a"} for i in range(5)], a
    assert [r["offset"] for r in a["records"]] == [0, 1, 2, 3, 4], a
    assert a["highWatermark"] == 5 and a["logStartOffset"] == 0 and a["nextOffset"] == 5, a
    assert all(r["transactionId"] and r["ts"].endswith("Z") for r in a["records"]), a
    assert [r["payload"]["n"] for r in b["records"]] == [0, 1, 2], b
    assert none["records"] == [] and none["highWatermark"] == 0, none

    # identical reads answer identically; a later start reads the rest
    again = await ctx.client.queue(q).fetch(["a", "b", "never-written"])
    assert again == read
    tail = await ctx.client.queue(q).fetch("a", offsets={"a": 3})
    assert [r["offset"] for r in tail["a"]["records"]] == [3, 4], tail
    assert (await ctx.client.queue(ctx.q("missing")).fetch("a"))["a"]["records"] == []

    changed = await ctx.client.queue(q).changed_since()
    assert sorted(p["name"] for p in changed["partitions"]) == ["a", "b"], changed
    by_name = {p["name"]: p for p in changed["partitions"]}
    assert by_name["a"]["lastOffset"] == 4 and by_name["b"]["lastOffset"] == 2, changed
    safe = changed["safeTime"]
    assert isinstance(safe, str) and safe.endswith("Z"), changed
    nothing = await ctx.client.queue(q).changed_since(safe)
    assert nothing["partitions"] == [], nothing
    await push(ctx, q, "b", [3])
    later = await ctx.client.queue(q).changed_since(safe)
    assert [p["name"] for p in later["partitions"]] == ["b"], later
    assert later["partitions"][0]["lastOffset"] == 3, later
    assert (await ctx.client.queue(ctx.q("missing")).changed_since())["partitions"] == []

    # no group noticed any of it: the group's backlog is what it was (plus the new push)
    after = await ctx.client.admin.get_queue_depth(q, group=group)
    assert after["pending"] == 7, after
    rest = await ctx.client.queue(q).partition("a").group(group).batch(10).wait(False).pop()
    assert [m["data"]["n"] for m in rest] == [2, 3, 4], rest
    # the queue-mode cursor never moved either: it still starts at the first message
    first = await ctx.client.queue(q).partition("a").batch(1).wait(False).pop()
    assert [m["data"]["n"] for m in first] == [0], first


@scenario()
async def test_queue_depth_per_group_and_worst_cursor(ctx: Ctx):
    q = ctx.q("depth")
    g1, g2 = ctx.q("g1"), ctx.q("g2")
    await push(ctx, q, "a", range(3))
    await push(ctx, q, "b", range(2))

    d = await ctx.client.admin.get_queue_depth(q)
    assert d["pending"] == 5 and d["partitionsPending"] == 2, d
    assert d["conflation"] is False and d["effectivePending"] == 5 and d["group"] is None, d
    assert [(p["partition"], p["pending"]) for p in d["partitions"]] == [("a", 3), ("b", 2)], d

    got = await ctx.client.queue(q).partition("a").group(g1).batch(2).wait(False).pop()
    await ctx.client.ack(got, True, {"group": g1})
    mine = await ctx.client.admin.get_queue_depth(q, group=g1)
    assert mine["pending"] == 3 and mine["group"] == g1, mine
    assert [(p["partition"], p["pending"]) for p in mine["partitions"]] == [("a", 1), ("b", 2)], mine

    # a leased batch is processing, not ready
    leased = await ctx.client.queue(q).partition("b").group(g2).batch(2).wait(False).pop()
    assert len(leased) == 2
    theirs = await ctx.client.admin.get_queue_depth(q, group=g2)
    assert theirs["pending"] == 5 and theirs["processing"] == 2 and theirs["ready"] == 3, theirs
    # without a group: the worst named group per partition (g2 has read nothing of a, g1 nothing of b)
    worst = await ctx.client.admin.get_queue_depth(q)
    assert worst["pending"] == 5, worst

    with pytest.raises(httpx.HTTPStatusError) as e:
        await ctx.client.admin.get_queue_depth(ctx.q("no-such-queue"))
    assert e.value.response.status_code == 404


@scenario()
async def test_retry_moves_a_dead_letter_back_to_its_group(ctx: Ctx):
    q = ctx.q("retry")
    group = ctx.q("g")
    await ctx.client.queue(q).config({"retry_limit": 0}).create()
    pushed = await ctx.client.queue(q).push({"data": {"poison": 1}})
    tx = pushed[0]["transaction_id"]

    got = await ctx.client.queue(q).group(group).batch(1).wait(False).pop()
    assert len(got) == 1
    r = await ctx.client.ack(got[0], False, {"group": group, "error": "bad"})
    assert r.get("dlq") is True, r
    assert await ctx.client.queue(q).group(group).wait(False).pop() == []

    dlq = await ctx.client.queue(q).dlq(group).get()
    entry = dlq["messages"][0]
    assert entry["transactionId"] == tx, dlq
    answer = await ctx.client.admin.retry_message(entry["partitionId"], tx)
    call = ctx.last("POST", "/retry")
    assert call.status == 200 and call.request_body in (None, b""), call.describe()
    assert answer["success"] is True and answer["result"] == "moved", answer
    assert answer["consumerGroup"] == group and answer["dlqRowRemoved"] is True, answer
    assert answer["replayedAs"]["transaction_id"] == f"dlq:{answer['dlqId']}", answer

    # the group gets it again, once; the dead letter is gone
    again = await ctx.client.queue(q).group(group).batch(5).wait(False).pop()
    assert [m["data"] for m in again] == [{"poison": 1}], again
    assert again[0]["transactionId"] == f"dlq:{answer['dlqId']}"
    await ctx.client.ack(again, True, {"group": group})
    assert (await ctx.client.queue(q).dlq(group).get())["messages"] == []

    with pytest.raises(httpx.HTTPStatusError) as e:
        await ctx.client.admin.retry_message(entry["partitionId"], tx)
    assert e.value.response.status_code == 404
    assert e.value.response.json().get("result") == "gone"
