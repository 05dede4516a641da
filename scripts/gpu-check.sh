#!/usr/bin/env bash
# GPU check of a goodput binary built with `--features cuda` (see scripts/build-cuda.sh):
# the same greedy tokens on CPU and CUDA from the same dummy weights, then engine-bench on the
# GPU for a small, a 1B and an 8B shape. Writes its results under $OUT (default /tmp/goodput-gpu).
# Usage: scripts/gpu-check.sh [BINARY]
set -uo pipefail
BIN=${1:-target/goodput-cuda}
OUT=${OUT:-/tmp/goodput-gpu}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib"
unset RUST_BACKTRACE
run() { echo "\$ $*" | tee -a "$OUT/log.txt"; "$@" 2>&1 | tee -a "$OUT/log.txt"; echo "exit ${PIPESTATUS[0]}" | tee -a "$OUT/log.txt"; }

run nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
run bash -c "ldd $BIN | grep -Ei 'cuda|cublas|curand|not found'"

# 1. Correctness: CPU f32 and CUDA f32 give the same greedy ids (dummy weights, same seed).
for m in tiny smollm2-135m; do
  for dev in cpu cuda; do
    timeout 120 "$BIN" generate --model "$m" --device "$dev" --dtype f32 --prompt-ids 5,17,42,99,7,3,250,11 \
      --max-tokens 24 --ids > "$OUT/ids-$m-$dev.txt" 2>> "$OUT/log.txt"
  done
  if cmp -s "$OUT/ids-$m-cpu.txt" "$OUT/ids-$m-cuda.txt" && [ -s "$OUT/ids-$m-cpu.txt" ]; then
    echo "greedy ids $m: CPU f32 == CUDA f32: $(cat "$OUT/ids-$m-cpu.txt")" | tee -a "$OUT/log.txt"
  else
    echo "greedy ids $m DIFFER: cpu [$(cat "$OUT/ids-$m-cpu.txt")] cuda [$(cat "$OUT/ids-$m-cuda.txt")]" | tee -a "$OUT/log.txt"
  fi
done

# 2. engine-bench on the GPU (bf16).
run timeout 150 "$BIN" engine-bench --model smollm2-135m --device cuda --repeats 3 --decode-steps 16 \
  --json "$OUT/bench-smollm2-cuda.json"
run timeout 150 "$BIN" engine-bench --model llama-3.2-1b --device cuda --repeats 3 --decode-steps 16 \
  --prompt-lens 128,512,2048 --batch-sizes 1,4,16,32 --json "$OUT/bench-llama1b-cuda.json"
run timeout 200 "$BIN" engine-bench --model llama-3.1-8b --device cuda --repeats 2 --decode-steps 8 \
  --prompt-lens 128,2048 --batch-sizes 1,8,32 --json "$OUT/bench-llama8b-cuda.json"
echo done | tee -a "$OUT/log.txt"
