#!/usr/bin/env bash
# GPU check of a goodput binary built with `--features cuda` (scripts/build-cuda.sh), sized to
# run in about 8 minutes on an H100/H200 (under one 10-minute call; STEPS splits it in two where
# a rerun must fit too, e.g. `check,bench,profile` then `short-qa,long-context,http,plan-check`):
#   1. correctness: `engine-check` on tiny and smollm2-135m (CUDA f32 greedy ids = CPU f32,
#      alone, batched, prefix hits, preemption; bf16 logits vs CPU f32; kernels vs candle ops,
#      the tensor-core prefill kernel and the e4m3 matmul among them), and smollm2's logits
#      with fp8 weights;
#   2. engine-bench on three shapes (decode from CUDA graphs, with each op's GPU time and the
#      small-batch matmul tuning table), llama-3.1-8b again with fp8 weights, without graphs, without
#      programmatic dependent launch (--no-pdl), with long chunks through cuBLAS instead of
#      the tensor-core prefill kernel (--no-flash-prefill) and with prefill chunks of 128 in
#      the paged kernel, in the same session;
#   3. `profile`: the step-cost grid of llama-3.1-8b on the GPU (its steps kept), measured
#      apart from the sweeps, so that they can be predicted from it;
#   4. the sweeps: `run --device cuda --model llama-3.1-8b` short-qa (with `--predict`: each
#      level beside its simulated twin; each level's system line says which share of its steps
#      came from CUDA graphs), its two highest levels again with only decode steps from graphs
#      (`--no-mixed-graphs`), long-context with the report, and `--target http-local` at two
#      loads;
#   5. `plan-check`: `plan --check` of the short-qa sweep with the measured profile and with
#      the roofline calibrated by it (`plan --calibrate`): the planner's error bar on the GPU;
#   6. where nsys exists, the kernels one decode step launches with and without goodput's kernels.
# Results go under $OUT (default /tmp/goodput-gpu); log.txt has every command and its exit. The
# sweeps write their run directories under $RUNS (default $OUT); after each step the small
# files and the sweeps' steps.jsonl (not the per-request records) are packed into
# $OUT/results.tgz, so a run cut short still brings back what it finished.
# Usage: scripts/gpu-check.sh [BINARY] [STEPS]
#   STEPS: any of check,bench,profile,short-qa,long-context,http,plan-check,nsys (default: all).
# A dry run of the steps' commands on a CPU (flags, files, packing; not the figures; DURATION
# longer than the sweeps' 2 s warm-up):
#   DEVICE=cpu MODEL=tiny KV=64MiB LEVELS=1,2 DURATION=5s PROFILE_TIME=20s GPU=h100-sxm \
#     scripts/gpu-check.sh target/release/goodput profile,short-qa,plan-check
set -uo pipefail
BIN=${1:-target/goodput-cuda}
STEPS=${2:-check,bench,profile,short-qa,long-context,http,plan-check,nsys}
OUT=${OUT:-/tmp/goodput-gpu}
RUNS=${RUNS:-$OUT}
DEVICE=${DEVICE:-cuda}
MODEL=${MODEL:-llama-3.1-8b}
KV=${KV:-60GiB}
LEVELS=${LEVELS:-1,4,16,64,256}
DURATION=${DURATION:-8s}
PROFILE_TIME=${PROFILE_TIME:-60s}
# The GPU whose roofline the measured profile calibrates (plan's catalog name).
GPU=${GPU:-h200}
mkdir -p "$OUT" "$RUNS"
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib"
unset RUST_BACKTRACE
T0=$(date +%s)
run() {
  echo "\$ $* [t+$(($(date +%s) - T0)) s]" | tee -a "$OUT/log.txt"
  "$@" 2>&1 | tee -a "$OUT/log.txt"
  echo "exit ${PIPESTATUS[0]} [t+$(($(date +%s) - T0)) s]" | tee -a "$OUT/log.txt"
}
# On a CPU (a dry run) the GPU-only steps are skipped.
has() { [[ ",$STEPS," == *",$1,"* ]] && ! { [ "$DEVICE" = cpu ] && [[ ,check,bench,nsys, == *",$1,"* ]]; }; }
pack() {
  (cd "$OUT" && tar czf results.tgz.tmp --exclude=records.jsonl --exclude='*.nsys-rep' --exclude=results.tgz \
    --exclude=results.tgz.tmp -C "$OUT" . 2>/dev/null; mv results.tgz.tmp results.tgz)
  if [ "$RUNS" != "$OUT" ]; then
    (cd "$RUNS" && tar czf "$OUT/runs.tgz.tmp" --exclude=records.jsonl run-* 2>/dev/null \
      && mv "$OUT/runs.tgz.tmp" "$OUT/runs.tgz")
  fi
}
PROFILE="$OUT/profile-$MODEL.json"

run nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
run bash -c "ldd $BIN | grep -Ei 'cuda|cublas|curand|not found'"

if has check; then
  for m in tiny smollm2-135m; do
    run timeout 150 "$BIN" engine-check --model "$m" --device cuda --json "$OUT/check-$m.json"
  done
  # FP8 weights (e4m3, per-channel scales): the logits against CPU f32, reported as bf16's are
  # (no pass mark: on the CPU, rounded alike, SmolLM2 keeps 92 % top-1 on text, 76 % on
  # random tokens).
  run timeout 150 "$BIN" engine-check --model smollm2-135m --device cuda --dtype fp8 --min-top1 0 \
    --json "$OUT/check-smollm2-135m-fp8.json"
fi

if has bench; then
  # Decode steps are served from CUDA graphs (the default); --no-cuda-graphs times the same
  # steps launched kernel by kernel. --step-profile: GPU time per op of a decode step.
  run timeout 100 "$BIN" engine-bench --model smollm2-135m --device cuda --repeats 3 --decode-steps 16 --graph-probe \
    --step-profile --prompt-lens 128,512,2048 --batch-sizes 1,8,32 --json "$OUT/bench-smollm2-cuda.json"
  run timeout 100 "$BIN" engine-bench --model llama-3.2-1b --device cuda --repeats 3 --decode-steps 16 --step-profile \
    --prompt-lens 128,512,2048 --batch-sizes 1,8,32 --json "$OUT/bench-llama1b-cuda.json"
  # SwiGLU after the gate|up matmul instead of in its epilogue (where the tuning chose it; its
  # small matrices go to goodput's kernels).
  run timeout 100 "$BIN" engine-bench --model smollm2-135m --device cuda --repeats 3 --decode-steps 16 \
    --no-fused-swiglu --prompt-lens 128 --batch-sizes 1,4 --json "$OUT/bench-smollm2-cuda-unfused.json"
  run timeout 150 "$BIN" engine-bench --model llama-3.1-8b --device cuda --repeats 3 --decode-steps 16 --graph-probe \
    --step-profile --prompt-lens 128,2048 --batch-sizes 1,8,32,128 --json "$OUT/bench-llama8b-cuda.json"
  run timeout 120 "$BIN" engine-bench --model llama-3.1-8b --device cuda --repeats 3 --decode-steps 16 --no-cuda-graphs \
    --prompt-lens 128 --batch-sizes 1,32 --json "$OUT/bench-llama8b-cuda-eager.json"
  # Every kernel launched after the previous one has finished (PDL off): the A/B of PDL.
  run timeout 120 "$BIN" engine-bench --model llama-3.1-8b --device cuda --repeats 3 --decode-steps 16 --no-pdl \
    --prompt-lens 128 --batch-sizes 1,32 --json "$OUT/bench-llama8b-cuda-nopdl.json"
  # FP8 weights: decode reads e4m3 bytes (half of bf16's); prefill multiplies their bf16 copy.
  run timeout 120 "$BIN" engine-bench --model llama-3.1-8b --device cuda --dtype fp8 --repeats 3 --decode-steps 16 \
    --prompt-lens 128 --batch-sizes 1,4,32 --json "$OUT/bench-llama8b-cuda-fp8.json"
  # Long chunks through cuBLAS (matmul, causal softmax, matmul) instead of the tensor-core
  # prefill kernel: the A/B of that kernel at 128 and 2048 tokens.
  run timeout 100 "$BIN" engine-bench --model llama-3.1-8b --device cuda --repeats 3 --no-flash-prefill \
    --prompt-lens 128,2048 --batch-sizes 1 --decode-steps 4 --json "$OUT/bench-llama8b-cuda-cublas-prefill.json"
  # Chunks of up to 128 rows in the paged kernel instead of cuBLAS (prefill 128).
  run timeout 100 "$BIN" engine-bench --model llama-3.1-8b --device cuda --repeats 3 --cuda-long-chunk 128 \
    --prompt-lens 128 --batch-sizes 1 --decode-steps 4 --json "$OUT/bench-llama8b-cuda-chunk128.json"
