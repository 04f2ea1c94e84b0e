"""binary_push=True (2.6.0): pushes and transactions as the binary bodies
QPB1 / QTB1 (Content-Type application/x-queen-push), with and without
push_compression (zstd frames carrying client-minted message ids)."""

import uuid

import pytest

from compat import V1, Ctx, data_of, pop_all, scenario

pytestmark = pytest.mark.skipif(V1, reason="queen-mq 1.x has no binary push body")

def binary_calls(ctx: Ctx, path: str):
    """The requests to `path` that carried a binary body."""
    return [e for e in ctx.calls("POST", path) if e.request_body and e.request_body[:4] in (b"QPB1", b"QTB1")]


@scenario()
async def test_binary_push_plain_is_stored_as_sent(ctx: Ctx):
    client = ctx.new_client(binary_push=True)
    q = ctx.q("bin-plain")
    items = [
        {"data": {"n": 1}, "transactionId": "t1"},
        {"data": "hi", "transactionId": "t2"},
        {"data": None},
        {"data": {"unicode": "ünï", "list": [1, 2.5, True]}},
    ]
    results = await client.queue(q).partition("p1").push(items)
    [call] = binary_calls(ctx, "/api/v1/push")
    assert call.request_body[:5] == b"QPB1\x04", call.describe()
    assert call.status == 201, call.describe()
    answer = call.response_json()
    assert isinstance(answer, list) and len(answer) == 4, answer
    assert [r["index"] for r in answer] == [0, 1, 2, 3], answer
    assert all(r["status"] == "queued" for r in answer), answer
    assert [r["transaction_id"] for r in answer[:2]] == ["t1", "t2"], answer
    assert len(results) == 4, results

    got = await pop_all(lambda: client.queue(q).partition("p1").batch(10).wait(False))
    assert data_of(got) == [i["data"] for i in items], got
    assert [m["transactionId"] for m in got[:2]] == ["t1", "t2"], got
    assert [m["id"] for m in got] == [r["message_id"] for r in answer], (got, answer)


@scenario()
async def test_binary_push_compressed_keeps_the_client_ids(ctx: Ctx):
    client = ctx.new_client(binary_push=True, push_compression=True)
    q = ctx.q("bin-zstd")
    items = [{"data": {"n": i}, "transactionId": f"z-{i}"} for i in range(3)] + [{"data": {"n": 3}}]
    await client.queue(q).partition("p").push(items)
    [call] = binary_calls(ctx, "/api/v1/push")
    assert call.request_body[:5] == b"QPB1\x08", call.describe()
    assert call.status == 201, call.describe()
    answer = call.response_json()
    assert len(answer) == 4 and all(r["status"] == "queued" for r in answer), answer
    ids = [r["message_id"] for r in answer]
    # client-minted UUIDv7s, kept as the message ids
    assert all(uuid.UUID(i).version == 7 for i in ids), ids
    txns = [r["transaction_id"] for r in answer]
    assert txns[:3] == ["z-0", "z-1", "z-2"] and txns[3], answer

    got = await pop_all(lambda: client.queue(q).partition("p").batch(10).wait(False))
    assert [m["id"] for m in got] == ids, got
    assert [m["transactionId"] for m in got] == txns, got
    assert data_of(got) == [{"n": i} for i in range(4)], got
    for m in got:
        assert (await client.ack(m))["success"] is True


@scenario()
async def test_binary_push_duplicates_are_answered_as_for_json(ctx: Ctx):
    for compression in (False, True):
        client = ctx.new_client(binary_push=True, push_compression=compression)
        q = ctx.q(f"bin-dup-{int(compression)}")
        dupes = []

        async def on_dup(items, _err):
            dupes.extend(items)

        await client.queue(q).push([{"data": 1, "transactionId": "same"}])
        await client.queue(q).push(
            [{"data": 2, "transactionId": "same"}, {"data": 3, "transactionId": "other"}]
        ).on_duplicate(on_dup)
        call = binary_calls(ctx, "/api/v1/push")[-1]
        answer = call.response_json()
        assert [r["status"] for r in answer] == ["duplicate", "queued"], answer
        assert len(dupes) == 1 and dupes[0]["result"]["status"] == "duplicate", dupes

        got = await pop_all(lambda: client.queue(q).batch(10).wait(False))
        assert data_of(got) == [1, 3], got


