#!/usr/bin/env bash
# GPU check of a goodput binary built with `--features cuda` (scripts/build-cuda.sh), sized to
# run in about 8 minutes on an H100/H200 so that one rerun fits a 15-minute GPU allowance:
#   1. correctness: `engine-check` on tiny and smollm2-135m (CUDA f32 greedy ids = CPU f32,
#      alone, batched, prefix hits, preemption; bf16 logits vs CPU f32; kernels vs candle ops);
#   2. engine-bench on three shapes (decode from CUDA graphs, with each op's GPU time and the
#      small-batch matmul tuning table), llama-3.1-8b again without graphs, without
#      programmatic dependent launch (--no-pdl) and with prefill chunks of 128 in the paged
#      kernel, in the same session;
#   3. the sweeps: `run --device cuda --model llama-3.1-8b` short-qa and long-context with the
#      report, and `--target http-local` at two loads;
#   4. where nsys exists, the kernels one decode step launches with and without goodput's kernels.
# Results go under $OUT (default /tmp/goodput-gpu); log.txt has every command and its exit. The
# sweeps write their run directories under $RUNS (default $OUT); after each sweep their small
# files (not the per-request records and steps) are packed into $OUT/results.tgz.
# Usage: scripts/gpu-check.sh [BINARY] [STEPS]
#   STEPS: any of check,bench,short-qa,long-context,http,nsys (default: all).
set -uo pipefail
BIN=${1:-target/goodput-cuda}
STEPS=${2:-check,bench,short-qa,long-context,http,nsys}
OUT=${OUT:-/tmp/goodput-gpu}
RUNS=${RUNS:-$OUT}
mkdir -p "$OUT" "$RUNS"
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib"
unset RUST_BACKTRACE
T0=$(date +%s)
run() {
  echo "\$ $* [t+$(($(date +%s) - T0)) s]" | tee -a "$OUT/log.txt"
  "$@" 2>&1 | tee -a "$OUT/log.txt"
  echo "exit ${PIPESTATUS[0]} [t+$(($(date +%s) - T0)) s]" | tee -a "$OUT/log.txt"
}
has() { [[ ",$STEPS," == *",$1,"* ]]; }
pack() {
  (cd "$RUNS" && tar czf "$OUT/results.tgz.tmp" --exclude=records.jsonl --exclude=steps.jsonl run-* 2>/dev/null \
    && mv "$OUT/results.tgz.tmp" "$OUT/results.tgz")
}

run nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
run bash -c "ldd $BIN | grep -Ei 'cuda|cublas|curand|not found'"

if has check; then
  for m in tiny smollm2-135m; do
    run timeout 150 "$BIN" engine-check --model "$m" --device cuda --json "$OUT/check-$m.json"
  done
fi

if has bench; then
  # Decode steps are served from CUDA graphs (the default); --no-cuda-graphs times the same
  # steps launched kernel by kernel. --step-profile: GPU time per op of a decode step.
  run timeout 100 "$BIN" engine-bench --model smollm2-135m --device cuda --repeats 3 --decode-steps 16 --graph-probe \
    --step-profile --prompt-lens 128,512,2048 --batch-sizes 1,8,32 --json "$OUT/bench-smollm2-cuda.json"
  run timeout 100 "$BIN" engine-bench --model llama-3.2-1b --device cuda --repeats 3 --decode-steps 16 --step-profile \
    --prompt-lens 128,512,2048 --batch-sizes 1,8,32 --json "$OUT/bench-llama1b-cuda.json"
  run timeout 150 "$BIN" engine-bench --model llama-3.1-8b --device cuda --repeats 3 --decode-steps 16 --graph-probe \
    --step-profile --prompt-lens 128,2048 --batch-sizes 1,8,32,128 --json "$OUT/bench-llama8b-cuda.json"
  run timeout 120 "$BIN" engine-bench --model llama-3.1-8b --device cuda --repeats 3 --decode-steps 16 --no-cuda-graphs \
    --prompt-lens 128 --batch-sizes 1,32 --json "$OUT/bench-llama8b-cuda-eager.json"
  # Every kernel launched after the previous one has finished (PDL off): the A/B of PDL.
  run timeout 120 "$BIN" engine-bench --model llama-3.1-8b --device cuda --repeats 3 --decode-steps 16 --no-pdl \
    --prompt-lens 128 --batch-sizes 1,32 --json "$OUT/bench-llama8b-cuda-nopdl.json"
  # Chunks of up to 128 rows in the paged kernel instead of cuBLAS (prefill 128).
  run timeout 100 "$BIN" engine-bench --model llama-3.1-8b --device cuda --repeats 3 --cuda-long-chunk 128 \
    --prompt-lens 128 --batch-sizes 1 --decode-steps 4 --json "$OUT/bench-llama8b-cuda-chunk128.json"
fi

common=(--device cuda --model llama-3.1-8b --kv-memory 60GiB --refine 0)
if has short-qa; then
  run timeout 170 "$BIN" run "${common[@]}" --warmup 2s --duration 8s --scenario short-qa \
    --concurrency 1,4,16,64,256 --out "$RUNS/run-llama8b-short-qa" --report
  pack
fi
if has long-context; then
  # 8K–32K-token prompts take seconds each: levels by request count (a time window would end
  # before a user's second request); the KV pool holds ~24 such prompts.
  run timeout 170 "$BIN" run "${common[@]}" --warmup 1 --requests 6 --scenario long-context --max-model-len 40000 \
    --concurrency 1,2,4,8 --timeout 60s --slo ttft_p95=10s,tpot_p95=100ms,e2e_p95=60s,error_rate=1% \
    --out "$RUNS/run-llama8b-long-context" --report
  pack
fi
if has http; then
  run timeout 80 "$BIN" run "${common[@]}" --warmup 2s --duration 8s --target http-local --scenario short-qa \
    --concurrency 4,64 --out "$RUNS/run-llama8b-http-local" --report
  pack
fi
# Last, as it is optional: kernels per decode step with and without goodput's kernels.
if has nsys; then
  if command -v nsys > /dev/null; then
    for att in paged gather; do
      run timeout 90 nsys profile -o "$OUT/nsys-$att" --force-overwrite true "$BIN" engine-bench --model llama-3.2-1b \
        --device cuda --attention "$att" --repeats 1 --warmup 0 --decode-steps 10 --prompt-lens 16 --batch-sizes 1
      run timeout 60 nsys stats --report cuda_gpu_kern_sum --format csv -o "$OUT/nsys-$att" "$OUT/nsys-$att.nsys-rep"
    done
  else
    echo "nsys not found: no kernel counts (engine-bench --graph-probe counts a captured step's kernels)" | tee -a "$OUT/log.txt"
  fi
fi
echo "done [t+$(($(date +%s) - T0)) s]" | tee -a "$OUT/log.txt"
