#!/usr/bin/env bash
# Builds llama.cpp's llama-server and llama-bench (CPU only) from a source tree or a git
# directory, as the reference the CPU benchmarks compare with (never a dependency).
#   native  the best the building CPU has (GGML_NATIVE, as llama.cpp builds by default)
#   avx2    AVX2, FMA and F16C with AVX-512 off, to compare sinew's AVX2 kernels
#           (SINEW_CPU_LEVEL=avx2) with llama.cpp's on an AVX-512 machine
# usage: model-backend/bench/build_llama_reference.sh SOURCE OUT_DIR native|avx2 [JOBS]
#   SOURCE  a llama.cpp checkout, or a bare git directory (its HEAD is exported first)
# Prints the directory holding bin/llama-server and bin/llama-bench; an existing
# build there is reused.
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,10p' "$0"; exit 2; }
SRC=$1 OUT=$2 LEVEL=$3 JOBS=${4:-2}
case "$LEVEL" in
  native) FLAGS=(-DGGML_NATIVE=ON) ;;
  avx2) FLAGS=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
               -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF
               -DGGML_AVX512_BF16=OFF -DGGML_AVX_VNNI=OFF) ;;
  *) echo "level must be native or avx2, not '$LEVEL'" >&2; exit 2 ;;
esac
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
BUILD="$OUT/build-$LEVEL"
if [ -x "$BUILD/bin/llama-server" ] && [ -x "$BUILD/bin/llama-bench" ]; then
  echo "$BUILD"
  exit 0
fi
if [ ! -f "$SRC/CMakeLists.txt" ]; then
  # A bare git directory (the search tool's fetch): export its HEAD once.
  if [ ! -f "$OUT/src/CMakeLists.txt" ]; then
    # File by file: a fetched snapshot may lack its largest blobs (vocab files, docs),
    # which the build does not need; they are named and skipped.
    mkdir -p "$OUT/src.part"
    git --git-dir="$SRC" ls-tree -r HEAD | while read -r mode type sha path; do
      [ "$type" = blob ] || continue
      mkdir -p "$OUT/src.part/$(dirname "$path")"
      git --git-dir="$SRC" cat-file blob "$sha" >"$OUT/src.part/$path" 2>/dev/null ||
        { echo "skipped (not in the snapshot): $path" >&2; rm -f "$OUT/src.part/$path"; }
      [ "$mode" != 100755 ] || chmod +x "$OUT/src.part/$path"
    done
    rm -rf "$OUT/src" && mv "$OUT/src.part" "$OUT/src"
  fi
  SRC="$OUT/src"
fi
cmake -S "$SRC" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
  -DGGML_CUDA=OFF -DGGML_OPENMP=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  "${FLAGS[@]}" >"$OUT/cmake-$LEVEL.log" 2>&1 ||
  { tail -20 "$OUT/cmake-$LEVEL.log" >&2; exit 1; }
cmake --build "$BUILD" -j "$JOBS" --target llama-server llama-bench >"$OUT/build-$LEVEL.log" 2>&1 ||
  { tail -20 "$OUT/build-$LEVEL.log" >&2; exit 1; }
echo "$BUILD"
