"""Less travelled paths of the same public API: multi-partition pops, odd
names, long polls on queues that do not exist yet, concurrency, group
metadata, transactional dead-lettering."""

import asyncio
import time
import uuid
from datetime import datetime, timedelta, timezone

from compat import Consumer, Ctx, data_of, msgs, scenario, wait_until


@scenario()
async def test_multi_partition_pop_shares_one_lease(ctx: Ctx):
    q = ctx.q("multi")
    await ctx.client.queue(q).config({"lease_time": 2}).create()
    for p in range(3):
        await ctx.client.queue(q).partition(f"mp{p}").push([{"data": {"p": p, "i": i}} for i in range(2)])
    got = await ctx.client.queue(q).partitions(3).batch(10).wait(False).pop()
    call = ctx.last("GET", "/api/v1/pop/")
    assert "partitions=3" in call.query, call.describe()
    assert sorted((m["data"]["p"], m["data"]["i"]) for m in got) == [(p, i) for p in range(3) for i in range(2)], got
    assert len({m["leaseId"] for m in got}) == 1, "one pop, one lease id"
    assert call.response_json()["partitionsClaimed"] == 3, call.describe()
    for p in range(3):  # order within each partition
        assert [m["data"]["i"] for m in got if m["data"]["p"] == p] == [0, 1]

    renewed = await ctx.client.renew(got)
    assert len(ctx.calls("POST", "/api/v1/lease/")) == 1, "messages sharing a lease are renewed once"
    body = ctx.last("POST", "/api/v1/lease/").response_json()
    item = body[0] if isinstance(body, list) else body
    assert item.get("success") is True and item.get("renewed", 3) == 3, ctx.last("POST", "/api/v1/lease/").describe()
    await asyncio.sleep(2.5)  # past the original lease: all three partitions were extended
    assert await ctx.client.queue(q).wait(False).pop() == []
    res = await ctx.client.ack(got)
    assert res["success"] is True, res


@scenario()
async def test_names_that_need_percent_encoding(ctx: Ctx):
    q = ctx.q("nämé with space")
    part = "pä±tition 1"
    group = ctx.q("grüppe x")
    await ctx.client.queue(q).create()
    await ctx.client.queue(q).partition(part).push([{"data": "x"}, {"data": "y"}])
    got = await ctx.client.queue(q).partition(part).batch(5).wait(False).pop()
    assert data_of(got) == ["x", "y"], ctx.last("GET", "/api/v1/pop/").describe()
    assert got[0]["partition"] == part
    assert (await ctx.client.ack(got))["success"] is True

    g = await ctx.client.queue(q).group(group).batch(5).wait(False).pop()
    assert data_of(g) == ["x", "y"], g
    assert (await ctx.client.ack(g, True, {"group": group}))["success"] is True
    detail = await ctx.client.admin.get_queue(q)
    assert detail["name"] == q and [p["name"] for p in detail["partitions"]] == ["Default", part] or \
        sorted(p["name"] for p in detail["partitions"]) == sorted(["Default", part]), detail
    res = await ctx.client.delete_consumer_group(group)
    assert res.get("success") is True, res
    deleted = await ctx.client.queue(q).delete()
    assert deleted.get("deleted") is True, deleted


@scenario()
async def test_long_poll_on_a_queue_created_by_a_later_push(ctx: Ctx):
    q = ctx.q("not-yet")

    async def later():
        await asyncio.sleep(0.8)
        await ctx.client.queue(q).push({"data": "born"})

    t = asyncio.create_task(later())
    t0 = time.monotonic()
    got = await ctx.client.queue(q).wait(True).timeout_millis(8000).pop()
    await t
    assert data_of(got) == ["born"], got
    assert time.monotonic() - t0 < 5, "the parked pop was not woken by the push that created its queue"
    assert (await ctx.client.ack(got[0]))["success"] is True


