"""What the broker refuses from a hostile producer, as the official client
meets it: payloads that could not come back as sent get a 400 (the client
raises, nothing is stored), and everything up to the limits comes back equal."""

import httpx
import pytest

from compat import Ctx, data_of, scenario


def _nested(depth):
    v = []
    for _ in range(depth - 1):
        v = [v]
    return v


@scenario()
async def test_payloads_at_the_limits_come_back_equal(ctx: Ctx):
    q = ctx.q("limits")
    # the client writes non-ASCII as \u escapes, the emoji as a surrogate pair
    payloads = [_nested(64), "nul \u0000 inside", 1e300, -0.0, 2**64 - 1, "😀 é", {"": {"\u0000": [None, True]}}]
    await ctx.client.queue(q).push([{"data": p} for p in payloads])
    got = await ctx.client.queue(q).batch(50).wait(False).pop()
    assert data_of(got) == payloads, ctx.last("GET", "/api/v1/pop/").describe()
    assert (await ctx.client.ack(got))["success"] is True


@scenario()
async def test_payloads_that_cannot_come_back_are_refused(ctx: Ctx):
    q = ctx.q("too-deep")
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await ctx.client.queue(q).push([{"data": "fine"}, {"data": _nested(65)}])
    call = ctx.last("POST", "/api/v1/push")
    assert refused.value.response.status_code == 400, call.describe()
    assert call.response_json()["error"] == "items[1].payload is nested deeper than 64 levels", call.describe()
    # the client does not retry a 400, and nothing of the refused push was stored
    assert len(ctx.calls("POST", "/api/v1/push")) == 1
    assert await ctx.client.queue(q).wait(False).pop() == []

    with pytest.raises(httpx.HTTPStatusError) as refused:
        await ctx.client.queue(q).push({"data": 1, "transactionId": "nul\u0000id"})
    call = ctx.last("POST", "/api/v1/push")
    assert refused.value.response.status_code == 400, call.describe()
    assert call.response_json()["error"] == "transactionId must not contain NUL characters", call.describe()
