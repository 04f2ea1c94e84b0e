"""What the broker refuses from a hostile producer, as the official client
meets it: payloads that could not come back as sent get a 400 (the client
raises, nothing is stored), and everything up to the limits comes back equal."""

import asyncio

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


# ------------------------------------------------------------ issue 33 (2.6.0)
# Names a URL path rewrites, values the database cannot hold, numbers out of
# range, as the official 2.6.0 client sends them: a 4xx naming the field,
# the client does not retry it, and nothing is written.

from compat import V1  # noqa: E402

v2_only = pytest.mark.skipif(V1, reason="queen-mq 1.x has no timers, KV or ephemeral queues")


@v2_only
@scenario()
async def test_names_a_url_path_rewrites_are_refused_where_created(ctx: Ctx):
    from queen.errors import EphemeralError, TimerError

    q = ctx.q("dots")
    # a timer keyed "d/./x" would be cancelled as "d/x" (httpx removes the dot segment)
    ok = await ctx.client.timers.schedule(q, "d/x", {"n": 1}, delay_ms=60_000)
    assert ok["status"] == "scheduled", ok
    for key in ["d/./x", "dots/../x", "..", "x/"]:
        with pytest.raises(TimerError) as e:
            await ctx.client.timers.schedule(q, key, {"n": 2}, delay_ms=60_000)
        assert e.value.status == 400 and e.value.reason == "timers_bad_key", ctx.last("POST", "/api/v1/timers").describe()
        assert "timerKey" in e.value.detail
    with pytest.raises(TimerError) as e:
        await ctx.client.timers.schedule(".", "Q2/k", {"n": 3}, delay_ms=60_000)
    assert e.value.status == 400 and e.value.reason == "timers_bad_queue"
    listed = await ctx.client.timers.list(q)
    assert [r["timerKey"] for r in listed["rows"]] == ["d/x"], listed
    # an ephemeral queue named ".." or "." would be unreachable afterwards
    for name in ["..", "."]:
        with pytest.raises(EphemeralError) as e:
            await ctx.client.ephemeral.push(name, [{"a": 1}])
        assert e.value.status == 400 and e.value.code == "ephemeral_bad_request", e.value
    names = [x["queue"] for x in (await ctx.client.ephemeral.queues())["queues"]]
    assert "." not in names and ".." not in names, names


@v2_only
@scenario()
async def test_values_the_database_cannot_hold_are_refused_naming_the_field(ctx: Ctx):
    from queen.errors import KvError, TimerError

    ns = "hostile"
    for value in ["a\u0000b", {"k\u0000": 1}]:
        with pytest.raises(KvError) as e:
            await ctx.client.kv.put(ns, "nul", value, forever=True)
        assert e.value.status == 400 and e.value.reason == "kv_bad_value", ctx.last("POST", "/api/v1/kv").describe()
        assert "value" in e.value.detail and "NUL" in e.value.detail
    assert len(ctx.calls("POST", "/api/v1/kv")) == 2, "the client does not retry a 400"
    assert (await ctx.client.kv.get(ns, "nul"))["found"] is False
    # incr past what a JSON number holds: 400 naming delta, the value unchanged
    await ctx.client.kv.put(ns, "big", 1e308, forever=True)
    with pytest.raises(KvError) as e:
        await ctx.client.kv.incr(ns, "big", delta=1e308, forever=True)
    assert e.value.status == 400 and e.value.detail.startswith("delta:"), e.value
    assert (await ctx.client.kv.get(ns, "big"))["value"] == 1e308
    # a timer txn with NUL
    q = ctx.q("neg")
    with pytest.raises(TimerError) as e:
        await ctx.client.timers.schedule(q, "t", {"n": 1}, delay_ms=1000, txn="t\u0000x")
    assert e.value.status == 400 and e.value.reason == "timers_bad_txn"
    # a delay far below zero fires at the next sweep, as the docs say
    for key, delay in [("a", -(10**15)), ("b", -(2**63))]:
        res = await ctx.client.timers.schedule(q, key, {"k": key}, delay_ms=delay)
        assert res["ok"] is True, res
    got = []
    for _ in range(40):
        # the two fires may land in separate sweeps: ack what came, so the
        # partition's lease does not hold back the second
        batch = await ctx.client.queue(q).batch(10).wait(False).pop()
        if batch:
            assert (await ctx.client.ack(batch, True))["success"] is True
        got += batch
        if len(got) >= 2:
            break
        await asyncio.sleep(0.25)
    assert sorted(m["data"]["k"] for m in got) == ["a", "b"], got
