"""client.kv (2.6.0): key/value rows with versions, through POST /api/v1/kv."""

import asyncio
import uuid

import pytest

from compat import V1, Ctx, scenario

pytestmark = pytest.mark.skipif(V1, reason="queen-mq 1.x has no key/value API")


def ns_of(ctx: Ctx) -> str:
    return "compat-" + uuid.uuid4().hex[:12]


@scenario()
async def test_kv_put_get_delete_with_versions(ctx: Ctx):
    kv, ns = ctx.client.kv, ns_of(ctx)
    assert not await kv.get(ns, "missing")
    first = await kv.put(ns, "k", {"a": 1}, forever=True)
    assert first["applied"] is True and first["version"] > 0, first
    got = await kv.get(ns, "k")
    assert got["found"] is True and got["value"] == {"a": 1} and got["version"] == first["version"], got
    assert got["expiresAt"] is None and got["updatedAt"], got
    # a later write always carries a higher version
    second = await kv.put(ns, "k", None, ttl_seconds=60)
    assert second["version"] > first["version"], (first, second)
    got = await kv.get(ns, "k")
    assert got["found"] is True and got["value"] is None and got["expiresAt"], got
    gone = await kv.delete(ns, "k")
    assert gone["applied"] is True, gone
    again = await kv.delete(ns, "k")
    assert again["applied"] is False and again["reason"] == "absent", again
    assert not await kv.get(ns, "k")
    # re-created after the delete: the version still rises
    third = await kv.put(ns, "k", 3, forever=True)
    assert third["version"] > second["version"]


@scenario()
async def test_kv_stale_expect_is_refused(ctx: Ctx):
    kv, ns = ctx.client.kv, ns_of(ctx)
    v1 = (await kv.put(ns, "doc", {"rev": 1}, forever=True))["version"]
    v2 = (await kv.put(ns, "doc", {"rev": 2}, forever=True, expect=v1))["version"]
    stale = await kv.put(ns, "doc", {"rev": "stale"}, forever=True, expect=v1)
    assert stale["applied"] is False and stale["reason"] == "version", stale
    assert stale["version"] == v2 and stale["value"] == {"rev": 2}, stale
    # expect=N never creates; expect=0 means "must not exist"
    none = await kv.put(ns, "nothing", 1, forever=True, expect=7)
    assert none["applied"] is False and none["reason"] == "absent" and none["version"] == 0, none
    exists = await kv.put(ns, "doc", 1, forever=True, expect=0)
    assert exists["applied"] is False and exists["reason"] == "exists", exists
    stale_delete = await kv.delete(ns, "doc", expect=v1)
    assert stale_delete["applied"] is False and stale_delete["reason"] == "version"
    assert (await kv.get(ns, "doc"))["value"] == {"rev": 2}
    held = await kv.check(ns, "doc", expect=v2)
    assert held["applied"] is True and "value" not in held, held


@scenario()
async def test_kv_put_if_absent_race_has_one_winner(ctx: Ctx):
    ns = ns_of(ctx)
    clients = [ctx.new_client() for _ in range(4)]
    results = await asyncio.gather(
        *(clients[i % 4].kv.put_if_absent(ns, "leader", {"me": i}, ttl_seconds=60) for i in range(20))
    )
    winners = [r for r in results if r["applied"]]
    assert len(winners) == 1, results
    losers = [r for r in results if not r["applied"]]
    assert all(r["reason"] == "exists" and r["version"] == winners[0]["version"] for r in losers), losers
    assert (await ctx.client.kv.get(ns, "leader"))["value"] == winners[0]["value"]


@scenario()
async def test_kv_incr_is_atomic_under_20_callers(ctx: Ctx):
    ns = ns_of(ctx)
    clients = [ctx.new_client() for _ in range(4)]
    results = await asyncio.gather(
        *(clients[i % 4].kv.incr(ns, "hits", delta=1, forever=True) for i in range(20))
    )
    assert all(r["applied"] for r in results), results
    assert sorted(r["value"] for r in results) == list(range(1, 21)), results
    assert (await ctx.client.kv.get(ns, "hits"))["value"] == 20
    # bounds refuse without spending; a non-number refuses with "type"
    capped = await ctx.client.kv.incr(ns, "hits", delta=5, max=22, forever=True)
    assert capped["applied"] is False and capped["reason"] == "limit" and capped["value"] == 20, capped
    half = await ctx.client.kv.incr(ns, "hits", delta=0.5, forever=True)
    assert half["applied"] is True and half["value"] == 20.5, half
    await ctx.client.kv.put(ns, "word", "abc", forever=True)
    typed = await ctx.client.kv.incr(ns, "word", forever=True)
    assert typed["applied"] is False and typed["reason"] == "type", typed


