#!/usr/bin/env bash
# The CI gate's trials (issue 48): N times, two same-seed runs of the in-process engine and one
# slowed 2x (--max-num-seqs 1), each pair compared with every default metric gated at 10 %.
# Prints one line per trial: the exit of same-vs-same (0 expected) and same-vs-slow (1
# expected), then the counts. Usage: scripts/compare-trials.sh [N] [GOODPUT]
set -uo pipefail
n=${1:-10}
bin=${2:-target/release/goodput}
dir=$(mktemp -d)
gate="ttft_p50=+10%,ttft_p95=+10%,ttft_p99=+10%,tpot_p50=+10%,tpot_p95=+10%,itl_p95=+10%,e2e_p95=+10%,queue_time_p95=+10%,prefill_time_p95=+10%,output_throughput=-10%,request_throughput=-10%"
run() { "$bin" run --concurrency 4 --requests 200 --seed 1 -q --out "$dir/$1" --overwrite "${@:2}" >/dev/null 2>&1; }
same_ok=0; slow_fail=0
for i in $(seq 1 "$n"); do
  run a; run b; run s --max-num-seqs 1
  "$bin" compare "$dir/a" "$dir/b" --fail-on "$gate" >"$dir/same.txt" 2>&1; same=$?
  "$bin" compare "$dir/a" "$dir/s" --fail-on "$gate" >"$dir/slow.txt" 2>&1; slow=$?
  [ "$same" = 0 ] && same_ok=$((same_ok + 1))
  [ "$slow" = 1 ] && slow_fail=$((slow_fail + 1))
  echo "trial $i: same-seed exit $same, slowed exit $slow; load $(cut -d' ' -f1 /proc/loadavg)"
  [ "$same" = 0 ] || grep -E "regressed|FAIL|Busy machine" "$dir/same.txt" | head -7
done
echo "same-seed pairs exiting 0: $same_ok of $n; slowed pairs exiting 1: $slow_fail of $n"
rm -rf "$dir"
