"""What the Python-client benchmarks (bench_*.py) share: pushing a backlog
over HTTP, and CPU accounting of the broker's process and the PostgreSQL
processes that work for the benchmark database (its backends plus the shared
background processes), read from /proc as crates/queen-bench/src/procstat.rs
does."""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, Optional

import httpx


async def push_backlog(
    url: str, queue: str, partitions: int, total: int, payload: Callable[[int, int], Any]
) -> None:
    """`total` messages over `partitions` partitions `p0`, `p1`, …, 1 000 per
    request; message i of partition p carries `payload(p, i)`."""
    per = total // partitions
    async with httpx.AsyncClient(timeout=60) as http:
        for p in range(partitions):
            for start in range(0, per, 1000):
                items = [
                    {"queue": queue, "partition": f"p{p}", "payload": payload(p, i)}
                    for i in range(start, min(start + 1000, per))
                ]
                r = await http.post(f"{url}/api/v1/push", json={"items": items})
                assert r.status_code == 201, r.text

TCK = os.sysconf("SC_CLK_TCK")


def cpu_ticks(pid: int) -> Optional[int]:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 1 :].split()
    return int(fields[11]) + int(fields[12])


def serves(title: str, db: str) -> bool:
    words = title.split()
    backend = any(("(" in w and w.endswith(")")) or w == "[local]" for w in words)
    if backend or "autovacuum worker" in title:
        return db in words
    return True


def postgres_ticks(db: str) -> Dict[int, int]:
    out: Dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            comm = stat[stat.find("(") + 1 : stat.rfind(")")]
            if not comm.startswith("postgres"):
                continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                title = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if serves(title, db):
            t = cpu_ticks(pid)
            if t is not None:
                out[pid] = t
    return out


def pg_cpu_between(before: Dict[int, int], after: Dict[int, int]) -> float:
    return sum(max(t - before.get(p, 0), 0) for p, t in after.items()) / TCK
