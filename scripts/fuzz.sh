#!/usr/bin/env bash
# libFuzzer targets (fuzz/, docs/fuzzing.md) in their own clang-14 build, build-fuzz/
# (or $SINEW_FUZZ_BUILD_DIR): every library with ASan + UBSan + coverage.
#
#   scripts/fuzz.sh                      build, then run every target briefly (ctest -L fuzz,
#                                        $SINEW_FUZZ_SECONDS each, default 15): what CI runs
#   scripts/fuzz.sh long TARGET [SECS [RUNS]]
#                                        one target under nice until SECS (default 3600) have
#                                        passed or RUNS executions (default 10,000,000) are
#                                        done, whichever comes first (the issue's long run),
#                                        keeping its corpus in build-fuzz/fuzz-long/TARGET/corpus
#   scripts/fuzz.sh list                 the targets
#
# SINEW_FUZZ_LONG_FLAGS adds libFuzzer flags to a long run, e.g. "-timeout=120" when the run
# shares its core with builds (a starved niced fuzzer otherwise reports false timeouts).
#
# A finding fails the run and leaves the input in build-fuzz/fuzz-work/TARGET/ (or
# fuzz-long/TARGET/): reproduce with build-fuzz/bin/TARGET FILE.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${SINEW_FUZZ_BUILD_DIR:-build-fuzz}
JOBS=${SINEW_JOBS:-$(nproc)}
SECONDS_EACH=${SINEW_FUZZ_SECONDS:-15}

configure() {
  CC=clang-14 CXX=clang++-14 cmake -S . -B "$BUILD_DIR" -G Ninja \
    -DSINEW_FUZZ=ON -DSINEW_BUILD_TESTS=OFF -DSINEW_BUILD_BENCH=OFF -DSINEW_CUDA=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g" \
    -DSINEW_FUZZ_SECONDS="$SECONDS_EACH" >/dev/null
}

case "${1:-}" in
  "")
    configure
    cmake --build "$BUILD_DIR" -j "$JOBS" --target sinew_fuzzers
    cd "$BUILD_DIR"
    ctest --output-on-failure -L fuzz -j "${SINEW_TEST_JOBS:-2}"
    ;;
  list)
    ls fuzz/*_fuzz.cc | sed 's|fuzz/||; s|\.cc$||'
    echo "tokenizer_bpe_fuzz tokenizer_spm_fuzz (both from tokenizer_fuzz.cc)"
    ;;
  long)
    target=${2:?usage: scripts/fuzz.sh long TARGET [SECONDS [RUNS]]}
    secs=${3:-3600}
    runs=${4:-10000000}
    configure
    cmake --build "$BUILD_DIR" -j "$JOBS" --target "$target"
    dict=fuzz/dict/$target.dict
    [ -f "$dict" ] || dict=""
    extra=()
    [ "$target" = jinja_fuzz ] && extra+=(../shared/models/templates)
    nice -n 15 fuzz/run_fuzzer.sh "$BUILD_DIR/bin/$target" "$BUILD_DIR/fuzz-long/$target" "$dict" "$secs" \
      "fuzz/corpus/$target" "${extra[@]}" -- -runs="$runs" ${SINEW_FUZZ_LONG_FLAGS:-}
    ;;
  *)
    echo "usage: scripts/fuzz.sh [long TARGET [SECONDS [RUNS]] | list]" >&2
    exit 2
    ;;
esac
