"""pop(): with and without long polling, ack, lease semantics, commit on delivery."""

import asyncio
import re
import time
import uuid

import pytest

from compat import V1, V2, Ctx, data_of, scenario

MICROS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


@scenario()
async def test_pop_without_wait(ctx: Ctx):
    q = ctx.q("pop-nowait")
    await ctx.client.queue(q).create()
    t0 = time.monotonic()
    assert await ctx.client.queue(q).wait(False).pop() == []
    assert time.monotonic() - t0 < 3, "wait(False) on an empty queue must return at once"
    empty = ctx.last("GET", "/api/v1/pop/queue/")
    assert "wait=false" in empty.query and empty.status in (200, 204), empty.describe()

    await ctx.client.queue(q).push([{"data": {"n": i}} for i in range(3)])
    got = await ctx.client.queue(q).batch(10).wait(False).pop()
    assert data_of(got) == [{"n": 0}, {"n": 1}, {"n": 2}]
    m = got[0]
    assert m["leaseId"], "a leased pop must carry a leaseId"
    assert m["consumerGroup"] == "__QUEUE_MODE__"
    assert MICROS.match(m["createdAt"]), f"createdAt {m['createdAt']!r} is not YYYY-MM-DDTHH:MM:SS.ffffffZ"
    # A second consumer of the same group cannot take the leased partition.
    assert await ctx.client.queue(q).wait(False).pop() == []

    # Ack one by one: single-ack route.
    for msg in got:
        res = await ctx.client.ack(msg)
        assert res["success"] is True, res
    single = ctx.last("POST", "/api/v1/ack")
    assert single.path == "/api/v1/ack" and isinstance(single.response_json(), list), single.describe()
    assert await ctx.client.queue(q).wait(False).pop() == []


@scenario()
async def test_pop_with_wait(ctx: Ctx):
    q = ctx.q("pop-wait")
    await ctx.client.queue(q).create()

    # Long poll that times out: empty list after about the timeout.
    t0 = time.monotonic()
    assert await ctx.client.queue(q).wait(True).timeout_millis(1500).pop() == []
    waited = time.monotonic() - t0
    assert 1.0 <= waited < 6.0, f"an empty long poll of 1.5s returned after {waited:.2f}s"

    # Long poll woken by a push.
    async def late_push():
        await asyncio.sleep(0.7)
        await ctx.client.queue(q).push({"data": {"woke": True}})

    pusher = asyncio.create_task(late_push())
    t0 = time.monotonic()
    got = await ctx.client.queue(q).wait(True).timeout_millis(10000).pop()
    waited = time.monotonic() - t0
    await pusher
    assert data_of(got) == [{"woke": True}], got
    assert waited < 5.0, f"the parked pop answered {waited:.2f}s after start (push at 0.7s)"
    assert (await ctx.client.ack(got[0]))["success"] is True


@scenario()
async def test_unacked_message_is_redelivered_after_lease_expiry(ctx: Ctx):
    q = ctx.q("lease-expiry")
    await ctx.client.queue(q).config({"lease_time": 1}).create()
    await ctx.client.queue(q).push({"data": {"x": 1}})
    first = await ctx.client.queue(q).wait(False).pop()
    assert len(first) == 1
    assert await ctx.client.queue(q).wait(False).pop() == [], "leased message delivered twice"
    again = await ctx.client.queue(q).wait(True).timeout_millis(5000).pop()
    assert [m["transactionId"] for m in again] == [first[0]["transactionId"]], again
    assert again[0]["leaseId"] != first[0]["leaseId"]
    # The stale lease can no longer ack; the new one can.
    stale = await ctx.client.ack(first[0])
    assert stale["success"] is False, f"ack with an expired lease was accepted: {stale}"
    assert "lease" in (stale.get("error") or "").lower(), stale
    assert (await ctx.client.ack(again[0]))["success"] is True


@scenario()
async def test_ack_with_wrong_lease_is_refused(ctx: Ctx):
    q = ctx.q("wrong-lease")
    await ctx.client.queue(q).push({"data": 1})
    [m] = await ctx.client.queue(q).wait(False).pop()
    forged = {**m, "leaseId": str(uuid.uuid4())}
    res = await ctx.client.ack(forged)
    assert res["success"] is False and "lease" in (res.get("error") or "").lower(), res
    res = await ctx.client.ack([forged])
    if V1:
        # 1.x reports a batch ack as successful whatever the items say; the
        # per-item verdict is in "results" (2.x folds it into "success").
        assert res["results"][0]["success"] is False, res
    else:
        assert res["success"] is False, res
    assert "lease" in (ctx.last("POST", "/api/v1/ack/batch").response_json()[0].get("error") or "").lower()
    missing = await ctx.client.ack({"transactionId": str(uuid.uuid4()), "partitionId": m["partitionId"]})
    assert missing["success"] is False and "not found" in (missing.get("error") or "").lower(), missing
    assert (await ctx.client.ack(m))["success"] is True


@scenario()
async def test_pop_commit_on_delivery(ctx: Ctx):
    if V1:
        pytest.skip("queen-mq 1.3.0 cannot send autoAck on pop(): auto_ack(True) is the consume default "
                    "and pop() maps it to false (queue_builder.py effective_auto_ack)")
    q = ctx.q("autoack")
    await ctx.client.queue(q).push([{"data": {"n": i}} for i in range(2)])
    got = await ctx.client.queue(q).batch(10).wait(False).commit_on_delivery().pop()
    assert data_of(got) == [{"n": 0}, {"n": 1}]
    assert "autoAck=true" in ctx.last("GET", "/api/v1/pop/").query
    assert all(m["leaseId"] in ("", None) for m in got), "autoAck pops carry an empty leaseId"
    assert await ctx.client.queue(q).wait(False).pop() == [], "autoAck must commit at delivery"
