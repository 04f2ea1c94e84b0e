"""The admin helpers each client version exposes (client.admin.*)."""

import asyncio

import httpx
import pytest

from compat import V1, V2, Consumer, Ctx, msgs, scenario, wait_until


async def _seed(ctx: Ctx, label: str, group: str = None):
    """A queue with a namespace/task, 3 messages, one of them consumed by `group`."""
    q = ctx.q(label)
    await ctx.client.queue(q).namespace("compatns").task("compattask").create()
    pushed = await ctx.client.queue(q).push([{"data": {"n": i}} for i in range(3)])
    if group:
        got = await ctx.client.queue(q).group(group).wait(False).pop()
        assert (await ctx.client.ack(got, True, {"group": group}))["success"] is True
    return q, pushed


def _status(err: BaseException):
    return getattr(getattr(err, "response", None), "status_code", None)


@scenario()
async def test_admin_health(ctx: Ctx):
    health = await ctx.client.admin.health()
    assert health["status"] == "healthy" and health["database"] == "connected", health


@scenario()
async def test_admin_metrics(ctx: Ctx):
    metrics = await ctx.client.admin.metrics()
    call = ctx.last("GET", "/metrics")
    assert call.status == 200, call.describe()
    assert isinstance(metrics, dict) and "database" in metrics, metrics


@scenario()
async def test_admin_resources(ctx: Ctx):
    q, _ = await _seed(ctx, "adm-res")
    admin = ctx.client.admin

    overview = await admin.get_overview()
    for key in ("queues", "partitions", "namespaces", "tasks", "messages"):
        assert key in overview, f"overview misses {key}: {overview}"
    assert overview["queues"] >= 1 and overview["messages"]["total"] >= 3, overview

    ns = await admin.get_namespaces()
    assert any(n.get("namespace") == "compatns" for n in ns["namespaces"]), ns
    tasks = await admin.get_tasks()
    assert any(t.get("task") == "compattask" for t in tasks["tasks"]), tasks

    listed = await admin.list_queues(limit=1000)
    mine = [x for x in listed["queues"] if x.get("name") == q]
    assert mine and mine[0]["namespace"] == "compatns" and mine[0]["messages"]["total"] == 3, listed

    detail = await admin.get_queue(q)
    assert detail["name"] == q and detail["totals"]["total"] == 3, detail
    assert [p["name"] for p in detail["partitions"]] == ["Default"], detail

    with pytest.raises(httpx.HTTPStatusError) as err:
        await admin.get_queue(ctx.q("no-such-queue"))
    assert _status(err.value) == 404, ctx.last("GET", "/api/v1/resources/queues/").describe()


@scenario()
async def test_admin_messages(ctx: Ctx):
    q, pushed = await _seed(ctx, "adm-msg")
    admin = ctx.client.admin
    pid, tx = pushed[0]["partition_id"], pushed[0]["transaction_id"]

    listed = await admin.list_messages(queue=q, limit=50)
    assert sorted(m["transactionId"] for m in listed["messages"]) == sorted(p["transaction_id"] for p in pushed), listed
    assert all(m["queue"] == q and m["status"] == "pending" for m in listed["messages"]), listed

    one = await admin.get_message(pid, tx)
    assert one["transactionId"] == tx and one["payload"] == {"n": 0} and one["queue"] == q, one

    deleted = await admin.delete_message(pid, tx)
    assert deleted.get("success") is True, deleted
    with pytest.raises(httpx.HTTPStatusError) as err:
        await admin.get_message(pid, tx)
    assert _status(err.value) == 404
    rest = await ctx.client.queue(q).batch(10).wait(False).pop()
    assert [m["data"]["n"] for m in rest] == [1, 2], "a deleted message was still delivered"


