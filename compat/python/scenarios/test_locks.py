"""client.lock / client.semaphore (2.6.0): permits with lifetimes and fencing tokens."""

import asyncio
import uuid

import pytest

from compat import V1, Ctx, scenario

pytestmark = pytest.mark.skipif(V1, reason="queen-mq 1.x has no locks")


def name_of() -> str:
    return "compat-lock-" + uuid.uuid4().hex[:10]


@scenario()
async def test_lock_is_exclusive_and_tokens_rise(ctx: Ctx):
    name = name_of()
    a = ctx.client.lock(name, ttl_seconds=30, auto_renew=False)
    b = ctx.new_client().lock(name, ttl_seconds=30, auto_renew=False)
    assert await a.acquire() is True
    first = a.token
    assert first and a.slot == 0
    assert await b.acquire() is False, "a held lock admitted a second holder"
    who = await ctx.client.locks.get(name)
    assert who["held"] is True and [h["owner"] for h in who["holders"]] == [a.owner], who
    # renewing gives a new, higher token; the old one stops working
    assert await a.renew() is True and a.token > first
    stale = await ctx.client.locks.release(name, token=first)
    assert stale["released"] is False and stale["reason"] == "lost", stale
    await a.release()
    assert await b.acquire() is True
    assert b.token > first, "the next holder's token must be higher"
    await b.release()


@scenario()
async def test_resent_acquire_of_the_same_owner_is_its_permit(ctx: Ctx):
    name, owner = name_of(), "owner-" + uuid.uuid4().hex[:6]
    one = await ctx.client.locks.acquire(name, ttl_seconds=30, owner=owner)
    two = await ctx.client.locks.acquire(name, ttl_seconds=30, owner=owner)
    assert one["acquired"] and two["acquired"] and two.get("already") is True, (one, two)
    assert two["token"] == one["token"] and two["guard"] == one["guard"]


@scenario()
async def test_expired_permit_goes_to_the_next_holder(ctx: Ctx):
    name = name_of()
    r = await ctx.client.locks.acquire(name, ttl_seconds=1, owner="first")
    assert r["acquired"]
    await asyncio.sleep(1.3)
    s = await ctx.client.locks.acquire(name, ttl_seconds=30, owner="second")
    assert s["acquired"] and s["token"] > r["token"], (r, s)


@scenario()
async def test_semaphore_of_n_admits_n(ctx: Ctx):
    name, n = name_of(), 3
    handles = [ctx.new_client().semaphore(name, n, ttl_seconds=30, auto_renew=False) for _ in range(8)]
    got = await asyncio.gather(*(h.acquire() for h in handles))
    assert sum(got) == n, got
    holders = [h for h, ok in zip(handles, got) if ok]
    assert sorted(h.slot for h in holders) == list(range(n))
    who = await ctx.client.locks.get(name)
    assert len(who["holders"]) == n, who
    await holders[0].release()
    late = [h for h, ok in zip(handles, got) if not ok][0]
    assert await late.acquire() is True, "a released permit must admit the next"


@scenario()
async def test_guarded_transaction_from_a_replaced_holder_commits_nothing(ctx: Ctx):
    name, q = name_of(), ctx.q("guarded")
    lock = ctx.client.lock(name, ttl_seconds=1, auto_renew=False)
    assert await lock.acquire()
    guard = lock.guard()
    assert guard["op"] == "check" and guard["required"] is True and guard["expect"] == lock.token, guard
    ok = await ctx.client.transaction().guard(lock).queue(q).push([{"data": {"n": 1}}]).commit()
    assert ok["success"] is True, ok
    # the holder stalls past its lifetime and someone else takes the lock
    await asyncio.sleep(1.3)
    other = ctx.new_client().lock(name, ttl_seconds=30, auto_renew=False)
    assert await other.acquire()
    # the stale holder commits with the guard it last had (what .guard(lock) sends)
    res = await (
        ctx.client.transaction()
        .queue(q).push([{"data": {"n": 2}}])
        .kv.check(guard["ns"], guard["key"], expect=guard["expect"], required=True)
        .commit()
    )
    assert not res and res["reason"] == "kv_precondition" and res["failedIndex"] == 1, res
    assert res["kvReason"] == "version" and res["value"]["owner"] == other.owner, res
    got = await ctx.client.queue(q).batch(5).wait(False).pop()
    assert [m["data"] for m in got] == [{"n": 1}], "the replaced holder's push committed"
    # the live holder's guarded bundle commits
    res = await ctx.new_client().transaction().guard(other).queue(q).push([{"data": {"n": 3}}]).commit()
    assert res["success"] is True, res
    await other.release()
