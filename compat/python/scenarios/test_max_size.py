"""A bounded queue (maxSize): what a push into a full queue gives the user.

The broker stores the items that fit, in order, and answers the others
`failed` with an error naming the bound (still 201). Both client versions
read `failed` items: without an on_error callback push() raises with the
first refused item's error (after the others were stored); with one, the
callback gets exactly the refused items and push() returns the results. A
transaction that would overflow raises and applies nothing.
"""

import pytest

from compat import Ctx, data_of, scenario


async def _bounded(ctx: Ctx, label: str, max_size: int) -> str:
    q = ctx.q(label)
    res = await ctx.client.queue(q).config({"max_size": max_size}).create()
    assert res["options"]["maxSize"] == max_size, res
    return q


async def _drain(ctx: Ctx, q: str):
    got = await ctx.client.queue(q).batch(50).wait(False).pop()
    if got:
        assert (await ctx.client.ack(got))["success"] is True
    return got


@scenario()
async def test_push_into_a_full_queue_raises_after_storing_what_fits(ctx: Ctx):
    q = await _bounded(ctx, "maxsize", 3)
    bound = f"queue {q} is full (maxSize 3): not stored"
    items = [{"transactionId": f"t-{i}", "data": {"n": i}} for i in range(5)]
    with pytest.raises(Exception) as err:
        await ctx.client.queue(q).push(items)
    assert str(err.value) == bound, str(err.value)
    call = ctx.last("POST", "/api/v1/push")
    assert call.status == 201, call.describe()
    results = call.response_json()
    assert [r["status"] for r in results] == ["queued"] * 3 + ["failed"] * 2, results
    assert [r["transactionId"] for r in results[3:]] == ["t-3", "t-4"], results
    assert all(r["error"] == bound for r in results[3:]), results

    # the same push again: the stored ones are duplicates, the rest still refused
    with pytest.raises(Exception):
        await ctx.client.queue(q).push(items)
    assert [r["status"] for r in ctx.last("POST", "/api/v1/push").response_json()] == (
        ["duplicate"] * 3 + ["failed"] * 2
    )

    # consuming makes room: the refused items go in once sent again
    assert data_of(await _drain(ctx, q)) == [{"n": i} for i in range(3)]
    res = await ctx.client.queue(q).push(items[3:])
    assert [r["status"] for r in res] == ["queued", "queued"], res
    assert data_of(await _drain(ctx, q)) == [{"n": 3}, {"n": 4}]


@scenario()
async def test_on_error_gets_exactly_the_refused_items(ctx: Ctx):
    q = await _bounded(ctx, "maxsize-cb", 2)
    refused, stored = [], []

    async def on_error(items, error):
        refused.append((items, str(error)))

    async def on_success(items):
        stored.extend(items)

    items = [{"transactionId": f"c-{i}", "data": i} for i in range(3)]
    res = await ctx.client.queue(q).push(items).on_error(on_error).on_success(on_success)
    assert [r["status"] for r in res] == ["queued", "queued", "failed"], res
    assert len(refused) == 1, refused
    [(bad, error)] = refused
    assert [b["transactionId"] for b in bad] == ["c-2"], bad
    assert error == f"queue {q} is full (maxSize 2): not stored"
    assert [s["transactionId"] for s in stored] == ["c-0", "c-1"], stored


@scenario()
async def test_a_transaction_that_would_overflow_applies_nothing(ctx: Ctx):
    qin = ctx.q("maxsize-tx-in")
    q = await _bounded(ctx, "maxsize-tx", 1)
    await ctx.client.queue(q).push({"transactionId": "held", "data": 0})
    await ctx.client.queue(qin).push({"data": "in"})
    [m] = await ctx.client.queue(qin).wait(False).pop()
    with pytest.raises(Exception) as err:
        await ctx.client.transaction().ack(m).queue(q).push([{"data": "over"}]).commit()
    assert "is full (maxSize 1)" in str(err.value), str(err.value)
    call = ctx.last("POST", "/api/v1/transaction")
    assert call.status == 200 and call.response_json().get("success") is False, call.describe()
    # nothing applied: the ack was rolled back, the queue still holds one message
    assert (await ctx.client.ack(m))["success"] is True
    assert data_of(await _drain(ctx, q)) == [0]