@scenario()
async def test_binary_transaction_pushes_and_acks(ctx: Ctx):
    client = ctx.new_client(binary_push=True, push_compression=True)
    qin, qout = ctx.q("btx-in"), ctx.q("btx-out")
    await client.queue(qin).push([{"data": {"order": 1}}])
    [m] = await client.queue(qin).wait(False).pop()

    res = await (
        client.transaction()
        .queue(qout).partition("p").push([{"data": {"derived": 1}, "transactionId": "out-1"}, {"data": {"derived": 2}}])
        .ack(m)
        .commit()
    )
    [call] = binary_calls(ctx, "/api/v1/transaction")
    assert call.request_body[:4] == b"QTB1", call.describe()
    assert call.status == 200, call.describe()
    assert res["success"] is True, res
    # the broker answers the head's ack first; the client puts the results back in its own order
    assert [r["type"] for r in call.response_json()["results"]] == ["ack", "push", "push"], call.describe()
    assert [r["type"] for r in res["results"]] == ["push", "push", "ack"], res
    assert [r["index"] for r in res["results"]] == [0, 1, 2], res

    assert await client.queue(qin).wait(False).pop() == [], "the transaction's ack did not commit"
    out = await pop_all(lambda: client.queue(qout).partition("p").batch(10).wait(False))
    assert data_of(out) == [{"derived": 1}, {"derived": 2}], out
    assert out[0]["transactionId"] == "out-1", out
    pushed = [r for r in res["results"] if r["type"] == "push"]
    assert [m["id"] for m in out] == [r["messageId"] for r in pushed], (out, res)


@scenario()
async def test_binary_transaction_of_pushes_only(ctx: Ctx):
    client = ctx.new_client(binary_push=True, push_compression=True)
    q = ctx.q("btx-only")
    res = await client.transaction().queue(q).push([{"data": "a"}, {"data": "b"}]).commit()
    [call] = binary_calls(ctx, "/api/v1/transaction")
    assert call.status == 200 and res["success"] is True, call.describe()
    out = await pop_all(lambda: client.queue(q).batch(10).wait(False))
    assert data_of(out) == ["a", "b"], out


@scenario()
async def test_a_trace_id_falls_back_to_json(ctx: Ctx):
    client = ctx.new_client(binary_push=True)
    q = ctx.q("bin-trace")
    await client.queue(q).push([{"data": 1, "traceId": str(uuid.uuid4())}])
    assert binary_calls(ctx, "/api/v1/push") == [], "a push with a trace id goes as JSON"
    call = ctx.last("POST", "/api/v1/push")
    assert call.status == 201, call.describe()


@scenario()
async def test_a_refused_binary_push_names_the_field_and_stores_nothing(ctx: Ctx):
    client = ctx.new_client(binary_push=True)
    q = ctx.q("bin-refused")
    with pytest.raises(Exception):
        await client.queue(q).push([{"data": 1, "transactionId": "ok"}, {"data": 2, "transactionId": "t" * 300}])
    [call] = binary_calls(ctx, "/api/v1/push")
    assert call.status == 400, call.describe()
    error = call.response_json()["error"]
    assert "groups[0].items[1].transactionId must be at most 255 characters" in error, error
    # nothing of it was stored, the valid item neither
    assert await client.queue(q).wait(False).pop() == []


@scenario()
async def test_framed_pop_is_answered_in_json(ctx: Ctx):
    """framed_pop=True asks for QPF1; its u64 partition ids are not this
    broker's (UUIDs), so the answer stays JSON, which the client reads."""
    client = ctx.new_client(framed_pop=True)
    q = ctx.q("framed")
    await client.queue(q).push([{"data": {"n": i}} for i in range(3)])
    got = await client.queue(q).group(ctx.q("g")).wait(False).pop()
    assert data_of(got) == [{"n": 0}, {"n": 1}, {"n": 2}], got
    last = ctx.last("GET", "/api/v1/pop/")
    assert "frames=true" in last.query and last.response_body.startswith(b"{"), last.describe()
    assert (await client.ack(got, True, {"group": got[0]["consumerGroup"]}))["success"] is True
