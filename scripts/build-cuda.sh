#!/usr/bin/env bash
# Build goodput with --features cuda on a machine WITHOUT a GPU or CUDA toolkit,
# for a CUDA 13 / sm_90 (H200) target. Toolkit pieces come from PyPI wheels (CUDA 13.0 set).
# Idempotent: re-running skips the download/extract when /opt/cuda13 already exists.
set -euo pipefail
# Run as root (it writes /opt/cuda13). Result: target/goodput-cuda, stripped, for scripts/gpu-check.sh.

WHEELS=/opt/cuda13-wheels
CUDA=/opt/cuda13

if [ ! -x "$CUDA/bin/nvcc" ]; then
  mkdir -p "$WHEELS" /opt/cuda13-extract
  (cd "$WHEELS" && pip download --no-deps -q \
      nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88 \
      nvidia-cuda-runtime==13.0.96 nvidia-cuda-cccl==13.0.85 nvidia-cuda-nvrtc==13.0.88 \
      nvidia-cublas==13.1.0.3 nvidia-curand==10.4.0.35)
  (cd /opt/cuda13-extract && for w in "$WHEELS"/*.whl; do unzip -qo "$w"; done)
  rm -rf "$CUDA"; cp -a /opt/cuda13-extract/nvidia/cu13 "$CUDA"
  chmod +x "$CUDA"/bin/* "$CUDA"/nvvm/bin/*
  # toolkit-root layout: lib64, targets/x86_64-linux/{include,lib} (nvcc.profile uses the latter)
  ln -sfn lib "$CUDA/lib64"
  mkdir -p "$CUDA/targets/x86_64-linux"
  ln -sfn ../../include "$CUDA/targets/x86_64-linux/include"
  ln -sfn ../../lib "$CUDA/targets/x86_64-linux/lib"
  # unversioned names for the linker
  (cd "$CUDA/lib" && for f in libcublas.so.13 libcublasLt.so.13 libcudart.so.13 libcurand.so.10 libnvrtc.so.13 libnvblas.so.13; do ln -sfn "$f" "${f%.so.*}.so"; done)
  # No wheel ships libcuda (the driver). Build a link-only stub with SONAME libcuda.so.1
  # exporting every cu* function named in cuda.h; each returns CUDA_ERROR_NO_DEVICE (100).
  # The real libcuda.so.1 of the GPU machine's driver is used at run time.
  mkdir -p "$CUDA/lib/stubs"
  { gcc -E -P -x c "$CUDA/include/cuda.h" 2>/dev/null; cat "$CUDA/include/cuda.h"; } \
    | grep -oP '\bcu[A-Z]\w*(?=\s*\()' | sort -u \
    | { echo '/* link-only libcuda stub */'; while read -r s; do echo "int $s(void){return 100;}"; done; } \
    > "$CUDA/lib/stubs/libcuda_stub.c"
  gcc -shared -fPIC -O1 -Wl,-soname,libcuda.so.1 -o "$CUDA/lib/stubs/libcuda.so" "$CUDA/lib/stubs/libcuda_stub.c"
  ln -sfn libcuda.so "$CUDA/lib/stubs/libcuda.so.1"   # only for running the binary here (CPU tests)
fi

export CUDA_ROOT=$CUDA CUDA_HOME=$CUDA CUDA_PATH=$CUDA
export PATH=$CUDA/bin:$PATH            # cudarc runs `nvcc --version` -> cuda-13000; cudaforge finds nvcc on PATH
export CUDA_COMPUTE_CAP=90             # candle-kernels PTX/.o for sm_90(a)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target/cuda}

cd "$(dirname "$0")/.."
nice -n 19 cargo build --release --features cuda --bin goodput

cp "$CARGO_TARGET_DIR/release/goodput" /tmp/goodput-cuda.tmp
strip /tmp/goodput-cuda.tmp             # ~120 MiB -> ~54 MiB
mv /tmp/goodput-cuda.tmp target/goodput-cuda
readelf -d target/goodput-cuda | grep NEEDED
ls -la target/goodput-cuda

# Local smoke test (CPU) needs the stub + wheel libs on the loader path:
#   LD_LIBRARY_PATH=$CUDA/lib/stubs:$CUDA/lib target/goodput-cuda models
# On the GPU machine: make sure libcudart.so.13, libcublas.so.13 (+libcublasLt.so.13),
# libcurand.so.10 and the driver's libcuda.so.1 are found (e.g. LD_LIBRARY_PATH=/usr/local/cuda/lib64).