@scenario()
async def test_consume_with_concurrency(ctx: Ctx):
    q = ctx.q("concurrency")
    for p in range(4):
        await ctx.client.queue(q).partition(f"c{p}").push([{"data": {"p": p, "i": i}} for i in range(3)])
    seen = []
    active = {"now": 0, "max": 0}

    async def handler(m):
        active["now"] += 1
        active["max"] = max(active["max"], active["now"])
        await asyncio.sleep(0.2)
        seen.extend((x["data"]["p"], x["data"]["i"]) for x in msgs(m))
        active["now"] -= 1

    c = Consumer(ctx.client.queue(q).concurrency(3).batch(1).partitions(1).timeout_millis(1000), handler)
    ok = await wait_until(lambda: len(seen) >= 12, 30)
    await c.stop()
    assert c.error is None, c.error
    assert ok and sorted(seen) == [(p, i) for p in range(4) for i in range(3)], seen
    assert active["max"] >= 2, "concurrency(3) never ran two handlers at once"


@scenario()
async def test_group_delete_keeping_metadata_restarts_from_stored_subscription(ctx: Ctx):
    q = ctx.q("keep-meta")
    group = ctx.q("g-keep")
    await ctx.client.queue(q).push({"data": "before-subscription"})
    await asyncio.sleep(0.3)
    assert await ctx.client.queue(q).group(group).subscription_mode("new").wait(False).pop() == []
    await asyncio.sleep(0.3)
    await ctx.client.queue(q).push({"data": "after-subscription"})
    got = await ctx.client.queue(q).group(group).batch(5).wait(False).pop()
    assert data_of(got) == ["after-subscription"]
    assert (await ctx.client.ack(got, True, {"group": group}))["success"] is True

    # Cursors gone, stored subscription kept: restart from the stored timestamp.
    res = await ctx.client.delete_consumer_group(group, delete_metadata=False)
    assert res.get("success") is True and res.get("metadataDeleted") is False, res
    again = await ctx.client.queue(q).group(group).batch(5).wait(False).pop()
    assert data_of(again) == ["after-subscription"], again
    assert (await ctx.client.ack(again, True, {"group": group}))["success"] is True

    # Metadata gone too: brand new, 'all' from the oldest message.
    res = await ctx.client.delete_consumer_group(group, delete_metadata=True)
    assert res.get("success") is True, res
    fresh = await ctx.client.queue(q).group(group).batch(5).wait(False).pop()
    assert data_of(fresh) == ["before-subscription", "after-subscription"], fresh


@scenario()
async def test_transaction_failed_ack_dead_letters(ctx: Ctx):
    q, qout = ctx.q("tx-dlq"), ctx.q("tx-dlq-out")
    group = ctx.q("g-txdlq")
    await ctx.client.queue(q).config({"retry_limit": 5}).create()
    await ctx.client.queue(q).partition("pp").push([{"data": "bad"}, {"data": "good"}])
    got = await ctx.client.queue(q).partition("pp").group(group).batch(2).wait(False).pop()
    assert data_of(got) == ["bad", "good"]
    res = await (
        ctx.client.transaction()
        .ack(got[0], "failed", {"consumer_group": group})
        .ack(got[1], "completed", {"consumer_group": group})
        .queue(qout).push([{"data": "derived"}])
        .commit()
    )
    assert res["success"] is True, res
    # Inside a transaction 'failed' dead-letters at once (no retry).
    dlq = await ctx.client.queue(q).partition("pp").dlq(group).get()
    call = ctx.last("GET", "/api/v1/dlq")
    assert call.status == 200 and "partition=pp" in call.query, call.describe()
    assert data_of(dlq["messages"]) == ["bad"], dlq
    assert await ctx.client.queue(q).group(group).wait(False).pop() == []
    assert data_of(await ctx.client.queue(qout).wait(False).pop()) == ["derived"]


@scenario()
async def test_admin_message_status_follows_the_lease(ctx: Ctx):
    q = ctx.q("msg-status")
    pushed = await ctx.client.queue(q).push({"data": 1})
    pid, tx = pushed[0]["partition_id"], pushed[0]["transaction_id"]
    admin = ctx.client.admin
    assert (await admin.get_message(pid, tx))["status"] == "pending"
    [m] = await ctx.client.queue(q).wait(False).pop()
    assert (await admin.get_message(pid, tx))["status"] == "processing"
    processing = await admin.list_messages(queue=q, status="processing")
    assert [x["transactionId"] for x in processing["messages"]] == [tx], processing
    assert (await ctx.client.ack(m))["success"] is True
    assert (await admin.get_message(pid, tx))["status"] == "completed"
    assert (await admin.list_messages(queue=q, status="pending"))["messages"] == []