@scenario()
async def test_admin_traces(ctx: Ctx):
    q = ctx.q("adm-trace")
    name = ctx.q("tn")
    pushed = await ctx.client.queue(q).push({"data": {"t": 1}})
    pid, tx = pushed[0]["partition_id"], pushed[0]["transaction_id"]

    traced = []

    async def handler(m):
        traced.append(await m["trace"]({"traceName": name, "eventType": "step", "data": {"k": "v"}}))

    await asyncio.wait_for(ctx.client.queue(q).batch(1).limit(1).timeout_millis(1000).consume(handler), 30)
    assert traced and traced[0].get("success") is True, (traced, ctx.last("POST", "/api/v1/traces").describe())
    admin = ctx.client.admin
    for_msg = await admin.get_traces_for_message(pid, tx)
    assert [t["data"] for t in for_msg["traces"]] == [{"k": "v"}], for_msg
    assert for_msg["traces"][0]["event_type"] == "step" and name in for_msg["traces"][0]["trace_names"]

    by_name = await admin.get_traces_by_name(name, limit=10)
    assert by_name["total"] == 1 and by_name["traces"][0]["transaction_id"] == tx, by_name
    names = await admin.get_trace_names(limit=1000)
    assert any(n["trace_name"] == name for n in names["trace_names"]), names


@scenario()
async def test_admin_status_and_analytics(ctx: Ctx):
    q, _ = await _seed(ctx, "adm-status")
    admin = ctx.client.admin
    status = await admin.get_status()
    for key in ("throughput", "queues", "messages"):
        assert key in status, f"status misses {key}: {list(status)}"
    stats = await admin.get_queue_stats(limit=1000)
    assert any(x.get("name") == q for x in stats["queues"]), stats
    detail = await admin.get_queue_detail(q)
    assert detail["queue"]["name"] == q and "partitions" in detail and "totals" in detail, detail
    analytics = await admin.get_analytics(interval="hour")
    assert "dataPoints" in analytics, analytics


@scenario()
async def test_admin_consumer_groups(ctx: Ctx):
    group = ctx.q("g-adm")
    q, _ = await _seed(ctx, "adm-cg", group=group)
    admin = ctx.client.admin

    groups = await admin.list_consumer_groups()
    assert isinstance(groups, list), groups
    mine = [g for g in groups if g.get("name") == group]
    assert mine and mine[0].get("queueName") == q, groups

    detail = await admin.get_consumer_group(group)
    assert q in detail and detail[q]["partitions"][0]["totalConsumed"] >= 1, detail

    lagging = await admin.get_lagging_consumers(min_lag_seconds=3600)
    assert isinstance(lagging, list), lagging

    refreshed = await admin.refresh_consumer_stats()
    assert ctx.last("POST", "/api/v1/stats/refresh").status == 200 and isinstance(refreshed, (dict, type(None)))

    res = await admin.delete_consumer_group_for_queue(group, q)
    assert res.get("success") is True and res.get("queueName") == q, res
    # Brand new on that queue again.
    assert len(await ctx.client.queue(q).group(group).batch(10).wait(False).pop()) == 3


@scenario()
async def test_admin_system_metrics(ctx: Ctx):
    admin = ctx.client.admin
    for call in (admin.get_system_metrics, admin.get_worker_metrics):
        res = await call()
        assert ctx.exchanges[-1].status == 200 and res is not None, ctx.exchanges[-1].describe()
    if V1:
        res = await admin.get_postgres_stats()
        assert ctx.exchanges[-1].status == 200 and res is not None, ctx.exchanges[-1].describe()


@scenario()
async def test_admin_helpers_for_routes_the_reference_does_not_serve(ctx: Ctx):
    """get_partitions / retry_message / get_queue_depth (and 1.x clear_queue,
    move_message_to_dlq) call routes the reference broker never served: the
    contract is a JSON 404 (the client raises HTTPStatusError) unless implemented."""
    q, pushed = await _seed(ctx, "adm-unserved")
    admin = ctx.client.admin
    pid, tx = pushed[0]["partition_id"], pushed[0]["transaction_id"]
    calls = [
        lambda: admin.get_partitions(queue=q),
        lambda: admin.retry_message(pid, tx),
        lambda: admin.get_queue_depth(q),
    ]
    if V1:
        calls += [lambda: admin.clear_queue(q), lambda: admin.move_message_to_dlq(pid, tx)]
    for call in calls:
        try:
            res = await call()
            assert isinstance(res, (dict, list)), ctx.exchanges[-1].describe()
        except httpx.HTTPStatusError as err:
            last = ctx.exchanges[-1]
            assert _status(err) == 404, last.describe()
            assert isinstance(last.response_json(), dict) and last.response_json().get("error"), last.describe()
    if V2:
        with pytest.raises(NotImplementedError):
            await admin.clear_queue(q)
        with pytest.raises(NotImplementedError):
            await admin.move_message_to_dlq(pid, tx)
