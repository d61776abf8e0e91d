#!/usr/bin/env bash
# Configures and builds Sinew into build/ (or $SINEW_BUILD_DIR).
# Extra arguments are passed to cmake's configure step, e.g. -DSINEW_WERROR=ON.
# SINEW_TARGETS="a b": build only those targets (and what they need) instead of
# everything; scripts/run.sh and scripts/eval.sh build just the binaries they start.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${SINEW_BUILD_DIR:-build}
JOBS=${SINEW_JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -G Ninja "$@" >/dev/null
targets=()
for t in ${SINEW_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$BUILD_DIR" -j "$JOBS" ${targets[@]+"${targets[@]}"}
