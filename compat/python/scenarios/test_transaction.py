"""transaction(): ack one message and push another atomically."""

import uuid

import pytest

from compat import V2, Ctx, data_of, scenario


@scenario()
async def test_transaction_acks_and_pushes(ctx: Ctx):
    qin, qout = ctx.q("tx-in"), ctx.q("tx-out")
    await ctx.client.queue(qin).create()
    await ctx.client.queue(qout).create()
    await ctx.client.queue(qin).push({"data": {"order": 1}})
    [m] = await ctx.client.queue(qin).wait(False).pop()

    res = await (
        ctx.client.transaction()
        .ack(m)
        .queue(qout).push([{"data": {"derived": m["data"]["order"]}}])
        .commit()
    )
    call = ctx.last("POST", "/api/v1/transaction")
    assert call.status == 200, call.describe()
    assert res["success"] is True and bool(res), res
    body = call.request_json()
    assert body["requiredLeases"] == [m["leaseId"]]
    assert [op["type"] for op in body["operations"]] == ["ack", "push"]
    results = res.get("results") or []
    assert [r.get("type") for r in results] == ["ack", "push"], res

    assert await ctx.client.queue(qin).wait(False).pop() == [], "the transaction's ack did not commit"
    out = await ctx.client.queue(qout).wait(False).pop()
    assert data_of(out) == [{"derived": 1}], out
    assert (await ctx.client.ack(out[0]))["success"] is True


@scenario()
async def test_transaction_with_group_and_partition(ctx: Ctx):
    qin, qout = ctx.q("txg-in"), ctx.q("txg-out")
    group = ctx.q("g-tx")
    await ctx.client.queue(qin).push([{"data": {"n": 1}}, {"data": {"n": 2}}])
    got = await ctx.client.queue(qin).group(group).batch(2).wait(False).pop()
    assert len(got) == 2

    tx = str(uuid.uuid4())
    res = await (
        ctx.client.transaction()
        .ack(got, "completed", {"consumer_group": group})
        .queue(qout).partition("p-x").push([{"data": {"sum": 3}, "transactionId": tx}])
        .commit()
    )
    assert res["success"] is True, res
    assert await ctx.client.queue(qin).group(group).wait(False).pop() == []
    # The group's ack does not touch queue mode.
    assert len(await ctx.client.queue(qin).batch(5).wait(False).pop()) == 2
    out = await ctx.client.queue(qout).partition("p-x").wait(False).pop()
    assert data_of(out) == [{"sum": 3}] and out[0]["transactionId"] == tx, out


@scenario()
async def test_failed_transaction_applies_nothing(ctx: Ctx):
    qin, qout = ctx.q("txf-in"), ctx.q("txf-out")
    await ctx.client.queue(qout).create()
    await ctx.client.queue(qin).push({"data": "keep"})
    [m] = await ctx.client.queue(qin).wait(False).pop()
    ghost = {"transactionId": str(uuid.uuid4()), "partitionId": m["partitionId"]}

    with pytest.raises(Exception) as err:
        await ctx.client.transaction().ack(m).ack(ghost).queue(qout).push([{"data": "never"}]).commit()
    call = ctx.last("POST", "/api/v1/transaction")
    assert call.status == 200 and call.response_json().get("success") is False, call.describe()
    assert "not found" in str(err.value).lower(), str(err.value)

    assert await ctx.client.queue(qout).wait(False).pop() == [], "a failed transaction pushed"
    # m's ack was rolled back too: its lease is still ours and it can be acked.
    assert (await ctx.client.ack(m))["success"] is True
