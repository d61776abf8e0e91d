#!/usr/bin/env bash
# Installs every build and run dependency of Sinew from Debian packages.
# Idempotent: packages already present are left alone; nothing else is downloaded.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libboost1.81-dev libboost-json1.81-dev libboost-locale1.81-dev libboost-program-options1.81-dev
  libicu-dev  # the chat templates' Unicode case mappings and character classes (model-backend/src/jinja)
  librocksdb-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libcurl4-openssl-dev libssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libspdlog-dev libfmt-dev libcli11-dev
  runc runsc debootstrap iproute2 procps util-linux
  clang-format wrk curl python3 python3-jinja2 python3-yaml python3-kubernetes ccache
  python3-jsonschema  # OpenApiTest: live answers against docs/harness-openapi.yaml
  libcpptoml-dev chromium
  libhowardhinnant-date-dev  # time zones of schedules (harness/src/cron.cc)
  etcd-server etcd-client  # coordination of sandbox hosts (docs/scale-out.md); tests start their own
  clang-14 libclang-rt-14-dev  # fuzz targets (libFuzzer, ASan, UBSan): scripts/fuzz.sh
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# Node.js and npm (the console's browser test, the tokenizer peers): Debian's packages
# only where none is installed (a NodeSource nodejs carries its own npm and conflicts
# with Debian's).
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)

# npm packages, each folder pinned by its package-lock.json: the tokenizer tests'
# reference encoders, the web console's browser test (puppeteer-core, which drives
# Debian's chromium and downloads no browser, and axe-core), and Anthropic's SDK that
# drives sinew-model's Messages API (ctest sinew_model_anthropic_sdk).
npm_peers() {
  local root dir
  root="$(cd "$(dirname "$0")/.." && pwd)"
  for dir in "$root/model-backend/src/tokenizer/js" "$root/harness/ui/test" \
             "$root/model-backend/tests/clients/anthropic"; do
    if command -v npm >/dev/null 2>&1 && [ ! -d "$dir/node_modules" ]; then
      (cd "$dir" && PUPPETEER_SKIP_DOWNLOAD=1 npm ci --silent) && echo "install-deps: npm ci in $dir"
    fi
  done
}

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages already installed"
  npm_peers
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
npm_peers
echo "install-deps: done"
