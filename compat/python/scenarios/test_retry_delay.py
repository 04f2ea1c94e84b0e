"""retryDelay with retryBackoff and retryDelayMax: a failed message rests for
the queue's delay before it is delivered again, and says which delivery it is.

The options go through the client's own config(): snake_case keys, sent in
camelCase. After a failed ack the partition delivers nothing until the delay
has passed; a long poll parked meanwhile answers when it ends, with the
message on its second delivery (`deliveryAttempt`, an additive field the
client passes through as it passes `queue`).
"""

import time

from compat import Ctx, scenario

DELAY_MS = 1500


@scenario()
async def test_a_failed_message_comes_back_after_the_retry_delay(ctx: Ctx):
    q = ctx.q("retry-delay")
    res = await ctx.client.queue(q).config(
        {"retry_delay": DELAY_MS, "retry_backoff": 2, "retry_delay_max": 60000, "lease_time": 30}
    ).create()
    options = res["options"]
    assert (options["retryDelay"], options["retryBackoff"], options["retryDelayMax"]) == (DELAY_MS, 2, 60000), res
    await ctx.client.queue(q).push({"transactionId": "rd-1", "data": {"n": 1}})

    got = await ctx.client.queue(q).batch(1).wait(False).pop()
    assert [m["transactionId"] for m in got] == ["rd-1"], got
    first = ctx.last("GET", "/api/v1/pop").response_json()
    assert first["messages"][0]["deliveryAttempt"] == 1, first
    failed_at = time.monotonic()
    r = await ctx.client.ack(got[0], False, {"error": "later"})
    assert r["success"] is True and not r.get("dlq"), r

    # resting: nothing right after the failure
    assert await ctx.client.queue(q).batch(1).wait(False).pop() == []
    # a long poll answers when the delay ends, with the same message
    again = await ctx.client.queue(q).batch(1).wait(True).timeout_millis(10000).pop()
    waited_ms = (time.monotonic() - failed_at) * 1000
    assert [m["transactionId"] for m in again] == ["rd-1"], again
    # measured on the client's clock: the broker's hold counts from its own
    # reading of the failed ack, after this one was taken
    assert waited_ms >= DELAY_MS - 50, f"redelivered after {waited_ms:.0f} ms"
    raw = ctx.last("GET", "/api/v1/pop").response_json()
    assert raw["messages"][0]["deliveryAttempt"] == 2, raw
    if "deliveryAttempt" in again[0]:
        assert again[0]["deliveryAttempt"] == 2, again
    assert (await ctx.client.ack(again[0]))["success"] is True
    assert await ctx.client.queue(q).batch(1).wait(False).pop() == []
