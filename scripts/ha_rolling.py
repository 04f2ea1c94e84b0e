"""Rolling restart of three brokers behind HAProxy, driven through the official
Python client's HTTP layer (issue 34). Run by scripts/ha-rolling-test.sh, which
prepares the database, the binary and the virtualenv.

Requests go through `queen.http.http_client.HttpClient` pointed at HAProxy, so
they retry exactly as the client does (3 attempts, 1 s then 2 s apart, on a
network error or a 5xx; 4xx not retried; 429 on its own schedule). A counting
transport under it sees every attempt, so the report has both the requests
that failed after the client's retries and the attempts that failed at all.

Phase 1 (asserted): producers push numbered messages into 4 partitions,
consumers long-poll pop and ack them; every broker is stopped with SIGTERM
and started again, one at a time, twice over. Then: no request failed, no
attempt failed, every message pushed was acked, none was delivered after its
ack, and each partition was delivered in push order.

Phase 2 (reported, not asserted): the same load while one broker is killed
with SIGKILL and started again.
"""

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
import urllib.request

import httpx
from queen.http.http_client import HttpClient

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ["ROLLING_SERVER_BIN"]
WORK = os.environ["WORK_DIR"]
PG_DB = os.environ["PG_DB"]
PORTS = [int(p) for p in os.environ["BROKER_PORTS"].split(",")]
MESH_PORTS = [int(p) for p in os.environ["MESH_PORTS"].split(",")]
LB_PORT = int(os.environ["LB_PORT"])
DRAIN_MS = int(os.environ.get("SHUTDOWN_DRAIN_MS", "3000"))
PARTITIONS = 4
CONSUMERS = 3
ROUNDS = 2


class CountingTransport(httpx.AsyncBaseTransport):
    """Counts every attempt that ended in a network error or a 5xx."""

    def __init__(self, phase):
        # the limits HttpClient gives its own pool
        self.inner = httpx.AsyncHTTPTransport(
            limits=httpx.Limits(max_keepalive_connections=10, max_connections=100)
        )
        self.phase = phase

    async def handle_async_request(self, request):
        self.phase["attempts"] += 1
        try:
            response = await self.inner.handle_async_request(request)
        except Exception as e:
            self.phase["attempt_errors"].append(f"{request.method} {request.url.path}: {type(e).__name__}: {e}")
            raise
        if response.status_code >= 500:
            self.phase["attempt_errors"].append(f"{request.method} {request.url.path}: HTTP {response.status_code}")
        return response

    async def aclose(self):
        await self.inner.aclose()


def new_phase(name):
    return {"name": name, "attempts": 0, "attempt_errors": [], "failed": [], "pushed": 0, "popped": 0,
            "acked": 0}


