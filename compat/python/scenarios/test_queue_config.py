"""Queue creation and configuration: queue(name).config({...}).create()."""

import asyncio
import time

from compat import Ctx, scenario

ALL_OPTION_KEYS = {
    "priority", "leaseTime", "retryLimit", "retryDelay", "maxSize", "ttl",
    "deadLetterQueue", "dlqAfterMaxRetries", "delayedProcessing", "windowBuffer",
    "retentionSeconds", "completedRetentionSeconds", "retentionEnabled",
    "encryptionEnabled", "maxWaitTimeSeconds",
}


@scenario()
async def test_create_queue_with_options(ctx: Ctx):
    q = ctx.q("config")
    seen = []

    async def on_success(result):
        seen.append(result)

    res = await (
        ctx.client.queue(q)
        .namespace("compat")
        .task("config")
        .config({
            "lease_time": 120,
            "retry_limit": 5,
            "priority": 3,
            "delayed_processing": 0,
            "window_buffer": 0,
            "max_size": 0,
            "retention_seconds": 0,
            "completed_retention_seconds": 0,
            "encryption_enabled": False,
        })
        .create()
        .on_success(on_success)
    )
    assert res["configured"] is True, res
    assert res["queue"] == q
    assert res["namespace"] == "compat" and res["task"] == "config", res
    assert seen == [res], "create().on_success() callback not called with the response"
    opts = res["options"]
    assert ALL_OPTION_KEYS <= set(opts), f"options echo misses {ALL_OPTION_KEYS - set(opts)}"
    assert opts["leaseTime"] == 120 and opts["retryLimit"] == 5 and opts["priority"] == 3, opts
    assert opts["encryptionEnabled"] is False
    assert isinstance(res.get("queueId"), str) and isinstance(res.get("partitionId"), str)

    # Reconfigure: full-replace semantics, options not given revert to defaults.
    res2 = await ctx.client.queue(q).config({"lease_time": 30}).create()
    assert res2["configured"] is True
    assert res2["options"]["leaseTime"] == 30
    assert res2["options"]["retryLimit"] == 3 and res2["options"]["priority"] == 0, res2["options"]
    assert res2["queueId"] == res["queueId"], "reconfigure must keep the same queue"

    # create() without config() sends the client defaults.
    q2 = ctx.q("config-default")
    res3 = await ctx.client.queue(q2).create()
    assert res3["configured"] is True
    assert res3["options"]["leaseTime"] == 300 and res3["options"]["retryLimit"] == 3, res3["options"]


@scenario()
async def test_delayed_processing_option_takes_effect(ctx: Ctx):
    q = ctx.q("delayed")
    await ctx.client.queue(q).config({"delayed_processing": 2}).create()
    t0 = time.monotonic()
    await ctx.client.queue(q).push([{"data": {"late": True}}])
    assert await ctx.client.queue(q).wait(False).pop() == [], "a delayed message was delivered at once"
    got = await ctx.client.queue(q).wait(True).timeout_millis(6000).pop()
    waited = time.monotonic() - t0
    assert [m["data"] for m in got] == [{"late": True}], got
    assert waited >= 1.5, f"delivered after {waited:.2f}s, delayedProcessing is 2s"
    assert (await ctx.client.ack(got[0]))["success"] is True
