#!/usr/bin/env bash
# Configures and builds Sinew into build/ (or $SINEW_BUILD_DIR).
# Extra arguments are passed to cmake's configure step, e.g. -DSINEW_WERROR=ON.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${SINEW_BUILD_DIR:-build}
JOBS=${SINEW_JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -G Ninja "$@" >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
