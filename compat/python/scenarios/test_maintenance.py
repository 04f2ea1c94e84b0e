"""Maintenance modes (admin helpers of queen-mq 1.x; 2.x dropped them)."""

import asyncio

import pytest

from compat import V1, Ctx, data_of, scenario, wait_until

pytestmark = pytest.mark.skipif(not V1, reason="queen-mq 2.x has no maintenance helpers on Admin")


@scenario()
async def test_push_maintenance_spools_and_replays(ctx: Ctx):
    admin = ctx.client.admin
    q = ctx.q("maint-push")
    await ctx.client.queue(q).create()
    state = await admin.get_maintenance_mode()
    assert state.get("maintenanceMode") is False, state
    try:
        on = await admin.set_maintenance_mode(True)
        assert on.get("maintenanceMode") is True, on
        assert (await admin.get_maintenance_mode()).get("maintenanceMode") is True
        res = await ctx.client.queue(q).push({"data": "spooled"})
        assert ctx.last("POST", "/api/v1/push").status == 201
        assert res[0].get("status") == "buffered", res
    finally:
        off = await admin.set_maintenance_mode(False)
    assert off.get("maintenanceMode") is False, off
    got = []

    async def replayed():
        got.extend(await ctx.client.queue(q).wait(False).pop())
        return bool(got)

    assert await wait_until(replayed, 15, 0.3), "the spooled push was not replayed after maintenance"
    assert data_of(got) == ["spooled"]


@scenario()
async def test_pop_maintenance(ctx: Ctx):
    admin = ctx.client.admin
    q = ctx.q("maint-pop")
    await ctx.client.queue(q).push({"data": "held"})
    state = await admin.get_pop_maintenance_mode()
    assert state.get("popMaintenanceMode") is False, state
    try:
        on = await admin.set_pop_maintenance_mode(True)
        assert on.get("popMaintenanceMode") is True, on
        assert await ctx.client.queue(q).wait(False).pop() == []
    finally:
        off = await admin.set_pop_maintenance_mode(False)
    assert off.get("popMaintenanceMode") is False, off
    assert data_of(await ctx.client.queue(q).wait(True).timeout_millis(3000).pop()) == ["held"]
