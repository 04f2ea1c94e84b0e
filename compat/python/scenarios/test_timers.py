"""client.timers / client.timer (2.6.0): keyed timers, "not before", once, cancel."""

import asyncio
import time
import uuid

import pytest

from compat import V1, Ctx, scenario

pytestmark = pytest.mark.skipif(V1, reason="queen-mq 1.x has no timers")


@scenario()
async def test_timer_fires_not_early_and_once(ctx: Ctx):
    q = ctx.q("timer")
    txn = str(uuid.uuid4())
    sent = time.monotonic()
    res = await ctx.client.timer(q).key("order-1/remind").payload({"hello": 1}).after_ms(1500).txn(txn).schedule()
    assert res["ok"] is True and res["status"] == "scheduled" and res["txn"] == txn, res
    peek = await ctx.client.timers.peek(q, "order-1/remind")
    assert peek["found"] is True and peek["messageId"] == res["messageId"], peek
    early = await ctx.client.queue(q).wait(False).pop()
    assert early == [], "a timer fired before its time"
    got = await ctx.client.queue(q).wait(True).timeout_millis(8000).pop()
    elapsed = time.monotonic() - sent
    assert len(got) == 1 and got[0]["data"] == {"hello": 1}, got
    assert elapsed >= 1.5, f"delivered after {elapsed:.2f}s, before its 1.5 s"
    assert got[0]["transactionId"] == txn and got[0]["id"] == res["messageId"], got
    await ctx.client.ack(got[0])
    await asyncio.sleep(1.2)
    assert await ctx.client.queue(q).wait(False).pop() == [], "a timer fired twice"
    gone = await ctx.client.timers.peek(q, "order-1/remind")
    assert gone["found"] is False, gone


@scenario()
async def test_timer_reschedule_and_cancel(ctx: Ctx):
    q = ctx.q("timer-cancel")
    first = await ctx.client.timer(q).key("k").payload("a").after_ms(60_000).schedule()
    assert first["status"] == "scheduled"
    again = await ctx.client.timer(q).key("k").payload("b").after_ms(60_000).schedule()
    assert again["status"] == "rescheduled" and again["txn"] != first["txn"], again
    listed = await ctx.client.timers.list(q)
    assert [r["timerKey"] for r in listed["rows"]] == ["k"], listed
    cancelled = await ctx.client.timers.cancel(q, "k")
    assert cancelled["ok"] is True and cancelled["status"] == "cancelled" and cancelled["txn"] == again["txn"], cancelled
    absent = await ctx.client.timers.cancel(q, "k")
    assert absent["ok"] is False and absent["status"] == "absent", absent
    # a cancelled timer never fires
    soon = await ctx.client.timer(q).key("soon").payload("c").after_ms(300).schedule()
    assert soon["ok"]
    assert (await ctx.client.timer(q).key("soon").cancel())["status"] == "cancelled"
    await asyncio.sleep(1.5)
    assert await ctx.client.queue(q).wait(False).pop() == []


@scenario()
async def test_timer_in_a_transaction_commits_with_it(ctx: Ctx):
    from queen.errors import TimerError

    q, ns = ctx.q("timer-tx"), "compat-" + uuid.uuid4().hex[:10]
    # refused: the guard fails, so the timer is not scheduled either
    res = await (
        ctx.client.transaction()
        .timer(q).key("tx-1").payload({"x": 1}).after_ms(0).schedule()
        .kv.check(ns, "gate", expect=5, required=True)
        .commit()
    )
    assert not res and res["reason"] == "kv_precondition", res
    assert (await ctx.client.timers.peek(q, "tx-1"))["found"] is False
    ok = await ctx.client.transaction().timer(q).key("tx-1").payload({"x": 2}).after_ms(0).schedule().commit()
    assert ok["success"] is True and ok["results"][0]["type"] == "timer", ok
    got = await ctx.client.queue(q).wait(True).timeout_millis(8000).pop()
    assert [m["data"] for m in got] == [{"x": 2}], got
    with pytest.raises(TimerError) as e:
        await ctx.client.timers.batch([{"op": "schedule", "queue": q, "timerKey": "z", "payload": "@@ not base64", "delayMs": 1}])
    assert e.value.status == 400 and e.value.reason == "timers_payload_not_base64"
    assert (await ctx.client.timers.peek(q, "z"))["found"] is False



