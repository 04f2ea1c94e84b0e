"""Shared helpers for the Python-client compatibility scenarios.

Every scenario drives the official `queen-mq` client through its public API.
The only thing added underneath is an httpx transport that RECORDS each
exchange (method, path, query, request body, status, response body) without
changing it; `Queen(..., transport=...)` is a documented constructor option in
both 1.3.0 and 2.6.0. When a scenario fails, the recorded exchanges are
printed so the report can say exactly which request the client made and what
the broker answered.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import os
import time
import traceback
import uuid
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Dict, List, Optional

import httpx
import pytest

from queen import Queen

CLIENT_VERSION = importlib.metadata.version("queen-mq")
CLIENT_MAJOR = int(CLIENT_VERSION.split(".")[0])
V1 = CLIENT_MAJOR == 1
V2 = CLIENT_MAJOR >= 2

QUEEN_URL = os.environ.get("QUEEN_URL", "")

# Default bound for one scenario, seconds.
SCENARIO_TIMEOUT = float(os.environ.get("QUEEN_COMPAT_SCENARIO_TIMEOUT", "60"))


# ---------------------------------------------------------------- recording


@dataclass
class Exchange:
    method: str
    path: str
    query: str
    request_body: Optional[bytes]
    status: Optional[int] = None
    response_body: Optional[bytes] = None
    error: Optional[str] = None
    started: float = 0.0
    elapsed: float = 0.0

    def request_json(self) -> Any:
        if not self.request_body:
            return None
        try:
            return json.loads(self.request_body)
        except ValueError:
            return self.request_body

    def response_json(self) -> Any:
        if not self.response_body:
            return None
        try:
            return json.loads(self.response_body)
        except ValueError:
            return self.response_body

    def describe(self, limit: int = 600) -> str:
        def cut(b: Optional[bytes]) -> str:
            if b is None:
                return "<none>"
            if not b:
                return "<empty>"
            s = b.decode("utf-8", "replace")
            return s if len(s) <= limit else s[:limit] + f"... ({len(s)} chars)"

        target = self.path + (("?" + self.query) if self.query else "")
        head = f"{self.method} {target}  body={cut(self.request_body)}"
        if self.error:
            return f"{head}\n      -> transport error: {self.error} ({self.elapsed:.2f}s)"
        return f"{head}\n      -> {self.status} {cut(self.response_body)} ({self.elapsed:.2f}s)"


class RecordingTransport(httpx.AsyncHTTPTransport):
    """An ordinary httpx transport that remembers every exchange."""

    def __init__(self, log: List[Exchange]) -> None:
        super().__init__()
        self.log = log

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = request.content if request.content is not None else None
        ex = Exchange(
            method=request.method,
            path=request.url.path,
            query=request.url.query.decode() if isinstance(request.url.query, bytes) else str(request.url.query),
            request_body=body,
            started=time.monotonic(),
        )
        self.log.append(ex)
        try:
            response = await super().handle_async_request(request)
            raw = b"".join([chunk async for chunk in response.aiter_raw()])
            await response.aclose()
        except BaseException as e:  # noqa: BLE001 - recorded, then re-raised
            ex.error = f"{type(e).__name__}: {e}"
            ex.elapsed = time.monotonic() - ex.started
            raise
        ex.status = response.status_code
        ex.response_body = raw
        ex.elapsed = time.monotonic() - ex.started
        return httpx.Response(
            status_code=response.status_code,
            headers=response.headers,
            content=raw,
            request=request,
            extensions=response.extensions,
        )


# ---------------------------------------------------------------- context


@dataclass
class Ctx:
    """What a scenario gets: a client, its recorded traffic, unique names."""

    name: str
    exchanges: List[Exchange] = field(default_factory=list)
    clients: List[Queen] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)

    def new_client(self, **kwargs: Any) -> Queen:
        opts: Dict[str, Any] = {
            "url": QUEEN_URL,
            "timeout_millis": 15000,
            "retry_attempts": 2,
            "retry_delay_millis": 200,
        }
        opts.update(kwargs)
        client = Queen(transport=RecordingTransport(self.exchanges), **opts)
        self.clients.append(client)
        return client

    @property
    def client(self) -> Queen:
        if not self.clients:
            self.new_client()
        return self.clients[0]

    def q(self, label: str) -> str:
        """A queue (or group) name unique to this run and scenario."""
        return f"compat-py{CLIENT_MAJOR}-{label}-{uuid.uuid4().hex[:10]}"

    def note(self, text: str) -> None:
        self.notes.append(text)

    def calls(self, method: Optional[str] = None, path_contains: str = "") -> List[Exchange]:
        return [
            e
            for e in self.exchanges
            if (method is None or e.method == method) and path_contains in e.path
        ]

    def last(self, method: Optional[str] = None, path_contains: str = "") -> Exchange:
        found = self.calls(method, path_contains)
        assert found, f"the client made no {method or ''} request to a path containing {path_contains!r}"
        return found[-1]

    def dump(self, tail: int = 60) -> str:
        lines = [f"--- HTTP exchanges recorded during {self.name} (queen-mq {CLIENT_VERSION}) ---"]
        shown = self.exchanges[-tail:]
        if len(self.exchanges) > tail:
            lines.append(f"(first {len(self.exchanges) - tail} omitted)")
        for i, e in enumerate(shown, 1):
            lines.append(f"  [{i}] {e.describe()}")
        for n in self.notes:
            lines.append(f"  note: {n}")
        return "\n".join(lines)

    async def close(self) -> None:
        for c in self.clients:
            try:
                await asyncio.wait_for(c.close(), 10)
            except Exception:  # noqa: BLE001
                pass


def scenario(timeout: float = SCENARIO_TIMEOUT) -> Callable[[Callable[[Ctx], Awaitable[None]]], Callable[[], None]]:
    """Turn `async def test_x(ctx)` into a bounded synchronous pytest test."""

    def deco(fn: Callable[[Ctx], Awaitable[None]]) -> Callable[[], None]:
        def test() -> None:
            if not QUEEN_URL:
                pytest.fail("QUEEN_URL is not set: run the suite through compat/python/run.sh")
            ctx = Ctx(name=fn.__name__)

            async def main() -> None:
                try:
                    await asyncio.wait_for(fn(ctx), timeout)
                finally:
                    await ctx.close()

            try:
                asyncio.run(main())
            except BaseException as e:
                if isinstance(e, asyncio.TimeoutError):
                    print(f"SCENARIO TIMED OUT after {timeout}s")
                print(ctx.dump())
                if isinstance(e, asyncio.TimeoutError):
                    raise AssertionError(f"scenario {fn.__name__} exceeded its {timeout}s bound") from e
                raise

        test.__name__ = fn.__name__
        test.__qualname__ = fn.__qualname__
        test.__doc__ = fn.__doc__
        test.__module__ = fn.__module__
        return test

    return deco


# ---------------------------------------------------------------- helpers


def msgs(x: Any) -> List[Dict[str, Any]]:
    """consume() hands a single message or a list depending on batch size."""
    if x is None:
        return []
    return list(x) if isinstance(x, list) else [x]


async def wait_until(pred: Callable[[], Any], timeout: float, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = pred()
        if asyncio.iscoroutine(r):
            r = await r
        if r:
            return True
        await asyncio.sleep(interval)
    return False


class Consumer:
    """Runs `builder.consume(handler, signal=...)` in the background and stops
    it on demand. Consumers built for this should use a short
    `timeout_millis` so a parked long poll ends soon after the stop."""

    def __init__(self, builder: Any, handler: Callable[[Any], Awaitable[Any]], **consume_kwargs: Any) -> None:
        self.stop_event = asyncio.Event()
        self.error: Optional[BaseException] = None
        self._task = asyncio.create_task(self._run(builder, handler, consume_kwargs))

    async def _run(self, builder: Any, handler: Any, kw: Dict[str, Any]) -> None:
        try:
            cb = builder.consume(handler, signal=self.stop_event)
            await cb
        except asyncio.CancelledError:
            raise
        except BaseException as e:  # noqa: BLE001
            self.error = e
            traceback.print_exc()

    @property
    def done(self) -> bool:
        return self._task.done()

    async def stop(self, grace: float = 10.0) -> None:
        self.stop_event.set()
        try:
            await asyncio.wait_for(asyncio.shield(self._task), grace)
        except asyncio.TimeoutError:
            self._task.cancel()
            try:
                await self._task
            except BaseException:  # noqa: BLE001
                pass

    async def finish(self, timeout: float) -> None:
        """Wait for the consume loop to end by itself (limit/idle)."""
        try:
            await asyncio.wait_for(asyncio.shield(self._task), timeout)
        except asyncio.TimeoutError:
            await self.stop()
            raise AssertionError(f"consume() did not finish within {timeout}s")


async def pop_all(builder_factory: Callable[[], Any], max_rounds: int = 50) -> List[Dict[str, Any]]:
    """Pop (wait=false) until a pop returns nothing; returns everything seen."""
    seen: List[Dict[str, Any]] = []
    for _ in range(max_rounds):
        got = await builder_factory().pop()
        if not got:
            break
        seen.extend(got)
    return seen


def iso_now() -> str:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def data_of(messages: List[Dict[str, Any]]) -> List[Any]:
    return [m.get("data") for m in messages]


async def push_spread(ctx: Ctx, q: str, partitions: int, per: int) -> None:
    """`per` messages `{"p": p, "n": i}` into each of partitions `p0`, `p1`, …"""
    for p in range(partitions):
        await ctx.client.queue(q).partition(f"p{p}").push(
            [{"data": {"p": p, "n": i}} for i in range(per)]
        )
