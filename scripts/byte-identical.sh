#!/usr/bin/env bash
# The outputs issue 49 keeps byte-identical across moving code out of the cli: the reports of
# the checked-in fixture runs, `plan --json/--html` of four models, a fleet plan on a seeded
# trace, and a `--simulate` run with a fixed seed. Writes them under OUT; run it with the
# binary before and after a change, then `diff -r` the two OUTs. What differs between any two
# runs is left out or stays and is named in the change's note: the --simulate run's summary
# is kept without its clock, machine, command and harness CPU (jq), its table without the
# simulation's speed; OUT's own path shows in the fleet plan and the simulated weights; the
# fleet's simulation speed and the profile's creation time are wall-clock.
#
#   scripts/byte-identical.sh target/release/goodput /tmp/before
set -euo pipefail
bin=$(realpath "$1")
out=$2
cd "$(dirname "$0")/.."
rm -rf "$out" && mkdir -p "$out"
for run in run-small run-v0.1; do
  "$bin" report "tests/fixtures/$run" -o "$out/$run.html" 2>/dev/null
done
for m in llama-3.1-8b qwen2.5-0.5b deepseek-v3 mixtral-8x7b; do
  "$bin" plan -m "$m" --rate 2 --requests 60 --json "$out/plan-$m.json" --html "$out/plan-$m.html" >"$out/plan-$m.txt" 2>/dev/null
done
python3 scripts/shared-prefix-trace.py --rate 4 --duration 30 --out "$out/trace.jsonl" >/dev/null
"$bin" plan -m llama-3.1-8b --gpus h100-sxm --tp 1 --trace "$out/trace.jsonl" --trace-block-size 16 --replicas 2 \
  --json "$out/fleet.json" >"$out/fleet.txt" 2>/dev/null
"$bin" plan --export-profile h200 -m llama-3.1-8b --tp 1 --out "$out/profile.json" --json "$out/phases.json" 2>/dev/null |
  sed "s|$out|OUT|g" >"$out/projection.txt"
"$bin" plan -m qwen2.5-0.5b --curve --gpus h100-sxm,l40s --tp 1 --requests 60 --json "$out/curve.json" --html "$out/curve.html" \
  >"$out/curve.txt" 2>/dev/null
"$bin" run -m llama-3.1-8b --simulate "$out/profile.json" --seed 7 --concurrency 1,16 --requests 40 --refine 0 \
  --out "$out/sim" >"$out/sim.txt" 2>/dev/null
# What differs between any two runs of the same seed: wall-clock time, CPU, the machine.
jq -S 'del(.clock, .machine, .command) | .levels[] |= del(.harness, .machine)' "$out/sim/summary.json" >"$out/sim-summary.json"
grep -v '^simulation: ' "$out/sim.txt" >"$out/sim-tables.txt"
rm -rf "$out/sim" "$out/sim.txt"