def zstd_frame(blocks, content_size=None) -> bytes:
    """A zstd frame built by hand from `(kind, bytes_or_run)` blocks: `("raw",
    b"...")` stored as is, `("rle", (byte, n))` one byte repeated n times
    (n <= 128 KiB). Both block types are part of the format (RFC 8878
    §3.1.1.2), so any decoder takes the frame. With `content_size` the header
    declares it (single segment); without, it declares a 1 MiB window only.

    The 2.6.0 client never compresses: `payload(bytes, zstd=True)` sends the
    caller's bytes as they are with `payloadZstd: true`.
    """
    out = bytearray(b"\x28\xb5\x2f\xfd")  # magic number
    if content_size is not None:
        out.append(0xA0)  # single segment, 4-byte content size, no checksum
        out += content_size.to_bytes(4, "little")
    else:
        out.append(0x00)  # no content size
        out.append(10 << 3)  # window descriptor: 2^(10+10) = 1 MiB
    for i, (kind, body) in enumerate(blocks):
        last = 1 if i == len(blocks) - 1 else 0
        if kind == "raw":
            out += ((len(body) << 3) | last).to_bytes(3, "little") + body
        else:
            byte, n = body
            out += ((n << 3) | (1 << 1) | last).to_bytes(3, "little") + bytes([byte])
    return bytes(out)


def raw_frame(data: bytes) -> bytes:
    chunks = [data[i:i + (1 << 17)] for i in range(0, len(data), 1 << 17)] or [b""]
    return zstd_frame([("raw", c) for c in chunks], content_size=len(data))


def json_bytes(v) -> bytes:
    import json

    return json.dumps(v, separators=(",", ":")).encode()


@scenario()
async def test_timer_zstd_payload_is_delivered_decompressed_and_bounded(ctx: Ctx):
    from queen.errors import TimerError

    q = ctx.q("timer-zstd")
    doc = {"compressed": True, "text": "z" * 300_000}
    res = await ctx.client.timer(q).key("z1").payload(raw_frame(json_bytes(doc)), zstd=True).after_ms(200).schedule()
    assert res["ok"] is True and res["status"] == "scheduled", res
    got = await ctx.client.queue(q).wait(True).timeout_millis(8000).pop()
    assert len(got) == 1 and got[0]["data"] == doc, [m["data"] for m in got][:1]
    assert got[0]["id"] == res["messageId"], got[0]
    # a bomb: 2 MiB of JSON in 16 run-length blocks (under 100 bytes on the
    # wire), with and without the size in its header: 413, nothing scheduled
    runs = [("raw", b'"')] + [("rle", (ord("y"), 1 << 17))] * 16 + [("raw", b'"')]
    for key, size in (("z2", (2 << 20) + 2), ("z3", None)):
        with pytest.raises(TimerError) as e:
            await ctx.client.timer(q).key(key).payload(zstd_frame(runs, size), zstd=True).after_ms(0).schedule()
        assert e.value.status == 413 and e.value.reason == "timers_payload_too_large", e.value
        assert (await ctx.client.timers.peek(q, key))["found"] is False


@scenario()
async def test_recurring_timer_through_the_clients_batch_call(ctx: Ctx):
    """The 2.6.0 client passes fields it does not know through `timers.batch`
    (it checks only the server-owned ones), so a recurring schedule goes
    through it unchanged; peek, list and cancel are the one-shot calls."""
    from queen.errors import TimerError

    q = ctx.q("timer-recurring")
    op = ctx.client.timers.op.schedule(q, "beat", {"beat": True}, delay_ms=200, txn="beat")
    op["intervalMs"] = 500
    [res] = await ctx.client.timers.batch([op])
    assert res["ok"] is True and res["recurring"] is True and res["intervalMs"] == 500, res
    txns = []
    deadline = time.monotonic() + 20
    while len(txns) < 3 and time.monotonic() < deadline:
        for m in await ctx.client.queue(q).batch(10).wait(True).timeout_millis(2000).pop():
            assert m["data"] == {"beat": True}, m
            txns.append(m["transactionId"])
            await ctx.client.ack(m)
    assert len(txns) >= 3 and len(set(txns)) == len(txns), txns
    assert all(t.startswith("beat@") for t in txns), txns
    peek = await ctx.client.timers.peek(q, "beat")
    assert peek["found"] is True and peek["intervalMs"] == 500 and peek["fires"] >= 3, peek
    listed = await ctx.client.timers.list(q)
    assert listed["rows"][0]["catchUp"] == "one", listed
    cancelled = await ctx.client.timers.cancel(q, "beat")
    assert cancelled["status"] == "cancelled" and cancelled["txn"] == "beat", cancelled
    assert (await ctx.client.timers.peek(q, "beat"))["found"] is False
    # a bad expression is a TimerError naming the field, nothing scheduled
    bad = ctx.client.timers.op.schedule(q, "bad", 1, delay_ms=0)
    bad["cron"] = "61 * * * *"
    with pytest.raises(TimerError) as e:
        await ctx.client.timers.batch([bad])
    assert e.value.status == 400 and e.value.reason == "timers_bad_cron", e.value
    assert (await ctx.client.timers.peek(q, "bad"))["found"] is False
