#!/bin/bash
# Pop+ack through the broker, two builds in the order given (docs/benchmarks.md,
# "Consume path, part 3"): each argument A or B runs queen-bench's pop-ack cases
# against that build on the PostgreSQL at $PGPORT and writes $OUT/<n>-<A|B>.json.
#   A=old/queen-server B=new/queen-server BENCH=queen-bench PGPORT=5497 OUT=/tmp/abba \
#     CASES=b1/c16/p16/m20000,b100/c16/p16/m200000 SECS=10 broker_abba.sh A B B A A B
set -u
mkdir -p "$OUT"
i=0
for v in "$@"; do
  i=$((i + 1))
  case $v in A) bin=$A ;; B) bin=$B ;; *) echo "A or B, not $v" >&2; exit 2 ;; esac
  "$BENCH" suite --broker-bin "$bin" --pg-port "$PGPORT" --systems queen --scenarios pop-ack \
    --payload-bytes 100 --pop-ack-cases "${CASES:-b1/c16/p16/m20000,b100/c16/p16/m200000}" \
    --seconds "${SECS:-10}" --drain-seconds 0 --pg-statements --out-dir "$OUT" \
    --json-out "$OUT/$i-$v.json" --build-note "$v $bin" > "$OUT/$i-$v.log" 2>&1
  grep -E "^pop-ack/|PostgreSQL CPU per pop" "$OUT/$i-$v.log" | sed "s/^/$i $v /"
done
