"""Push: single, batched, payload types, named partitions, traceId, dedup, client buffering."""

import uuid

from compat import Ctx, data_of, scenario


def _pop(ctx: Ctx, q: str, partition: str = None, batch: int = 50):
    b = ctx.client.queue(q)
    if partition:
        b = b.partition(partition)
    return b.batch(batch).wait(False).pop()


@scenario()
async def test_push_single_and_batched(ctx: Ctx):
    q = ctx.q("push")
    await ctx.client.queue(q).create()

    single = await ctx.client.queue(q).push({"data": {"n": 0}})
    assert isinstance(single, list) and len(single) == 1, single
    r0 = single[0]
    assert r0["status"] == "queued", r0
    for key in ("index", "transaction_id", "message_id", "partition_id", "queueName"):
        assert key in r0, f"push result misses {key}: {r0}"
    assert r0["queueName"] == q

    ok = []

    async def on_success(items):
        ok.extend(items)

    batch = [{"data": {"n": i}} for i in range(1, 11)]
    res = await ctx.client.queue(q).push(batch).on_success(on_success)
    assert [r["status"] for r in res] == ["queued"] * 10, res
    assert [r["index"] for r in res] == list(range(10))
    assert len(ok) == 10, "on_success was not called with the 10 queued items"

    got = await _pop(ctx, q)
    assert data_of(got) == [{"n": i} for i in range(11)], "messages of one partition must come back in push order"
    assert got[0]["transactionId"] == r0["transaction_id"]
    assert got[0]["id"] == r0["message_id"]
    ack = await ctx.client.ack(got)
    assert ack["success"] is True, ack
    assert await _pop(ctx, q) == []


@scenario()
async def test_push_payload_types_and_trace_id(ctx: Ctx):
    q = ctx.q("payloads")
    trace = str(uuid.uuid4())
    payloads = [{"nested": {"a": [1, 2, {"b": None}]}}, "plain text", 42, 12.5, None, [1, "two"], True]
    await ctx.client.queue(q).push([{"data": p} for p in payloads])  # auto-creates the queue
    await ctx.client.queue(q).push({"data": {"traced": True}, "traceId": trace})
    got = await _pop(ctx, q)
    assert data_of(got) == payloads + [{"traced": True}]
    assert got[-1]["traceId"] == trace
    for m in got:
        for key in ("id", "transactionId", "traceId", "data", "producerSub", "createdAt",
                    "partitionId", "partition", "leaseId", "consumerGroup"):
            assert key in m, f"popped message misses {key}: {m}"
    assert (await ctx.client.ack(got))["success"] is True


@scenario()
async def test_push_to_named_partitions(ctx: Ctx):
    q = ctx.q("partitions")
    await ctx.client.queue(q).create()
    ra = await ctx.client.queue(q).partition("p-a").push([{"data": {"p": "a", "i": i}} for i in range(3)])
    rb = await ctx.client.queue(q).partition("p-b").push([{"data": {"p": "b", "i": i}} for i in range(2)])
    assert {r["status"] for r in ra + rb} == {"queued"}
    assert len({r["partition_id"] for r in ra}) == 1 and ra[0]["partition_id"] != rb[0]["partition_id"]

    got_b = await _pop(ctx, q, partition="p-b")
    assert data_of(got_b) == [{"p": "b", "i": 0}, {"p": "b", "i": 1}], got_b
    assert {m["partition"] for m in got_b} == {"p-b"}
    got_a = await _pop(ctx, q, partition="p-a")
    assert data_of(got_a) == [{"p": "a", "i": i} for i in range(3)]
    assert {m["partitionId"] for m in got_a} == {ra[0]["partition_id"]}
    assert (await ctx.client.ack(got_a + got_b))["success"] is True
    # Nothing in the Default partition.
    assert await _pop(ctx, q) == []


@scenario()
async def test_transaction_id_dedup(ctx: Ctx):
    q = ctx.q("dedup")
    await ctx.client.queue(q).create()
    tx = str(uuid.uuid4())
    first = await ctx.client.queue(q).push({"data": {"v": 1}, "transactionId": tx})
    assert first[0]["status"] == "queued" and first[0]["transaction_id"] == tx, first

    dups, oks = [], []

    async def on_duplicate(items, err):
        dups.extend(items)

    async def on_success(items):
        oks.extend(items)

    again = await (
        ctx.client.queue(q)
        .push([{"data": {"v": 2}, "transactionId": tx}, {"data": {"v": 3}}])
        .on_duplicate(on_duplicate)
        .on_success(on_success)
    )
    assert again[0]["status"] == "duplicate", again
    assert again[0]["message_id"] == first[0]["message_id"], "duplicate must name the original message"
    assert again[1]["status"] == "queued"
    assert [d["transactionId"] for d in dups] == [tx], "on_duplicate not called for the duplicate"
    assert len(oks) == 1

    # The same transactionId in another partition is another message.
    other = await ctx.client.queue(q).partition("elsewhere").push({"data": {"v": 4}, "transactionId": tx})
    assert other[0]["status"] == "queued", other

    got2 = await _pop(ctx, q, partition="elsewhere")
    assert data_of(got2) == [{"v": 4}]
    got = await _pop(ctx, q)  # wildcard: only the Default partition has anything left
    assert data_of(got) == [{"v": 1}, {"v": 3}], "the duplicate must not be stored"
    assert (await ctx.client.ack(got + got2))["success"] is True


@scenario()
async def test_client_side_buffered_push(ctx: Ctx):
    q = ctx.q("buffered")
    await ctx.client.queue(q).create()
    res = await ctx.client.queue(q).buffer({"message_count": 5, "time_millis": 200}).push(
        [{"data": {"n": i}} for i in range(12)]
    )
    assert res.get("buffered") is True, res
    await ctx.client.flush_all_buffers()
    got = await _pop(ctx, q)
    assert sorted(m["data"]["n"] for m in got) == list(range(12)), data_of(got)
    assert (await ctx.client.ack(got))["success"] is True
    pushes = ctx.calls("POST", "/api/v1/push")
    assert pushes and all(e.status == 201 for e in pushes), [e.describe() for e in pushes]
