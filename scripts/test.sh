#!/usr/bin/env bash
# Builds Sinew with warnings as errors and runs the default test suite
# (everything except the `long` label: soak, long fuzzing and long crash loops), then
# every fuzz target briefly in its own clang build (scripts/fuzz.sh, ctest label `fuzz`;
# not when ctest arguments are given; SINEW_SKIP_FUZZ=1 leaves it out).
# Run the long suite with: scripts/test.sh --long
set -euo pipefail
cd "$(dirname "$0")/.."
label_args=(-LE long)
if [ "${1:-}" = "--long" ]; then label_args=(-L long); shift; fi
# The CUDA backend is compiled wherever nvcc is, GPU or not, so that CI keeps compiling it
# (its tests skip, with the reason, where no GPU is present).
cuda_args=()
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then cuda_args=(-DSINEW_CUDA=ON); fi
./scripts/build.sh -DSINEW_WERROR=ON ${cuda_args[@]+"${cuda_args[@]}"}
BUILD_DIR=${SINEW_BUILD_DIR:-build}
cd "$BUILD_DIR"
rc=0
ctest --output-on-failure --timeout 600 -j "${SINEW_TEST_JOBS:-2}" "${label_args[@]}" "$@" || rc=$?
if [ "$rc" -ne 0 ]; then
  # A CI log is often read from its end only: repeat each failed test's failure lines there.
  ../scripts/ctest-failures.sh Testing/Temporary/LastTest.log Testing/Temporary/LastTestsFailed.log || true
  exit "$rc"
fi
cd - >/dev/null
if [ "${label_args[*]}" = "-LE long" ] && [ $# -eq 0 ] && [ "${SINEW_SKIP_FUZZ:-0}" != 1 ]; then
  ./scripts/fuzz.sh
fi
