"""admin.seek_consumer_group(): to a timestamp and to the end."""

import asyncio

from compat import Ctx, data_of, iso_now, scenario


@scenario()
async def test_seek_consumer_group(ctx: Ctx):
    q = ctx.q("seek")
    group = ctx.q("g-seek")
    await ctx.client.queue(q).push([{"data": "a"}, {"data": "b"}])
    await asyncio.sleep(0.3)
    mark = iso_now()
    await asyncio.sleep(0.3)
    await ctx.client.queue(q).push([{"data": "c"}, {"data": "d"}, {"data": "e"}])

    got = await ctx.client.queue(q).group(group).batch(10).wait(False).pop()
    assert data_of(got) == ["a", "b", "c", "d", "e"]
    assert (await ctx.client.ack(got, True, {"group": group}))["success"] is True
    assert await ctx.client.queue(q).group(group).wait(False).pop() == []

    # Back to a timestamp: consumption resumes after it.
    res = await ctx.client.admin.seek_consumer_group(group, q, {"timestamp": mark})
    call = ctx.last("POST", "/seek")
    assert call.status == 200, call.describe()
    assert res.get("success") is True, res
    again = await ctx.client.queue(q).group(group).batch(10).wait(False).pop()
    assert data_of(again) == ["c", "d", "e"], again
    assert (await ctx.client.ack(again, True, {"group": group}))["success"] is True

    # To the end: a backlog is skipped.
    await ctx.client.queue(q).push([{"data": "f"}, {"data": "g"}])
    res = await ctx.client.admin.seek_consumer_group(group, q, {"toEnd": True})
    assert res.get("success") is True, res
    assert await ctx.client.queue(q).group(group).wait(False).pop() == []
    await ctx.client.queue(q).push({"data": "h"})
    assert data_of(await ctx.client.queue(q).group(group).wait(False).pop()) == ["h"]
