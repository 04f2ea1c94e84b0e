"""consume(): handlers, auto-ack, batches, each(), manual ack, callbacks, traces."""

import asyncio

from compat import Consumer, Ctx, data_of, msgs, scenario, wait_until


async def _drained(ctx: Ctx, q: str, group: str = None) -> bool:
    b = ctx.client.queue(q).wait(False)
    if group:
        b = b.group(group)
    return await b.pop() == []


@scenario()
async def test_consume_auto_ack_single_messages(ctx: Ctx):
    q = ctx.q("consume-single")
    await ctx.client.queue(q).create()
    await ctx.client.queue(q).push([{"data": {"n": i}} for i in range(5)])
    received = []

    async def handler(message):
        assert isinstance(message, dict), "batch(1) must hand a single message to the handler"
        received.append(message)

    await asyncio.wait_for(
        ctx.client.queue(q).batch(1).limit(5).timeout_millis(1000).consume(handler), 30
    )
    assert [m["data"]["n"] for m in received] == list(range(5))
    acks = ctx.calls("POST", "/api/v1/ack")
    assert len(acks) == 5 and all(e.status == 200 for e in acks), [e.describe() for e in acks]
    assert all(e.response_json()[0]["success"] is True for e in acks), [e.describe() for e in acks]
    assert await _drained(ctx, q)


@scenario()
async def test_consume_batches_and_each(ctx: Ctx):
    q = ctx.q("consume-batch")
    await ctx.client.queue(q).push([{"data": {"n": i}} for i in range(6)])
    batches = []

    async def handler(batch):
        assert isinstance(batch, list)
        batches.append([m["data"]["n"] for m in batch])

    await asyncio.wait_for(
        ctx.client.queue(q).batch(3).limit(6).timeout_millis(1000).consume(handler), 30
    )
    assert sum(batches, []) == list(range(6)), batches
    assert all(len(b) <= 3 for b in batches), batches
    batch_acks = ctx.calls("POST", "/api/v1/ack/batch")
    assert batch_acks and all(e.status == 200 for e in batch_acks), [e.describe() for e in batch_acks]
    assert await _drained(ctx, q)

    # each(): a batch pop, handled one message at a time.
    q2 = ctx.q("consume-each")
    await ctx.client.queue(q2).push([{"data": {"n": i}} for i in range(4)])
    singles = []

    async def one(message):
        assert isinstance(message, dict)
        singles.append(message["data"]["n"])

    await asyncio.wait_for(
        ctx.client.queue(q2).batch(4).each().limit(4).timeout_millis(1000).consume(one), 30
    )
    assert singles == [0, 1, 2, 3]
    assert await _drained(ctx, q2)


@scenario()
async def test_consume_with_broker_sized_batches(ctx: Ctx):
    """No batch()/partitions(): both clients leave the sizing to the broker (autopilot)."""
    q = ctx.q("consume-autopilot")
    await ctx.client.queue(q).push([{"data": {"n": i}} for i in range(4)])
    seen = []

    async def handler(batch):
        seen.extend(m["data"]["n"] for m in msgs(batch))

    c = Consumer(ctx.client.queue(q).timeout_millis(1000), handler)
    ok = await wait_until(lambda: len(seen) >= 4, 20)
    await c.stop()
    assert c.error is None, c.error
    assert ok and sorted(seen) == [0, 1, 2, 3], seen
    assert "autopilot=true" in ctx.last("GET", "/api/v1/pop/").query
    assert await _drained(ctx, q)


@scenario()
async def test_consume_manual_ack(ctx: Ctx):
    q = ctx.q("manual-ack")
    group = ctx.q("g-manual")
    await ctx.client.queue(q).push([{"data": {"n": i}} for i in range(3)])
    results = []

    async def handler(message):
        res = await ctx.client.ack(message, True, {"group": group})
        results.append(res)

    await asyncio.wait_for(
        ctx.client.queue(q).group(group).batch(1).auto_ack(False).limit(3).timeout_millis(1000).consume(handler),
        30,
    )
    assert [r["success"] for r in results] == [True] * 3, results
    acks = ctx.calls("POST", "/api/v1/ack")
    assert all((e.request_json() or {}).get("consumerGroup") == group for e in acks)
    assert await _drained(ctx, q, group)
    # The queue-mode cursor is independent of the group's.
    assert len(await ctx.client.queue(q).batch(10).wait(False).pop()) == 3


@scenario()
async def test_consume_success_and_error_callbacks(ctx: Ctx):
    """With on_success/on_error the client does not auto-ack: the callbacks do."""
    q = ctx.q("callbacks")
    await ctx.client.queue(q).config({"retry_limit": 5}).create()
    await ctx.client.queue(q).push([{"data": {"ok": True}}, {"data": {"ok": False}}])
    outcomes = []
    attempts = {"n": 0}

    async def handler(message):
        attempts["n"] += 1
        if not message["data"]["ok"] and attempts["n"] < 3:
            raise ValueError("not yet")
        return "done"

    async def on_success(message, result):
        outcomes.append(("ok", message["data"]["ok"], result))
        await ctx.client.ack(message, True)

    async def on_error(message, error):
        outcomes.append(("error", message["data"]["ok"], str(error)))
        await ctx.client.ack(message, False, {"error": str(error)})

    stop = asyncio.Event()
    builder = (
        ctx.client.queue(q).batch(1).timeout_millis(1000).consume(handler, signal=stop)
        .on_success(on_success).on_error(on_error)
    )

    async def run():
        await builder

    task = asyncio.create_task(run())
    ok = await wait_until(lambda: sum(1 for o in outcomes if o[0] == "ok") >= 2, 20)
    stop.set()
    await asyncio.wait_for(task, 10)
    assert ok, outcomes
    assert outcomes[0] == ("ok", True, "done")
    assert ("error", False, "not yet") in outcomes
    assert outcomes[-1] == ("ok", False, "done")
    assert await _drained(ctx, q)


@scenario()
async def test_message_trace_inside_consume(ctx: Ctx):
    q = ctx.q("trace")
    name = ctx.q("trace-name")
    await ctx.client.queue(q).push({"data": {"t": 1}})
    traced = []

    async def handler(message):
        traced.append(await message["trace"]({"traceName": name, "eventType": "info", "data": {"step": "parsed"}}))
        traced.append(await message["trace"]({"data": {"step": "no-name"}}))

    await asyncio.wait_for(ctx.client.queue(q).batch(1).limit(1).timeout_millis(1000).consume(handler), 30)
    posts = ctx.calls("POST", "/api/v1/traces")
    assert len(posts) == 2, [e.describe() for e in posts]
    assert all(t.get("success") is True for t in traced), traced
    assert all(e.status == 201 for e in posts), [e.describe() for e in posts]
