"""Ephemeral queues (queen-mq 2.6.0 `client.ephemeral`): FIFO per partition,
fan-out over groups, redelivery on lease expiry, drop after the retry limit,
bounds, reset and delete."""

import asyncio

import httpx
import pytest

from compat import QUEEN_URL, V1, Ctx, scenario

pytestmark = pytest.mark.skipif(V1, reason="queen-mq 1.3.0 has no ephemeral queues")


def payloads(result):
    return [m["payload"] for m in result["messages"]]


@scenario()
async def test_ephemeral_fifo_per_partition_and_explicit_ack(ctx: Ctx):
    eph = ctx.client.ephemeral
    q = ctx.q("eph-fifo")
    for chunk in range(4):
        r = await eph.push(q, [{"n": chunk * 5 + i} for i in range(5)], partition="p1")
        assert r == {"pushed": 5}, r
        await eph.push(q, [{"other": chunk}], partition="p2")
    seen = []
    while True:
        got = await eph.pop(q, partition="p1", batch=7)
        if not got["messages"]:
            break
        assert all(m["attempts"] == 1 and m["partition"] == "p1" for m in got["messages"]), got
        seen.extend(m["payload"]["n"] for m in got["messages"])
        acked = await eph.ack(q, got["messages"])
        assert [x["outcome"] for x in acked["results"]] == ["acked"] * len(got["messages"]), acked
    assert seen == list(range(20)), seen
    # the other ring kept its own order; a pop without a partition visits rings by name
    other = await eph.pop(q, batch=10)
    assert payloads(other) == [{"other": i} for i in range(4)], other
    # an ack of an acked message is unknown, not an error
    first = await eph.ack(q, other["messages"][:1])
    assert first["results"][0]["outcome"] == "acked", first
    again = await eph.ack(q, other["messages"][:1])
    assert again["results"][0]["outcome"] == "unknown", again
    # payloads come back byte for byte
    await eph.push(q, [{"nested": {"a": [1, 2.5, None, "x"]}, "unicode": "é"}], partition="p3")
    assert payloads(await eph.pop(q, partition="p3")) == [{"nested": {"a": [1, 2.5, None, "x"]}, "unicode": "é"}]


@scenario()
async def test_ephemeral_groups_fan_out_and_compete(ctx: Ctx):
    eph = ctx.client.ephemeral
    q = ctx.q("eph-fan")
    g1, g2, workers = ctx.q("g1"), ctx.q("g2"), ctx.q("workers")
    # a subscriber that parks before the first push does not miss it
    parked = asyncio.create_task(eph.pop(q, group=g1, batch=10, wait=True, timeout=10000))
    await asyncio.sleep(0.5)
    await eph.push(q, [{"n": i} for i in range(6)])
    first = await parked
    got1 = [m["payload"]["n"] for m in first["messages"]]
    while len(got1) < 6:
        more = await eph.pop(q, group=g1, batch=10)
        assert more["messages"], got1
        got1.extend(m["payload"]["n"] for m in more["messages"])
    assert got1 == list(range(6)), got1
    got2 = await eph.pop(q, group=g2, batch=10)
    assert [m["payload"]["n"] for m in got2["messages"]] == list(range(6)), got2
    # one group, two consumers: each message once
    a = await eph.pop(q, group=workers, batch=3)
    b = await eph.pop(q, group=workers, batch=3)
    na = [m["payload"]["n"] for m in a["messages"]]
    nb = [m["payload"]["n"] for m in b["messages"]]
    assert sorted(na + nb) == list(range(6)) and not set(na) & set(nb), (na, nb)
    assert (await eph.pop(q, group=workers, batch=3))["messages"] == []
    depth = await eph.depth(q)
    groups = {g["group"]: g for g in depth["groups"]}
    assert set(groups) >= {g1, g2, workers}, depth
    assert depth["pending"] == 0, depth  # everything is handed out (leased is not pending)


