"""Lease renewal: a long-running handler keeps its lease; renew() directly."""

import asyncio
import uuid

from compat import V1, Ctx, scenario


@scenario()
async def test_long_running_handler_keeps_lease_by_renewal(ctx: Ctx):
    q = ctx.q("renew-consume")
    await ctx.client.queue(q).config({"lease_time": 2}).create()
    await ctx.client.queue(q).push({"data": {"slow": True}})
    started = asyncio.Event()
    stolen = []

    async def handler(message):
        started.set()
        await asyncio.sleep(5)  # 2.5 x the lease time

    async def competitor():
        # Another consumer of the same group polls during the handler: the
        # message must stay leased to the first one the whole time.
        await started.wait()
        other = ctx.new_client()
        for _ in range(8):
            got = await other.queue(q).wait(False).pop()
            stolen.extend(got)
            await asyncio.sleep(0.5)

    comp = asyncio.create_task(competitor())
    await asyncio.wait_for(
        ctx.client.queue(q).batch(1).limit(1).renew_lease(True, 600).timeout_millis(1000).consume(handler), 30
    )
    await asyncio.wait_for(comp, 15)

    # A renewal still in flight when the handler returns is cancelled by the
    # client itself (consumer_manager cancels its renewal task): not an answer.
    renewals = [e for e in ctx.calls("POST", "/api/v1/lease/") if not (e.error or "").startswith("CancelledError")]
    assert len(renewals) >= 3, f"expected >= 3 renewals in 5s at 600ms, saw {len(renewals)}"
    for e in renewals:
        assert e.path.endswith("/extend")
        assert not e.request_body, f"the Python client sends no body on renewal; got {e.request_body!r}"
        assert e.status == 200, f"renewal without a body refused: {e.describe()}"
        body = e.response_json()
        item = body[0] if isinstance(body, list) else body
        assert isinstance(item, dict) and item.get("success") is True, e.describe()
    assert stolen == [], f"the message was handed to another consumer while its lease was being renewed: {stolen}"
    ack = ctx.last("POST", "/api/v1/ack")
    assert ack.status == 200 and ack.response_json()[0]["success"] is True, \
        f"the ack after the long handler was refused (lease lost?): {ack.describe()}"
    assert await ctx.client.queue(q).wait(False).pop() == []


@scenario()
async def test_renew_api(ctx: Ctx):
    q = ctx.q("renew-api")
    await ctx.client.queue(q).config({"lease_time": 2}).create()
    await ctx.client.queue(q).push([{"data": 1}, {"data": 2}])
    got = await ctx.client.queue(q).batch(2).wait(False).pop()
    assert len(got) == 2

    one = await ctx.client.renew(got[0])
    call = ctx.last("POST", "/api/v1/lease/")
    assert call.path == f"/api/v1/lease/{got[0]['leaseId']}/extend" and not call.request_body, call.describe()
    assert call.status == 200, call.describe()
    assert one["success"] is True and one.get("newExpiresAt"), (
        f"renew(message) -> {one}; broker answered {call.describe()}"
    )

    # A list of messages sharing one lease is renewed once.
    many = await ctx.client.renew(got)
    assert isinstance(many, list) and len(many) == 1 and many[0]["success"] is True, many
    await asyncio.sleep(2.5)  # past the original lease: renewal kept it alive
    acked = await ctx.client.ack(got)
    assert acked["success"] is True, f"ack after renewal refused: {acked}"

    unknown = await ctx.client.renew(str(uuid.uuid4()))
    assert unknown["success"] is False, unknown
    if not V1:
        released = await ctx.client.renew(got[0])
        assert released["success"] is False, f"renewing a lease released by its ack must fail: {released}"