fi

pack
common=(--device "$DEVICE" --model "$MODEL" --kv-memory "$KV")
if has profile; then
  # The grid apart from the sweeps (never fitted on them), every probe's steps kept.
  run timeout 200 "$BIN" profile "${common[@]}" --time "$PROFILE_TIME" --out "$PROFILE" \
    --save-steps "$OUT/profile-steps.jsonl"
  pack
fi
common+=(--refine 0)
if has short-qa; then
  predict=()
  [ -s "$PROFILE" ] && predict=(--predict "$PROFILE")
  run timeout 200 "$BIN" run "${common[@]}" --warmup 2s --duration "$DURATION" --scenario short-qa \
    --concurrency "$LEVELS" "${predict[@]}" --out "$RUNS/run-short-qa" --report
  pack
  # The A/B of mixed-step graphs under load: the two highest levels with prefill steps eager.
  top=$(echo "$LEVELS" | tr ',' '\n' | tail -2 | paste -sd, -)
  run timeout 120 "$BIN" run "${common[@]}" --warmup 2s --duration "$DURATION" --scenario short-qa \
    --concurrency "$top" --no-mixed-graphs --out "$RUNS/run-short-qa-decode-graphs-only"
  pack
fi
if has long-context; then
  # 8K–32K-token prompts take seconds each: levels by request count (a time window would end
  # before a user's second request); the KV pool holds ~24 such prompts.
  run timeout 170 "$BIN" run "${common[@]}" --warmup 1 --requests 6 --scenario long-context --max-model-len 40000 \
    --concurrency 1,2,4,8 --timeout 60s --slo ttft_p95=10s,tpot_p95=100ms,e2e_p95=60s,error_rate=1% \
    --out "$RUNS/run-long-context" --report
  pack
fi
if has http; then
  run timeout 80 "$BIN" run "${common[@]}" --warmup 2s --duration 8s --target http-local --scenario short-qa \
    --concurrency 4,64 --out "$RUNS/run-http-local" --report
  pack
fi
if has plan-check && [ -s "$PROFILE" ] && [ -d "$RUNS/run-short-qa" ]; then
  # The sweep against the profile fitted on the grid, and against the roofline of $GPU carried
  # over with the profile's efficiencies (what `plan` would say before any sweep was run).
  # Each check writes the run's prediction.json; a copy per profile is kept.
  for kind in fitted calibrated stated; do
    case $kind in
      fitted) p="$PROFILE" ;;
      calibrated) p="$OUT/roofline-$GPU-calibrated.json"
        run "$BIN" plan --export-profile "$GPU" -m "$MODEL" --tp 1 --calibrate "$PROFILE" --out "$p" ;;
      stated) p="$OUT/roofline-$GPU-stated.json"
        run "$BIN" plan --export-profile "$GPU" -m "$MODEL" --tp 1 --out "$p" ;;
    esac
    run "$BIN" plan --check "$RUNS/run-short-qa" --profile "$p" \
      && cp "$RUNS/run-short-qa/prediction.json" "$OUT/plan-check-$kind.json"
  done
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
pack
