#!/usr/bin/env python3
"""Plots throughput and latency over time of the end-to-end runs of a
queen-bench suite report (JSON written by `queen-bench suite`), Queen's and
the peer brokers' (RabbitMQ, NATS JetStream) alike.

    scripts/plot-bench.sh [report.json] [out.png]

(the .sh wrapper creates bench-results/.venv with matplotlib on first use;
nothing is installed globally). Defaults: bench-results/latest.json and
docs/bench-e2e.png.
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


# Scenario id prefixes of the peer brokers, and the process measured for each.
PEERS = {"rabbitmq": "beam.smp", "nats": "nats-server"}


def main() -> int:
    src = sys.argv[1] if len(sys.argv) > 1 else "bench-results/latest.json"
    out = sys.argv[2] if len(sys.argv) > 2 else "docs/bench-e2e.png"
    with open(src) as f:
        report = json.load(f)
    runs = [
        r
        for r in report["results"]
        if r.get("kind") in ("e2e", "fanout") and r.get("series") and not r.get("error")
    ]
    if not runs:
        print(f"plot-bench: no end-to-end series in {src}", file=sys.stderr)
        return 1

    fig, axes = plt.subplots(
        len(runs), 3, figsize=(16, 3.6 * len(runs)), squeeze=False
    )
    for row, r in zip(axes, runs):
        s = r["series"]
        t = [p["t"] for p in s]
        thr, lat, res = row
        thr.plot(t, [p["pushedPerS"] / 1000 for p in s], label="pushed (answered)")
        thr.plot(
            t,
            [p["receivedPerS"] / 1000 for p in s],
            label="received" + (" (all groups)" if r["kind"] == "fanout" else ""),
        )
        offered = r.get("details", {}).get("offeredMsgPerS")
        if offered:
            thr.axhline(offered / 1000, color="grey", ls=":", label="offered")
        thr.set_ylabel("k msg/s")
        thr.set_title(f"{r['id']}: throughput", fontsize=9)
        thr.legend(fontsize=8)
        thr.grid(alpha=0.3)

        def col(key):
            return [p.get(key) if p.get(key) is not None else float("nan") for p in s]

        lat.plot(t, col("e2eP50Ms"), label="p50")
        lat.plot(t, col("e2eP99Ms"), label="p99")
        lat.set_yscale("log")
        lat.set_ylabel("ms (push answered -> received)")
        lat.set_title(
            f"e2e latency, whole run p50 {r['latency'].get('p50Ms') or 0:.1f} / "
            f"p99 {r['latency'].get('p99Ms') or 0:.1f} / "
            f"p99.9 {r['latency'].get('p999Ms') or 0:.1f} ms",
            fontsize=9,
        )
        lat.legend(fontsize=8)
        lat.grid(alpha=0.3, which="both")

        rs = r.get("resourceSeries") or []
        if rs:
            rt = [p["t"] for p in rs]
            peer = PEERS.get(r["id"].split("/")[0])
            res.plot(
                rt,
                [p["brokerCpuPct"] for p in rs],
                label=f"{peer} CPU %" if peer else "broker CPU %",
            )
            if not peer:
                res.plot(rt, [p["pgCpuPct"] for p in rs], label="PostgreSQL CPU %")
            res.plot(rt, [p["machineBusyPct"] * 2 for p in rs], ls=":", label="machine busy % (of 1 core)")
            res.set_ylabel("% of one core")
            ax2 = res.twinx()
            ax2.plot(rt, [p["brokerRssMb"] for p in rs], color="black", lw=1, label="server RSS MB")
            ax2.set_ylabel("server RSS MB")
            ax2.set_ylim(bottom=0)
            h1, l1 = res.get_legend_handles_labels()
            h2, l2 = ax2.get_legend_handles_labels()
            res.legend(h1 + h2, l1 + l2, fontsize=7, loc="lower left")
        res.set_title("resources", fontsize=9)
        res.grid(alpha=0.3)
        for ax in row:
            ax.set_xlabel("s since start")

    build = report.get("buildNote") or (
        f"work tree at {report.get('gitCommit', '?')}"
        + (" (+ uncommitted server changes)" if report.get("gitDirtyServer") else "")
    )
    fig.suptitle(f"queen-bench end-to-end runs; broker: {build}", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.985))
    fig.savefig(out, dpi=90)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