class Brokers:
    def __init__(self):
        self.procs = [None] * 3
        self.starts = [0] * 3

    def start(self, i):
        peers = ",".join(f"broker-{j}@127.0.0.1:{MESH_PORTS[j]}" for j in range(3) if j != i)
        env = dict(os.environ)
        env.update(
            QUEEN_SERVER_ID=f"broker-{i}", PORT=str(PORTS[i]), HOST="127.0.0.1",
            QUEEN_MESH_PORT=str(MESH_PORTS[i]), QUEEN_MESH_PEERS=peers,
            QUEEN_SYNC_SECRET="rolling-secret", FILE_BUFFER_DIR=f"{WORK}/spool-{i}",
            PG_HOST=os.environ.get("PGHOST", "127.0.0.1"), PG_USER=os.environ.get("PGUSER", "postgres"),
            PG_DB=PG_DB, DB_POOL_SIZE="8", LOG_LEVEL="info",
            SHUTDOWN_DRAIN_MS=str(DRAIN_MS), SHUTDOWN_TIMEOUT_MS="15000",
        )
        self.starts[i] += 1
        log = open(f"{WORK}/broker-{i}.log", "a")
        self.procs[i] = subprocess.Popen([BIN, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)

    def healthy(self, i):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{PORTS[i]}/health", timeout=1) as r:
                return r.status == 200
        except Exception:
            return False

    async def wait_healthy(self, i, limit=30):
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            if await asyncio.to_thread(self.healthy, i):
                return
            await asyncio.sleep(0.1)
        raise RuntimeError(f"broker-{i} not healthy after {limit}s (log {WORK}/broker-{i}.log)")

    async def stop(self, i, sig):
        proc = self.procs[i]
        t0 = time.monotonic()
        proc.send_signal(sig)
        code = await asyncio.to_thread(proc.wait, 60)
        return code, time.monotonic() - t0

    def stop_all(self):
        for p in self.procs:
            if p and p.poll() is None:
                p.kill()
                p.wait()


def lb_rows():
    """The three servers' rows of HAProxy's `show stat` (CSV), from its stats socket."""
    import socket
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(f"{WORK}/haproxy.sock")
    except OSError:  # not listening yet
        s.close()
        return []
    s.sendall(b"show stat\n")
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    s.close()
    return [line.split(",") for line in data.decode().splitlines() if line.startswith("brokers,broker-")]


def lb_state():
    """HAProxy's view of the three servers: name -> UP / DOWN / ..."""
    return {r[1]: r[17] for r in lb_rows()}


def lb_counters():
    """Summed over the servers: connection errors, response errors, retries, redispatches."""
    totals = {"econ": 0, "eresp": 0, "wretr": 0, "wredis": 0}
    for r in lb_rows():
        for name, col in (("econ", 13), ("eresp", 14), ("wretr", 15), ("wredis", 16)):
            totals[name] += int(r[col] or 0)
    return totals


async def wait_lb_up(i, limit=30):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if (await asyncio.to_thread(lb_state)).get(f"broker-{i + 1}") == "UP":
            return
        await asyncio.sleep(0.1)
    raise RuntimeError(f"HAProxy never saw broker-{i} up again")


class Load:
    """Producers and consumers on one queue; records what went where."""

    def __init__(self, client, queue, phase):
        self.client, self.queue, self.phase = client, queue, phase
        self.next_seq = [0] * PARTITIONS
        self.pushed = set()  # (partition, seq) answered queued or duplicate
        self.acked = {}  # (partition, seq) -> time of the ack's answer
        self.deliveries = []  # (time, partition, seq)
        self.after_ack = []
        self.producing = True
        self.consuming = True

    async def call(self, what, coro):
        try:
            return await coro
        except Exception as e:
            self.phase["failed"].append(f"{what}: {type(e).__name__}: {e}")
            return None

    async def produce(self, p):
        while self.producing:
            n = random.randint(1, 4)
            seqs = list(range(self.next_seq[p], self.next_seq[p] + n))
            self.next_seq[p] += n
            items = [{"queue": self.queue, "partition": f"p{p}", "transactionId": f"{self.queue}-{p}-{s}",
                      "payload": {"p": p, "seq": s}} for s in seqs]
            # a failed push is pushed again with the same ids: order stays, dedup holds
            while True:
                answer = await self.call("push", self.client.post("/api/v1/push", {"items": items}))
                if answer is not None and all(r.get("status") in ("queued", "duplicate") for r in answer):
                    break
                if answer is not None:
                    self.phase["failed"].append(f"push answered {answer}")
                if not self.producing:
                    break
            if answer is not None:
                self.pushed.update((p, s) for s in seqs)
                self.phase["pushed"] += len(seqs)
            await asyncio.sleep(0.03)

    async def consume(self):
        path = f"/api/v1/pop/queue/{self.queue}?batch=10&wait=true&timeout=2000"
        while self.consuming:
            body = await self.call("pop", self.client.get(path, retry_kind="pop"))
            messages = (body or {}).get("messages") or []
            if not messages:
                continue
            now = time.monotonic()
            self.phase["popped"] += len(messages)
            for m in messages:
                key = (m["data"]["p"], m["data"]["seq"])
                self.deliveries.append((now, *key))
                if key in self.acked:
                    self.after_ack.append(key)
            acks = [{"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                     "leaseId": m.get("leaseId"), "status": "completed"} for m in messages]
            answer = await self.call("ack", self.client.post("/api/v1/ack/batch", {"acknowledgments": acks}))
            if answer is None:
                continue
            done = time.monotonic()
            for m, r in zip(messages, answer):
                if r.get("success"):
                    self.acked[(m["data"]["p"], m["data"]["seq"])] = done
                    self.phase["acked"] += 1
                else:
                    self.phase["failed"].append(f"ack refused: {r}")

    def check(self):
        lost = sorted(self.pushed - set(self.acked))
        out_of_order = []
        for p in range(PARTITIONS):
            first_seen = []
            seen = set()
            for _, q, s in self.deliveries:
                if q == p and s not in seen:
                    seen.add(s)
                    first_seen.append(s)
            out_of_order += [(p, a, b) for a, b in zip(first_seen, first_seen[1:]) if b < a]
        return {"lost": lost[:20], "lost_count": len(lost), "delivered_after_ack": self.after_ack[:20],
                "out_of_order": out_of_order[:20]}


async def run_phase(name, queue, action):
    phase = new_phase(name)
    client = HttpClient(base_url=f"http://127.0.0.1:{LB_PORT}", transport=CountingTransport(phase))
    await client.post("/api/v1/configure", {"queue": queue, "options": {"leaseTime": 10, "retryLimit": 100}})
    load = Load(client, queue, phase)
    tasks = [asyncio.create_task(load.produce(p)) for p in range(PARTITIONS)]
    tasks += [asyncio.create_task(load.consume()) for _ in range(CONSUMERS)]
    t0 = time.monotonic()
    lb_before = await asyncio.to_thread(lb_counters)
    phase["events"] = await action()
    load.producing = False
    await asyncio.gather(*tasks[:PARTITIONS])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not load.pushed <= set(load.acked):
        await asyncio.sleep(0.2)
    load.consuming = False
    await asyncio.gather(*tasks[PARTITIONS:])
    await client.close()
    phase["seconds"] = round(time.monotonic() - t0, 1)
    lb_after = await asyncio.to_thread(lb_counters)
    phase["haproxy"] = {k: lb_after[k] - lb_before[k] for k in lb_after}
    phase.update(load.check())
    return phase


async def main():
    brokers = Brokers()
    haproxy = None
    try:
        for i in range(3):
            brokers.start(i)
        for i in range(3):
            await brokers.wait_healthy(i)
        env = dict(os.environ, QUEEN_LB_BIND=f"127.0.0.1:{LB_PORT}",
                   **{f"QUEEN_BROKER_{i + 1}": f"127.0.0.1:{PORTS[i]}" for i in range(3)})
        # the repository's configuration, plus a stats socket for this test to read
        cfg = open(f"{ROOT}/deploy/haproxy.cfg").read()
        cfg = cfg.replace("global\n", f"global\n    stats socket {WORK}/haproxy.sock mode 600 level admin\n", 1)
        open(f"{WORK}/haproxy.cfg", "w").write(cfg)
        haproxy = subprocess.Popen(["haproxy", "-db", "-f", f"{WORK}/haproxy.cfg"], env=env,
                                   stdout=open(f"{WORK}/haproxy.log", "w"), stderr=subprocess.STDOUT)
        for i in range(3):
            await wait_lb_up(i)

        async def roll():
            events = []
            await asyncio.sleep(3)
            for r in range(ROUNDS):
                for i in range(3):
                    code, took = await brokers.stop(i, signal.SIGTERM)
                    events.append({"round": r + 1, "broker": i, "signal": "TERM", "exit": code,
                                   "exit_seconds": round(took, 2)})
                    brokers.start(i)
                    await brokers.wait_healthy(i)
                    await wait_lb_up(i)
            await asyncio.sleep(2)
            return events

        async def kill():
            await asyncio.sleep(3)
            brokers.procs[1].kill()
            brokers.procs[1].wait()
            await asyncio.sleep(3)
            brokers.start(1)
            await brokers.wait_healthy(1)
            await wait_lb_up(1)
            await asyncio.sleep(2)
            return [{"broker": 1, "signal": "KILL"}]

        tag = f"{random.getrandbits(32):08x}"
        rolling = await run_phase("SIGTERM rolling restart, twice", f"roll-{tag}", roll)
        killed = await run_phase("SIGKILL of one broker", f"kill-{tag}", kill)
    finally:
        if haproxy:
            haproxy.terminate()
            haproxy.wait()
        brokers.stop_all()

    for phase in (rolling, killed):
        print(f"ha-rolling: {phase['name']}: {phase['seconds']} s, pushed {phase['pushed']}, "
              f"popped {phase['popped']}, acked {phase['acked']} in {phase['attempts']} HTTP requests; "
              f"failed requests (after the client's "
              f"retries) {len(phase['failed'])}, failed attempts {len(phase['attempt_errors'])}; "
              f"lost {phase['lost_count']}, delivered after ack {len(phase['delivered_after_ack'])}, "
              f"out of order {len(phase['out_of_order'])}; HAProxy {phase['haproxy']}")
        for e in phase["events"]:
            print(f"ha-rolling:   {json.dumps(e)}")
        for line in (phase["failed"] + phase["attempt_errors"])[:10]:
            print(f"ha-rolling:   {line}")
    with open(f"{WORK}/report.json", "w") as f:
        json.dump([rolling, killed], f, indent=1)

    problems = []
    if rolling["failed"]:
        problems.append(f"{len(rolling['failed'])} requests failed after the client's retries")
    if rolling["attempt_errors"]:
        problems.append(f"{len(rolling['attempt_errors'])} attempts failed (network error or 5xx)")
    if rolling["lost_count"]:
        problems.append(f"{rolling['lost_count']} messages pushed but never acked: {rolling['lost']}")
    if rolling["delivered_after_ack"]:
        problems.append(f"delivered after their ack: {rolling['delivered_after_ack']}")
    if rolling["out_of_order"]:
        problems.append(f"delivered out of order (partition, before, after): {rolling['out_of_order']}")
    if any(e["exit"] != 0 for e in rolling["events"]):
        problems.append(f"a broker exited non-zero on SIGTERM: {rolling['events']}")
    if rolling["pushed"] == 0 or rolling["acked"] == 0:
        problems.append("no load went through")
    for p in problems:
        print(f"ha-rolling: FAIL: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
