"""queue(name).delete()."""

from compat import Ctx, data_of, scenario


@scenario()
async def test_delete_queue(ctx: Ctx):
    q = ctx.q("delete")
    await ctx.client.queue(q).create()
    await ctx.client.queue(q).push([{"data": 1}, {"data": 2}])
    # no batch: the client sends autopilot=true and the broker sizes the pop (both, leased)
    assert len(await ctx.client.queue(q).wait(False).pop()) == 2

    res = await ctx.client.queue(q).delete()
    call = ctx.last("DELETE", "/api/v1/resources/queues/")
    assert call.status == 200, call.describe()
    assert res.get("deleted") is True, res
    assert res.get("existed") in (True, None), res
    assert await ctx.client.queue(q).batch(10).wait(False).pop() == []

    # Re-created, it starts empty.
    assert (await ctx.client.queue(q).create())["configured"] is True
    assert await ctx.client.queue(q).batch(10).wait(False).pop() == []
    await ctx.client.queue(q).push({"data": 3})
    assert data_of(await ctx.client.queue(q).wait(False).pop()) == [3]

    gone = await ctx.client.queue(ctx.q("never-existed")).delete()
    assert gone.get("deleted") is True and gone.get("existed") is False, gone
