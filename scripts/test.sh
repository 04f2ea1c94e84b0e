#!/usr/bin/env bash
# Runs the whole test suite: unit and integration tests against the local
# PostgreSQL, the official-client compatibility suite, and a benchmark smoke run.
set -euo pipefail
cd "$(dirname "$0")/.."

if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast
else
  cargo test --workspace --no-fail-fast
fi
# nextest does not run doctests: the client's rustdoc examples must compile (those needing a broker are no_run)
cargo test --doc -p queen-client

if [ -x compat/python/run.sh ] || [ -f compat/python/run.sh ]; then
  bash compat/python/run.sh
  # the switch from the reference 0.15: import, then the 2.6.0 client consumes (docs/migrating.md)
  bash compat/python/import.sh
fi

# the dashboard in a real browser: chromium driven by playwright-core (docs/operations.md, Dashboard)
bash scripts/dashboard-test.sh --update-docs

# three meshed brokers on loopback: the launcher asserts the mesh comes up
BASE_PORT=26632 BASE_MESH_PORT=26642 bash scripts/ha-local.sh --check >/dev/null

# deploy/: the compose and Kubernetes files parsed and checked against the broker's settings, haproxy -c, systemd-analyze verify (docs/deploy.md)
cargo build -q -p queen-server
(source scripts/ops-venv.sh && "$OPS_PY" scripts/deploy_check.py target/debug/queen-server)
# three brokers behind HAProxy (deploy/haproxy.cfg), each restarted with SIGTERM twice under pushes, long polls and acks
# through the official client: no failed request, nothing lost or redelivered, order kept; then one SIGKILLed, reported (about a minute)
bash scripts/ha-rolling-test.sh

# fault injection: three brokers SIGKILLed, cut from PostgreSQL and from each other, then the delivery checker (docs/operations/fault-checking.md)
cargo build -q -p queen-server && cargo run -q -p queen-chaos -- --duration 60s
# the same against a private primary and a synchronous standby: the primary killed, then frozen, the standby promoted 1 s later each time (about 55 s)
cargo run -q -p queen-chaos -- --duration 30s --private-pg --standby
# PostgreSQL's own failover tooling: a pg_auto_failover monitor, primary and secondary, the brokers given the URI
# `pg_autoctl show uri` prints; a switchover, then the primary node killed and started again (about 80 s;
# docs/operations/postgresql-ha.md)
cargo run -q -p queen-chaos -- --duration 60s --pg-auto-failover

bash scripts/bench-smoke.sh