@scenario()
async def test_kv_get_prefix_pages_in_key_order(ctx: Ctx):
    kv, ns = ctx.client.kv, ns_of(ctx)
    await kv.batch([kv.op.put(ns, f"user:{i:02d}", i, forever=True) for i in range(7)])
    await kv.put(ns, "other", 0, forever=True)
    page = await kv.get_prefix(ns, "user:", limit=3)
    assert [r["key"] for r in page["rows"]] == ["user:00", "user:01", "user:02"], page
    assert page["truncated"] is True and page["nextAfter"] == "user:02", page
    every = await kv.list_all(ns, "user:", limit=3)
    assert [r["value"] for r in every] == list(range(7)), every
    keys = await kv.get_prefix(ns, "user:", keys_only=True)
    assert all("value" not in r for r in keys["rows"]) and keys["truncated"] is False, keys
    many = await kv.get_many(ns, ["user:03", "nope", "user:01"])
    assert [r["key"] for r in many["rows"]] == ["user:01", "user:03"] and many["missing"] == ["nope"], many


@scenario()
async def test_kv_lifetimes_expire_rows(ctx: Ctx):
    kv, ns = ctx.client.kv, ns_of(ctx)
    await kv.put(ns, "short", "x", ttl_seconds=1)
    assert (await kv.get(ns, "short"))["found"] is True
    await asyncio.sleep(1.3)
    assert not await kv.get(ns, "short"), "an expired row is never returned"
    # an expired row does not block "must not exist"
    again = await kv.put_if_absent(ns, "short", "y", forever=True)
    assert again["applied"] is True, again


@scenario()
async def test_kv_bad_input_is_refused_whole(ctx: Ctx):
    from queen.errors import KvError

    kv, ns = ctx.client.kv, ns_of(ctx)
    with pytest.raises(KvError) as e:
        await kv.batch([kv.op.put(ns, "ok", 1, forever=True), {"op": "frobnicate", "ns": ns, "key": "k"}])
    assert e.value.status == 400 and e.value.reason == "kv_unknown_op", vars(e.value)
    with pytest.raises(KvError) as e:
        await kv.put(ns, "big", "x" * 70_000, forever=True)
    assert e.value.status == 413 and e.value.reason == "kv_value_too_large"
    with pytest.raises(KvError) as e:
        await kv.get(ns, "k" * 600)
    assert e.value.status == 413
    with pytest.raises(KvError) as e:
        await kv.batch([{"op": "put", "ns": ns, "key": "x", "value": 1, "forever": True, "expect": -3}])
    assert e.value.status == 400 and e.value.reason == "kv_bad_expect"
    with pytest.raises(KvError) as e:
        await kv.batch([kv.op.get(ns, f"k{i}") for i in range(300)])
    assert e.value.status == 400 and e.value.reason == "kv_too_many_ops"
    assert not await kv.get(ns, "ok"), "a refused call wrote nothing"


@scenario()
async def test_kv_write_rolls_back_with_a_failing_transaction(ctx: Ctx):
    ns, q = ns_of(ctx), ctx.q("kv-tx")
    await ctx.client.queue(q).push({"data": {"n": 1}})
    [m] = await ctx.client.queue(q).wait(False).pop()
    ok = await (
        ctx.client.transaction().ack(m).kv.put(ns, "state", {"seen": 1}, forever=True).commit()
    )
    assert ok["success"] is True, ok
    kv_slot = ok["results"][-1]
    assert kv_slot["type"] == "kv" and kv_slot["index"] == 1 and kv_slot["applied"] is True, ok
    assert (await ctx.client.kv.get(ns, "state"))["value"] == {"seen": 1}

    # a required precondition that loses undoes the push and the write beside it
    out = ctx.q("kv-tx-out")
    res = await (
        ctx.client.transaction()
        .queue(out).push([{"data": {"never": True}}])
        .kv.put(ns, "state", {"seen": 2}, forever=True)
        .kv.check(ns, "gate", expect=123456789, required=True)
        .commit()
    )
    assert not res and res["reason"] == "kv_precondition" and res["failedIndex"] == 2, res
    assert res["kvReason"] == "absent", res
    assert (await ctx.client.kv.get(ns, "state"))["value"] == {"seen": 1}
    assert await ctx.client.queue(out).wait(False).pop() == []

    # once(): the second commit of the same key applies nothing
    first = await ctx.client.transaction().queue(out).push([{"data": 1}]).once(ns, "job-7", forever=True).commit()
    assert first["success"] is True, first
    second = await ctx.client.transaction().queue(out).push([{"data": 2}]).once(ns, "job-7", forever=True).commit()
    assert not second and second["kvReason"] == "exists", second
    got = await ctx.client.queue(out).batch(5).wait(False).pop()
    assert [g["data"] for g in got] == [1], got