@scenario()
async def test_ephemeral_redelivery_on_lease_expiry_then_drop_after_retry_limit(ctx: Ctx):
    eph = ctx.client.ephemeral
    q = ctx.q("eph-lease")
    cfg = await eph.configure(q, lease_seconds=1, retry_limit=2)
    assert cfg["options"]["leaseSeconds"] == 1 and cfg["options"]["retryLimit"] == 2, cfg
    await eph.push(q, [{"job": 1}])
    first = await eph.pop(q, group="w")
    assert [m["attempts"] for m in first["messages"]] == [1], first
    # leased: nobody else of the group gets it
    assert (await eph.pop(q, group="w"))["messages"] == []
    await asyncio.sleep(1.5)
    second = await eph.pop(q, group="w")
    assert [m["attempts"] for m in second["messages"]] == [2], second
    assert second["messages"][0]["id"] == first["messages"][0]["id"]
    assert second["messages"][0]["payload"] == {"job": 1}
    # the lease of attempt 1 is gone: its ack is unknown; attempt 2's ack retires it
    await asyncio.sleep(1.5)
    third = await eph.pop(q, group="w")
    assert third["messages"] == [], "redelivered past the retry limit"
    status = {x["queue"]: x for x in (await eph.queues())["queues"]}[q]
    assert status["drops"]["retry"] == 1 and status["tier"] == "declared", status

    # a nack redelivers at once, and at the limit it drops
    await eph.push(q, [{"job": 2}])
    one = await eph.pop(q, group="w")
    r = await eph.ack(q, one["messages"], group="w", status=False)
    assert r["results"][0]["outcome"] == "redelivered", r
    two = await eph.pop(q, group="w")
    assert [m["attempts"] for m in two["messages"]] == [2], two
    r = await eph.ack(q, two["messages"], group="w", status="retry")
    assert r["results"][0]["outcome"] == "acked", r
    assert (await eph.pop(q, group="w"))["messages"] == []
    status = {x["queue"]: x for x in (await eph.queues())["queues"]}[q]
    assert status["drops"]["retry"] == 2, status


@scenario()
async def test_ephemeral_bounds_reset_and_delete(ctx: Ctx):
    from queen.errors import EphemeralQueueNotFoundError

    eph = ctx.client.ephemeral
    q = ctx.q("eph-reset")
    await eph.configure(q, max_length=3, policy="reject", lease_seconds=60)
    assert (await eph.push(q, [{"n": 1}, {"n": 2}, {"n": 3}]))["pushed"] == 3
    # the client retries a 429 (ten times, with backoff), so the refusal itself
    # is checked on the raw route
    async with httpx.AsyncClient(base_url=QUEEN_URL) as raw:
        full = await raw.post("/api/v1/ephemeral/push", json={"queue": q, "messages": [{"payload": {"n": 4}}]})
    assert full.status_code == 429 and full.json()["code"] == "queue_full", full.text
    got = await eph.pop(q, batch=2)
    assert payloads(got) == [{"n": 1}, {"n": 2}]

    r = await eph.reset(q)
    assert r == {"queue": q, "dropped": 3}, r
    assert (await eph.pop(q, batch=10))["messages"] == []
    acks = await eph.ack(q, got["messages"])
    assert [x["outcome"] for x in acks["results"]] == ["unknown", "unknown"], acks
    d = await eph.depth(q)
    assert d["pending"] == 0 and d["tier"] == "declared", d
    # the configuration stayed
    status = {x["queue"]: x for x in (await eph.queues())["queues"]}[q]
    assert status["options"]["maxLength"] == 3 and status["options"]["leaseSeconds"] == 60, status
    await eph.push(q, [{"n": 5}])
    assert payloads(await eph.pop(q)) == [{"n": 5}]
    assert (await eph.reset(ctx.q("never")))["dropped"] == 0

    feed = ctx.q("eph-feed")
    await eph.configure(feed, max_length=3, policy="dropOldest")
    await eph.push(feed, [{"n": i} for i in range(3)])
    await eph.push(feed, [{"n": 3}, {"n": 4}])
    assert payloads(await eph.pop(feed, batch=10)) == [{"n": 2}, {"n": 3}, {"n": 4}]
    status = {x["queue"]: x for x in (await eph.queues())["queues"]}[feed]
    assert status["drops"]["bounds"] == 2, status

    gone = await eph.delete(q)
    assert gone == {"queue": q, "deleted": True, "declared": True}, gone
    with pytest.raises(EphemeralQueueNotFoundError):
        await eph.depth(q)
    assert (await eph.delete(q))["deleted"] is False
    assert q not in {x["queue"] for x in (await eph.queues())["queues"]}
