#!/usr/bin/env bash
# Builds the runtime image of deploy/Dockerfile (`--target prebuilt`: the
# binaries cargo built here, on a Debian bookworm base made with debootstrap,
# since no image registry is reachable), runs it against the local PostgreSQL
# with --network host, pushes, pops and acks through it, checks the
# HEALTHCHECK, the non-root user, the CLI inside, and that `docker stop`
# drains: /health answers 503 `draining`, a push still succeeds with
# `Connection: close`, a parked long poll is answered, the exit status is 0.
#
# Not part of scripts/test.sh (a few minutes, and it needs docker.io and
# debootstrap: `apt-get install docker.io debootstrap`). Starts dockerd
# (--storage-driver=vfs --bridge=none --iptables=false) when none answers, and
# stops it again. QUEEN_PROFILE=release uses a release build (default: debug).
set -euo pipefail
cd "$(dirname "$0")/.."

PGHOST=${PGHOST:-127.0.0.1}
PGUSER=${PGUSER:-postgres}
profile=${QUEEN_PROFILE:-debug}
base=queen-base:bookworm
image=queen:test
name=queen-docker-test-$$
port=${PORT:-16632}
db=queen_docker_$$
work=$(mktemp -d -t queen-docker.XXXXXX)
dockerd_pid=""
say() { echo "docker-test: $*"; }
fail() { echo "docker-test: FAIL: $*" >&2; docker logs "$name" 2>&1 | tail -n 30 >&2 || true; exit 1; }

cleanup() {
  docker rm -f "$name" >/dev/null 2>&1 || true
  docker volume rm -f "$name-spool" >/dev/null 2>&1 || true
  psql -h "$PGHOST" -U "$PGUSER" -d postgres -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
  if [ -n "$dockerd_pid" ]; then kill "$dockerd_pid" 2>/dev/null || true; wait "$dockerd_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

if ! docker info >/dev/null 2>&1; then
  command -v dockerd >/dev/null || { echo "docker-test: no docker daemon and no dockerd (apt-get install docker.io)" >&2; exit 1; }
  say "starting dockerd"
  dockerd --storage-driver=vfs --bridge=none --iptables=false >"$work/dockerd.log" 2>&1 &
  dockerd_pid=$!
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
  docker info >/dev/null 2>&1 || { cat "$work/dockerd.log" >&2; exit 1; }
fi

if ! docker image inspect "$base" >/dev/null 2>&1; then
  command -v debootstrap >/dev/null || { echo "docker-test: debootstrap missing (apt-get install debootstrap)" >&2; exit 1; }
  say "making $base with debootstrap (a few minutes, once)"
  debootstrap --variant=minbase bookworm "$work/rootfs" http://deb.debian.org/debian >"$work/debootstrap.log" 2>&1 \
    || { tail "$work/debootstrap.log" >&2; exit 1; }
  tar -C "$work/rootfs" -c . | docker import - "$base" >/dev/null
  rm -rf "$work/rootfs"
fi

say "building queen-server and queen ($profile)"
if [ "$profile" = release ]; then
  cargo build -q --release -p queen-server -p queen-cli
else
  cargo build -q -p queen-server -p queen-cli
fi
mkdir -p deploy/dist
cp "target/$profile/queen-server" "target/$profile/queen" deploy/dist/

say "building $image (deploy/Dockerfile --target prebuilt)"
started=$(date +%s)
DOCKER_BUILDKIT=0 docker build -q --network host -f deploy/Dockerfile --target prebuilt \
  --build-arg RUNTIME_IMAGE="$base" -t "$image" . >/dev/null
say "image built in $(( $(date +%s) - started )) s, $(docker image inspect -f '{{.Size}}' "$image" | awk '{printf "%d MB", $1/1e6}')"
[ "$(docker image inspect -f '{{.Config.User}}' "$image")" = "queen:queen" ] || fail "the image does not run as queen"
docker image inspect -f '{{json .Config.Volumes}}' "$image" | grep -q /var/lib/queen/spool || fail "no spool volume"
docker image inspect -f '{{json .Config.Healthcheck}}' "$image" | grep -q /health || fail "no HEALTHCHECK on /health"

psql -h "$PGHOST" -U "$PGUSER" -d postgres -qc "CREATE DATABASE $db"
say "running it against $PGHOST/$db on port $port"
docker run -d --name "$name" --network host \
  -e PORT="$port" -e PG_HOST="$PGHOST" -e PG_USER="$PGUSER" -e PG_DB="$db" -e DB_POOL_SIZE=5 \
  -e QUEEN_SERVER_ID=docker-test -e SHUTDOWN_DRAIN_MS=2000 -e SHUTDOWN_TIMEOUT_MS=10000 \
  -v "$name-spool:/var/lib/queen/spool" "$image" >/dev/null
url="http://127.0.0.1:$port"
for _ in $(seq 1 100); do curl -sf "$url/health" >/dev/null && break; sleep 0.2; done
health=$(curl -sf "$url/health") || fail "/health never answered 200"
say "health: $health"
echo "$health" | grep -q '"commit"' || fail "/health has no commit"
[ "$(docker exec "$name" id -u)" != 0 ] || fail "runs as root"
docker exec "$name" queen-server --version | grep -q "queen-server " || fail "queen-server --version"
docker exec "$name" queen --url "$url" status >"$work/status.txt" 2>&1 || { cat "$work/status.txt"; fail "the queen CLI inside cannot reach the broker"; }

q=docker-$$
curl -sf -XPOST "$url/api/v1/push" -H 'content-type: application/json' \
  -d "{\"items\":[{\"queue\":\"$q\",\"partition\":\"p\",\"payload\":{\"n\":1}},{\"queue\":\"$q\",\"partition\":\"p\",\"payload\":{\"n\":2}}]}" >/dev/null \
  || fail "push"
popped=$(curl -sf "$url/api/v1/pop/queue/$q?batch=10") || fail "pop"
count=$(echo "$popped" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["messages"]))')
[ "$count" = 2 ] || fail "popped $count messages, expected 2: $popped"
acks=$(echo "$popped" | python3 -c 'import json,sys; b=json.load(sys.stdin); print(json.dumps({"acknowledgments":[{"transactionId":m["transactionId"],"partitionId":m["partitionId"],"leaseId":m["leaseId"],"status":"completed"} for m in b["messages"]]}))')
curl -sf -XPOST "$url/api/v1/ack/batch" -H 'content-type: application/json' -d "$acks" | grep -q '"success":true' || fail "ack"
say "pushed 2, popped 2, acked 2 through the container"

