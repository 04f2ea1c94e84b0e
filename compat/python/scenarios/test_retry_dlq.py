"""Failed acks, retries up to retryLimit, then the dead-letter queue; browsing the DLQ."""

import asyncio

from compat import Consumer, Ctx, scenario, wait_until


@scenario()
async def test_failed_handler_retried_until_dlq(ctx: Ctx):
    q = ctx.q("retry-dlq")
    await ctx.client.queue(q).config({"retry_limit": 2, "lease_time": 30}).create()
    pushed = await ctx.client.queue(q).push({"data": {"poison": True}})
    tx = pushed[0]["transaction_id"]
    attempts = []

    async def handler(message):
        attempts.append(message["transactionId"])
        raise RuntimeError("boom-compat")

    # retryLimit 2 => 2 redeliveries => 3 deliveries; the 3rd failure dead-letters it.
    c = Consumer(ctx.client.queue(q).batch(1).limit(3).timeout_millis(1000), handler)
    await c.finish(30)
    assert attempts == [tx, tx, tx], attempts
    nacks = ctx.calls("POST", "/api/v1/ack")
    assert [(e.request_json() or {}).get("status") for e in nacks] == ["failed"] * 3
    assert all((e.request_json() or {}).get("error") == "boom-compat" for e in nacks)
    last = nacks[-1].response_json()
    assert isinstance(last, list) and last[0].get("success") is True and last[0].get("dlq") is True, nacks[-1].describe()

    assert await ctx.client.queue(q).wait(False).pop() == [], "a dead-lettered message was delivered again"

    dlq = await ctx.client.queue(q).dlq().get()
    call = ctx.last("GET", "/api/v1/dlq")
    assert call.status == 200, call.describe()
    assert [m["transactionId"] for m in dlq["messages"]] == [tx], dlq
    entry = dlq["messages"][0]
    assert entry["data"] == {"poison": True}
    assert "boom-compat" in (entry.get("errorMessage") or ""), entry
    assert entry.get("queue") == q and entry.get("consumerGroup") == "__QUEUE_MODE__", entry
    assert dlq.get("total") == 1, dlq


@scenario()
async def test_dlq_per_consumer_group_and_pagination(ctx: Ctx):
    q = ctx.q("dlq-group")
    group = ctx.q("g-dlq")
    await ctx.client.queue(q).config({"retry_limit": 0}).create()
    await ctx.client.queue(q).push([{"data": {"n": i}} for i in range(3)])

    got = await ctx.client.queue(q).group(group).batch(3).wait(False).pop()
    assert len(got) == 3
    # retryLimit 0: the first failure dead-letters; an explicit 'dlq' status does too.
    r1 = await ctx.client.ack(got[0], False, {"group": group, "error": "bad input"})
    assert r1["success"] is True and r1.get("dlq") is True, r1
    r2 = await ctx.client.ack(got[1:], "dlq", {"group": group, "error": "sent to dlq"})
    assert r2["success"] is True, r2

    dlq = await ctx.client.queue(q).dlq(group).get()
    call = ctx.last("GET", "/api/v1/dlq")
    assert call.status == 200, call.describe()  # DLQBuilder.get() swallows errors into an empty list
    assert sorted(m["data"]["n"] for m in dlq["messages"]) == [0, 1, 2], dlq
    assert {m["consumerGroup"] for m in dlq["messages"]} == {group}
    assert "consumerGroup=" + group in ctx.last("GET", "/api/v1/dlq").query

    page = await ctx.client.queue(q).dlq(group).limit(2).get()
    assert len(page["messages"]) == 2 and page.get("total") == 3, page
    rest = await ctx.client.queue(q).dlq(group).limit(2).offset(2).get()
    assert len(rest["messages"]) == 1, rest

    # The DLQ is per group: queue mode never failed anything.
    other = await ctx.client.queue(q).dlq("__QUEUE_MODE__").get()
    assert other["messages"] == [], other
    # The messages stay for other groups.
    assert len(await ctx.client.queue(q).batch(10).wait(False).pop()) == 3


@scenario()
async def test_retry_status_redelivers_without_counting(ctx: Ctx):
    q = ctx.q("retry-status")
    await ctx.client.queue(q).config({"retry_limit": 0}).create()
    await ctx.client.queue(q).push({"data": "again"})
    for _ in range(3):
        got = await ctx.client.queue(q).wait(True).timeout_millis(3000).pop()
        assert len(got) == 1
        res = await ctx.client.ack(got[0], "retry")
        assert res["success"] is True, res
    got = await ctx.client.queue(q).wait(True).timeout_millis(3000).pop()
    assert [m["data"] for m in got] == ["again"]
    assert (await ctx.client.ack(got[0]))["success"] is True
    assert (await ctx.client.queue(q).dlq().get())["messages"] == []
    call = ctx.last("GET", "/api/v1/dlq")
    assert call.status == 200, call.describe()  # else the empty list above proves nothing
