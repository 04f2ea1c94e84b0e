"""Consumers defined by namespace/task instead of a queue, and conflation.

GET /api/v1/pop?namespace=&task= is OPTIONAL in the contract (§3.4): a broker
either serves it or answers 404. Conflation (last-value consumer groups) is
served and echoed, so the client does not raise ConflationUnsupportedError
(test_conflation.py has the rest).
"""

import asyncio

import pytest

from compat import Ctx, data_of, scenario


@scenario()
async def test_pop_by_namespace_and_task(ctx: Ctx):
    ns = ctx.q("ns")
    q1, q2, other = ctx.q("nsq1"), ctx.q("nsq2"), ctx.q("nsq3")
    await ctx.client.queue(q1).namespace(ns).task("billing").create()
    await ctx.client.queue(q2).namespace(ns).task("billing").create()
    await ctx.client.queue(other).namespace(ns).task("shipping").create()
    await ctx.client.queue(q1).push({"data": "one"})
    await ctx.client.queue(q2).push({"data": "two"})
    await ctx.client.queue(other).push({"data": "three"})

    got = []
    for _ in range(4):
        batch = await ctx.client.queue().namespace(ns).task("billing").batch(10).wait(False).pop()
        call = ctx.last("GET", "/api/v1/pop")
        if call.status == 404:
            pytest.skip(f"broker does not serve the optional namespace/task pop: {call.describe()}")
        assert call.path == "/api/v1/pop" and f"namespace={ns}" in call.query, call.describe()
        got.extend(batch)
        if not batch:
            break
    assert sorted(data_of(got)) == ["one", "two"], got
    assert {m.get("queue") for m in got} == {q1, q2}, "namespace pops name each message's queue"
    assert (await ctx.client.ack(got))["success"] is True

    # Namespace only: every task.
    rest = await ctx.client.queue().namespace(ns).batch(10).wait(False).pop()
    assert data_of(rest) == ["three"], rest


@scenario()
async def test_conflation_is_applied_not_refused(ctx: Ctx):
    q = ctx.q("conflation")
    group = ctx.q("g-conf")
    await ctx.client.queue(q).push([{"data": 1}, {"data": 2}])
    got = await ctx.client.queue(q).group(group).conflation(True).wait(False).pop()
    assert data_of(got) == [2], got
    last = ctx.last("GET", "/api/v1/pop/")
    assert "conflation=true" in last.query
    assert last.response_json()["conflation"] is True, last.describe()


