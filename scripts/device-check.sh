#!/usr/bin/env bash
# The GPU check of the model engine's CUDA backend, in two halves.
#
#   scripts/device-check.sh pack [PACK_DIR]   (here, on a build machine with nvcc)
#       Builds the gpu-labelled test binaries, sinew-model, sinew-model-bench and
#       bench_serving (SINEW_CUDA=ON, sm_90 + PTX) and packs them with their
#       non-system shared libraries (from ldd), stories260K and the bench scripts
#       into PACK_DIR (default: build/device-pack), and that into PACK_DIR.tar.xz.
#       With SINEW_LLAMA_BIN (a directory with llama.cpp's llama-bench and
#       llama-batched-bench built here with nvcc for sm_90, e.g. b4747), they and
#       their libraries go to PACK_DIR-llama.tar.xz (unpacked into PACK_DIR there,
#       as PACK_DIR/llama); with SINEW_LLAMA_SRC (a llama.cpp source tree) its
#       sources go into the pack (llama-src.tar.xz), to be built there.
#   scripts/device-check.sh run [PACK_DIR]    (there, on the GPU machine: Ubuntu 24.04,
#       CUDA 13 driver and cuBLAS installed, nothing else)
#       Runs the CUDA op tests, the whole-model parity tests, the serving tests
#       (batched == single, prefix cache, preemption by swap and recompute,
#       constrained outputs) and the real server with 64 SSE streams, and the GPU
#       benchmarks, writing everything under $OUT (default: ./device-out):
#       nvidia-smi.txt, cuda_ops.{log,json}, cuda_model.{log,json},
#       cuda_serving.{log,json}, cuda_server.{log,json}, llama_build.log,
#       gpu_bench.{log,txt}, gpu_serving_bench.{log,txt}, summary.txt. Each part has
#       its own timeout; all of them take more than one call's 10 minutes, so
#       SINEW_DEVICE_PARTS picks some: the parts are ops, model, serving, server,
#       llama (builds llama-bench and llama-batched-bench with CUDA from packed
#       sources under /tmp/sinew-llama: about 2 minutes, so in the same call as the
#       benchmarks that use them), bench (issue 12's pp/tg table) and serving_bench
#       (issue 16's streams and agent tables); default ops,model,serving,server.
#
# With the device tool: run `scripts/device-check.sh pack` here, then
#   run(command="tar -C build -xJf build/device-pack.tar.xz && OUT_ALL=$OUT &&
#       OUT=/tmp/dout scripts/device-check.sh run; tar -C /tmp -czf $OUT_ALL/dout.tgz dout",
#       carry=["build/device-pack.tar.xz"], timeout_s=540)
# (the tool brings back at most 8 files from $OUT, so the logs travel as one archive;
# the four test parts took 70 s on an H200, the two benchmarks 42 s and over 280 s).
# (the directory itself is over the 64 MiB a call carries; the archive is not).
# and the benchmarks in a second call, with llama.cpp's binaries beside them:
#   run(command="tar -C build -xJf build/device-pack.tar.xz &&
#       tar -C build/device-pack -xJf build/device-pack-llama.tar.xz &&
#       SINEW_DEVICE_PARTS=bench,serving_bench scripts/device-check.sh run",
#       carry=["build/device-pack.tar.xz", "build/device-pack-llama.tar.xz"])
# env: SINEW_BUILD_DIR (default build), SINEW_BENCH_REPS (default 2),
#      SINEW_LLAMA_BIN, SINEW_LLAMA_SRC (pack: see above; run: SINEW_LLAMA_BIN
#      overrides where llama.cpp's binaries are: by default the pack's, else
#      those the llama part built),
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
    bench_serving -j"$(nproc)"
  rm -rf "$PACK"
  mkdir -p "$PACK/bin" "$PACK/lib" "$PACK/root/model-backend/bench" "$PACK/shared/models"
  for b in sinew_model_cuda_ops_test sinew_model_cuda_model_test sinew_model_cuda_serving_test \
           sinew_model_cuda_server_test sinew-model sinew-model-bench bench_serving; do
    cp "$build/bin/$b" "$PACK/bin/"
    strip --strip-debug "$PACK/bin/$b"
    ldd "$build/bin/$b" | awk '/=> \// { print $3 }' | while read -r lib; do
      if ! is_system_lib "$lib" && [ ! -f "$PACK/lib/$(basename "$lib")" ]; then
        cp -L "$lib" "$PACK/lib/"
      fi
    done
  done
  cp model-backend/bench/run_gpu_bench.sh model-backend/bench/run_gpu_serving_bench.sh \
    "$PACK/root/model-backend/bench/"
  if [ -n "${SINEW_LLAMA_BIN:-}" ]; then
    # Beside the pack, not in it: its CUDA library alone is ~30 MB compressed, and
    # only the benchmark call needs it.
    local llama_dir
    llama_dir=$(mktemp -d)/llama
    mkdir -p "$llama_dir"
    for b in llama-bench llama-batched-bench; do
      cp "$SINEW_LLAMA_BIN/$b" "$llama_dir/"
      ldd "$SINEW_LLAMA_BIN/$b" | awk '/=> \// { print $3 }' | while read -r lib; do
        if ! is_system_lib "$lib" && [ ! -f "$llama_dir/$(basename "$lib")" ]; then
          cp -L "$lib" "$llama_dir/"
        fi
      done
    done
    for f in "$llama_dir"/*; do strip --strip-unneeded "$f" 2>/dev/null || true; done
    tar -C "$(dirname "$llama_dir")" -cf - llama | xz -T"$(nproc)" > "$PACK-llama.tar.xz"
    rm -rf "$(dirname "$llama_dir")"
    du -sh "$PACK-llama.tar.xz"
  fi
  if [ -n "${SINEW_LLAMA_SRC:-}" ]; then
    tar -C "$SINEW_LLAMA_SRC" --exclude=./build --exclude=./.git --exclude=./models \
      --exclude=./docs --exclude=./media -cJf "$PACK/llama-src.tar.xz" .
  fi
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
  local parts=",${SINEW_DEVICE_PARTS:-ops,model,serving,server},"
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
  if want llama; then
    if [ -f "$pack_abs/llama-src.tar.xz" ]; then
      part llama_build 300 bash -c "rm -rf /tmp/sinew-llama && mkdir -p /tmp/sinew-llama &&
        tar -C /tmp/sinew-llama -xJf '$pack_abs/llama-src.tar.xz' &&
        cmake -S /tmp/sinew-llama -B /tmp/sinew-llama/build -DGGML_CUDA=ON \
          -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
          -DCMAKE_BUILD_TYPE=Release &&
        cmake --build /tmp/sinew-llama/build --target llama-bench llama-batched-bench -j\$(nproc)"
    else
      echo "llama: no llama-src.tar.xz in the pack (SINEW_LLAMA_SRC at pack time)" | tee -a "$summary"
    fi
  fi
  local llama_bin=${SINEW_LLAMA_BIN:-/tmp/sinew-llama/build/bin}
  if [ -z "${SINEW_LLAMA_BIN:-}" ] && [ -x "$pack_abs/llama/llama-bench" ]; then
    llama_bin=$pack_abs/llama
  fi
  export LD_LIBRARY_PATH="$llama_bin:$LD_LIBRARY_PATH"
  if want bench; then
    local bench_args=(--bin-dir "$pack_abs/bin" --work-dir /tmp/sinew-gpu-bench
                      -r "${SINEW_BENCH_REPS:-2}" --out "$out/gpu_bench.txt")
    if [ -x "$llama_bin/llama-bench" ]; then bench_args+=(--llama-bench "$llama_bin/llama-bench"); fi
    part gpu_bench 230 "$pack_abs/root/model-backend/bench/run_gpu_bench.sh" "${bench_args[@]}"
  fi
  if want serving_bench; then
    local serving_args=(--bin-dir "$pack_abs/bin" --work-dir /tmp/sinew-gpu-bench
                        --out "$out/gpu_serving_bench.txt")
    if [ -x "$llama_bin/llama-batched-bench" ]; then
      serving_args+=(--llama-batched-bench "$llama_bin/llama-batched-bench")
    fi
    part gpu_serving_bench 280 "$pack_abs/root/model-backend/bench/run_gpu_serving_bench.sh" \
      "${serving_args[@]}"
  fi
  cat "$summary"
}

case "$MODE" in
  pack) pack ;;
  run) run ;;
  *) sed -n '2,20p' "$0"; exit 2 ;;
esac
