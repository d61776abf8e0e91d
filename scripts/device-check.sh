#!/usr/bin/env bash
# The GPU check of the model engine's CUDA backend, in two halves.
#
#   scripts/device-check.sh pack [PACK_DIR]   (here, on a build machine with nvcc)
#       Builds the gpu-labelled test binaries, sinew-model and sinew-model-bench (SINEW_CUDA=ON,
#       sm_90 + PTX) and packs them with their non-system shared libraries (from
#       ldd), stories260K and the bench script into PACK_DIR (default:
#       build/device-pack, under 64 MiB so a device run can carry it).
#   scripts/device-check.sh run [PACK_DIR]    (there, on the GPU machine: Ubuntu 24.04,
#       CUDA 13 driver and cuBLAS installed, nothing else)
#       Runs the CUDA op tests, the whole-model parity tests, the serving tests
#       (batched == single, prefix cache, preemption by swap and recompute,
#       constrained outputs) and the real server with 64 SSE streams, and the GPU
#       benchmark, writing everything under $OUT (default: ./device-out):
#       nvidia-smi.txt, cuda_ops.{log,json}, cuda_model.{log,json},
#       cuda_serving.{log,json}, cuda_server.{log,json}, gpu_bench.{log,txt},
#       summary.txt. Each part has its own timeout; all of them take up to about
#       10 minutes, so SINEW_DEVICE_PARTS picks some (default
#       ops,model,serving,server,bench) to split them over two calls.
#
# With the device tool: run `scripts/device-check.sh pack` here, then
#   run(command="tar -C build -xJf build/device-pack.tar.xz && scripts/device-check.sh run",
#       carry=["build/device-pack.tar.xz"], timeout_s=540)
# (the directory itself is over the 64 MiB a call carries; the archive is not).
# env: SINEW_BUILD_DIR (default build), SINEW_BENCH_REPS (default 2),
#      SINEW_LLAMA_BENCH (optional path of llama.cpp's CUDA llama-bench there),
#      SINEW_SKIP_BENCH=1 (tests only), SINEW_DEVICE_PARTS (see above).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
MODE=${1:-}
PACK=${2:-build/device-pack}

# Libraries the GPU machine has itself: glibc's, the C++ runtime, the driver and cuBLAS.
is_system_lib() {
  case "$(basename "$1")" in
    linux-vdso*|ld-linux*|libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*) return 0 ;;
    libstdc++.so*|libgcc_s.so*) return 0 ;;
    libcuda.so*|libcublas.so*|libcublasLt.so*|libnvidia*) return 0 ;;
  esac
  return 1
}

pack() {
  local build=${SINEW_BUILD_DIR:-build}
  cmake -S . -B "$build" -G Ninja -DSINEW_CUDA=ON -DSINEW_WERROR=ON > /dev/null
  cmake --build "$build" --target sinew_model_cuda_ops_test sinew_model_cuda_model_test \
    sinew_model_cuda_serving_test sinew_model_cuda_server_test sinew-model sinew-model-bench \
    -j"$(nproc)"
  rm -rf "$PACK"
  mkdir -p "$PACK/bin" "$PACK/lib" "$PACK/root/model-backend/bench" "$PACK/shared/models"
  for b in sinew_model_cuda_ops_test sinew_model_cuda_model_test sinew_model_cuda_serving_test \
           sinew_model_cuda_server_test sinew-model sinew-model-bench; do
    cp "$build/bin/$b" "$PACK/bin/"
    strip --strip-debug "$PACK/bin/$b"
    ldd "$build/bin/$b" | awk '/=> \// { print $3 }' | while read -r lib; do
      if ! is_system_lib "$lib" && [ ! -f "$PACK/lib/$(basename "$lib")" ]; then
        cp -L "$lib" "$PACK/lib/"
      fi
    done
  done
  cp model-backend/bench/run_gpu_bench.sh "$PACK/root/model-backend/bench/"
  cp scripts/device-check.sh "$PACK/"
  cp "$ROOT/../shared/models/stories260K.gguf" "$PACK/shared/models/"
  for lib in "$PACK"/lib/*; do strip --strip-unneeded "$lib" 2>/dev/null || true; done
  du -sh "$PACK"
  echo "packed $(ls "$PACK/bin" | wc -l) binaries and $(ls "$PACK/lib" | wc -l) libraries into $PACK"
  # The server's libraries (ICU's data alone is 30 MB) take the directory past
  # what a device call carries (64 MiB), so it travels compressed.
  tar -C "$(dirname "$PACK")" -cJf "$PACK.tar.xz" "$(basename "$PACK")"
  du -sh "$PACK.tar.xz"
}

run() {
  local pack_abs out
  pack_abs=$(cd "$PACK" && pwd)
  out=${OUT:-$ROOT/device-out}
  mkdir -p "$out"
  export LD_LIBRARY_PATH="$pack_abs/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
  export SINEW_SOURCE_DIR="$pack_abs/root"  # tests find ../shared/models/stories260K.gguf
  export SINEW_BIN_DIR="$pack_abs/bin"       # the server test starts sinew-model from here
  local parts=",${SINEW_DEVICE_PARTS:-ops,model,serving,server,bench},"
  local summary="$out/summary.txt"
  : > "$summary"
  { nvidia-smi || echo "nvidia-smi failed"; } > "$out/nvidia-smi.txt" 2>&1
  for b in "$pack_abs"/bin/*; do
    echo "== ldd $(basename "$b")" >> "$out/ldd.txt"
    ldd "$b" >> "$out/ldd.txt" 2>&1 || true
  done
  part() {  # name timeout command...
    local name=$1 limit=$2 rc=0
    shift 2
    local start=$SECONDS
    timeout "$limit" "$@" > "$out/$name.log" 2>&1 || rc=$?
    echo "$name: exit $rc in $((SECONDS - start)) s" | tee -a "$summary"
    grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/$name.log" | head -40 >> "$summary" || true
  }
  want() { [[ $parts == *",$1,"* ]]; }
  if want ops; then
    part cuda_ops 80 "$pack_abs/bin/sinew_model_cuda_ops_test" --gtest_output="json:$out/cuda_ops.json"
  fi
  if want model; then
    part cuda_model 140 "$pack_abs/bin/sinew_model_cuda_model_test" \
      --gtest_output="json:$out/cuda_model.json"
  fi
  if want serving; then
    part cuda_serving 100 "$pack_abs/bin/sinew_model_cuda_serving_test" \
      --gtest_output="json:$out/cuda_serving.json"
  fi
  if want server; then
    part cuda_server 60 "$pack_abs/bin/sinew_model_cuda_server_test" \
      --gtest_output="json:$out/cuda_server.json"
  fi
  local bench_args=(--bin-dir "$pack_abs/bin" --work-dir /tmp/sinew-gpu-bench
                    -r "${SINEW_BENCH_REPS:-2}" --out "$out/gpu_bench.txt")
  if [ -n "${SINEW_LLAMA_BENCH:-}" ]; then bench_args+=(--llama-bench "$SINEW_LLAMA_BENCH"); fi
  if [ "${SINEW_SKIP_BENCH:-0}" = 1 ] || ! want bench; then cat "$summary"; return; fi
  part gpu_bench 230 "$pack_abs/root/model-backend/bench/run_gpu_bench.sh" "${bench_args[@]}"
  cat "$summary"
}

case "$MODE" in
  pack) pack ;;
  run) run ;;
  *) sed -n '2,20p' "$0"; exit 2 ;;
esac
