#!/usr/bin/env python3
"""Resident memory of a broker through a run of big requests (docs/benchmarks.md, "Memory").

    python3 scripts/rss-probe.py [target/debug/queen-server] [VAR=value ...]

Starts the broker on a fresh database (PG_HOST/PG_PORT/PG_USER from the
environment, default 127.0.0.1:5432 postgres), reads VmRSS (and RssAnon,
the heap without the binary's pages) from /proc/<pid>/status before, at its peak (sampled every 50 ms), 10 s after the
run, and once PostgreSQL closed the broker's connections (pg_terminate_backend), then stops it and drops the database. The run, two at a time:
eight 12 MiB one-item pushes, eight 100 000-item pushes (refused: past
MAX_PUSH_ITEMS, but read and parsed), eight 10 000-item pushes, and pops of
10 000 messages until the queue is empty. Measures; asserts nothing.
"""

import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid, field="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def mib(kib):
    return round(kib / 1024, 1)


def request(port, method, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    headers = {"content-type": "application/json"} if body is not None else {}
    c.request(method, path, body=body, headers=headers)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "target/debug/queen-server"
    extra = dict(a.split("=", 1) for a in sys.argv[2:])
    pg = {
        "PG_HOST": os.environ.get("PG_HOST", "127.0.0.1"),
        "PG_PORT": os.environ.get("PG_PORT", "5432"),
        "PG_USER": os.environ.get("PG_USER", "postgres"),
    }
    db = f"queen_rss_{os.getpid()}"
    psql = ["psql", "-h", pg["PG_HOST"], "-p", pg["PG_PORT"], "-U", pg["PG_USER"], "-d", "postgres", "-qc"]
    subprocess.run(psql + [f"CREATE DATABASE {db}"], check=True)
    port = free_port()
    work = tempfile.mkdtemp()
    env = dict(os.environ, **pg, PG_DB=db, PORT=str(port), HOST="127.0.0.1",
               LOG_LEVEL="warn", FILE_BUFFER_DIR=f"{work}/spool", **extra)
    broker = subprocess.Popen([binary, "serve"], env=env, stdout=subprocess.DEVNULL,
                              stderr=open(f"{work}/broker.log", "w"))
    try:
        for _ in range(120):
            try:
                if request(port, "GET", "/health")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.5)
        time.sleep(2)
        before = rss_kib(broker.pid)
        before_anon = rss_kib(broker.pid, "RssAnon")
        peak = [before]
        done = threading.Event()

        def sample():
            while not done.is_set():
                peak[0] = max(peak[0], rss_kib(broker.pid))
                time.sleep(0.05)

        sampler = threading.Thread(target=sample)
        sampler.start()
        big = json.dumps({"items": [{"queue": "rss-big", "payload": "x" * (12 << 20)}]})
        many = json.dumps({"items": [{"queue": "rss-many", "partition": f"p{i % 8}", "payload": {"i": i, "pad": "y" * 40}} for i in range(100_000)]})
        tenk = json.dumps({"items": [{"queue": "rss-tenk", "partition": f"p{i % 8}", "payload": {"i": i, "pad": "y" * 40}} for i in range(10_000)]})
        statuses = []
        t0 = time.time()
        with ThreadPoolExecutor(2) as pool:
            for body in [big] * 8 + [many] * 8 + [tenk] * 8:
                statuses.append(pool.submit(request, port, "POST", "/api/v1/push", body))
        statuses = [s.result()[0] for s in statuses]
        popped = 0
        while True:
            status, data = request(port, "GET", "/api/v1/pop/queue/rss-tenk?batch=10000&wait=false&autoAck=true")
            if status != 200:
                break
            n = len(json.loads(data).get("messages", []))
            popped += n
            if n == 0:
                break
        run_s = time.time() - t0
        done.set()
        sampler.join()
        time.sleep(10)
        after = rss_kib(broker.pid)
        after_anon = rss_kib(broker.pid, "RssAnon")
        trimmed = None
        if os.environ.get("RSS_PROBE_GDB_TRIM"):
            # what glibc's malloc_trim(0) gives back, called from outside (needs gdb)
            subprocess.run(["gdb", "-p", str(broker.pid), "-batch", "-ex", "call (int) malloc_trim(0)"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1)
            trimmed = mib(rss_kib(broker.pid, "RssAnon"))
        # PostgreSQL closes the broker's connections: what their buffers held goes
        subprocess.run(psql + [f"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = '{db}'"],
                       stdout=subprocess.DEVNULL)
        for _ in range(20):
            request(port, "GET", "/api/v1/resources/queues")
            time.sleep(0.25)
        time.sleep(5)
        later = rss_kib(broker.pid)
        later_anon = rss_kib(broker.pid, "RssAnon")
        print(json.dumps({
            "binary": binary, "settings": extra,
            "rss_mib": {"before": mib(before), "peak": mib(peak[0]), "10s_after": mib(after),
                        "after_reconnect": mib(later)},
            "anon_mib": {"before": mib(before_anon), "10s_after": mib(after_anon), "after_gdb_trim": trimmed,
                         "after_reconnect": mib(later_anon)},
            "push_statuses": sorted(set(statuses)), "popped": popped, "run_s": round(run_s, 1),
        }))
    finally:
        broker.terminate()
        broker.wait()
        subprocess.run(psql + [f"DROP DATABASE IF EXISTS {db} WITH (FORCE)"])


if __name__ == "__main__":
    main()