for _ in $(seq 1 40); do
  [ "$(docker inspect -f '{{.State.Health.Status}}' "$name")" = healthy ] && break
  sleep 1
done
[ "$(docker inspect -f '{{.State.Health.Status}}' "$name")" = healthy ] || fail "HEALTHCHECK never reported healthy"
say "HEALTHCHECK: healthy"

# the drain: a parked long poll, then docker stop
curl -s -o /dev/null -w '%{http_code} %{time_total}\n' "$url/api/v1/pop/queue/empty-$$?wait=true&timeout=30000" >"$work/parked" &
parked=$!
sleep 0.5
stop_started=$(date +%s.%N)
docker stop -t 30 "$name" >/dev/null &
stopping=$!
sleep 0.3
code=$(curl -s -o "$work/health" -w '%{http_code}' "$url/health")
[ "$code" = 503 ] && grep -q '"draining"' "$work/health" || fail "/health during the drain: $code $(cat "$work/health")"
headers=$(curl -s -D - -o /dev/null -XPOST "$url/api/v1/push" -H 'content-type: application/json' \
  -d "{\"items\":[{\"queue\":\"$q\",\"partition\":\"p\",\"payload\":{\"n\":3}}]}")
echo "$headers" | head -n 1 | grep -q " 201" || fail "a push during the drain: $headers"
echo "$headers" | grep -qi '^connection: close' || fail "no Connection: close during the drain: $headers"
wait "$parked"
wait "$stopping"
stop_took=$(python3 -c "import time; print(round(time.time() - $stop_started, 2))")
read -r parked_code parked_time <"$work/parked"
[ "$parked_code" = 204 ] || fail "the parked long poll got $parked_code"
exit_code=$(docker inspect -f '{{.State.ExitCode}}' "$name")
[ "$exit_code" = 0 ] || fail "exit status $exit_code after docker stop"
docker logs "$name" 2>&1 | grep -q '"draining' || fail "no drain in the log"
say "docker stop: /health 503 draining at once, a push answered 201 with Connection: close, the parked long poll answered 204 after ${parked_time} s, exit 0 after ${stop_took} s (SHUTDOWN_DRAIN_MS=2000)"
say "PASS"
