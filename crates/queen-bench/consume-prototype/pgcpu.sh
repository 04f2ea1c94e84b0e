#!/usr/bin/env bash
# CPU clock ticks (utime + stime) used so far by a private PostgreSQL: its live
# processes (their titles carry the server's cluster_name, $CLUSTER) plus what
# exited backends left in the postmaster's cutime + cstime.
#   CLUSTER=i19prof PGDATA=/path/to/data pgcpu.sh
set -euo pipefail
pm=$(head -1 "$PGDATA/postmaster.pid")
t=0
for d in /proc/[0-9]*; do
  c=$(tr '\0' ' ' < "$d/cmdline" 2>/dev/null) || continue
  case "$c" in *"$CLUSTER"*)
    s=$(cut -d')' -f2- "$d/stat" 2>/dev/null) || continue
    # shellcheck disable=SC2086
    set -- $s; t=$((t + ${12} + ${13}));;
  esac
done
# shellcheck disable=SC2046
set -- $(cut -d')' -f2- "/proc/$pm/stat")
echo $((t + ${12} + ${13} + ${14} + ${15}))
