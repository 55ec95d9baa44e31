#!/usr/bin/env bash
# Installs the Debian packages envforge needs to build and test. Idempotent: when everything is
# present it only checks and exits. Must run as root (or with sudo available) on a fresh machine.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  libboost-dev libboost-system-dev
  libsqlite3-dev sqlite3
  libssl-dev
  nlohmann-json3-dev
  doctest-dev
  pybind11-dev python3 python3-dev libpython3-dev
  libseccomp-dev
  libcurl4-openssl-dev
  python3-numpy python3-pytest
  python3-torch
  # An optimized BLAS behind libblas.so.3 (Debian's alternatives pick it over the reference BLAS,
  # which python3-torch and python3-numpy link): torch's products on one core go from 4 to about
  # 30 GFLOP/s here. The OpenMP build, the runtime torch already uses.
  libopenblas0-openmp
  libzmq3-dev cppzmq-dev bubblewrap python3-ipykernel python3-nbformat
  libpugixml-dev
  zlib1g-dev
  dict-gcide dict-foldoc dict-jargon dict-elements wordnet-base iso-codes python3-doc
  # Code environments (issue 14; scripts/code_fixtures.py): git, and the runners of the eight
  # languages: Go + gotestsum, JDK + JUnit 5 console launcher, mocha (JS) + tsc (TS), PHP +
  # PHPUnit; pytest, gcc/g++ + cmake/ctest and libgtest-dev for Python, C and C++. Debian's
  # mocha runs under a non-Debian node with NODE_PATH=/usr/share/nodejs.
  git golang-go gotestsum default-jdk-headless junit5 mocha node-typescript
  php-cli php-mbstring phpunit libgtest-dev
  # The trajectory viewer's tests drive its page in headless Chromium (issue 17).
  chromium
  # The house (issue 19): Oniguruma for the tokenizer's pre-tokenizer and JSON Schema `pattern`,
  # libcap for capabilities, the official JSON-Schema-Test-Suite (draft7) for the validator's
  # conformance test, clang-format for the format check of .ci/run.
  libonig-dev libcap-dev json-schema-test-suite clang-format
  # Serving at scale (issue 18): the peer server of `envforge bench serve --compare`
  # (bench/peers/, aiohttp), HAProxy in front of a fleet of servers, perf for profiles.
  python3-aiohttp haproxy linux-perf
  # The load generator reads answers with simdjson (server/internal/answer_head.h): nlohmann's
  # parse of a 8.7 KB session/create answer took about 70 us on its one io thread.
  libsimdjson-dev
)

# The official npm clients the server tests drive envforge with (the MCP TypeScript SDK, the MCP
# Inspector, openai; pinned in tests/server/node_clients/package.json), installed once into the
# git-ignored .cache/node-clients so that no test downloads anything. Reinstalled only when the
# pins change; into a scratch directory first, so that a failed install leaves nothing half-done.
# Without npm or a reachable registry it warns and carries on: those tests then skip, saying why.
install_node_clients() {
  local root manifest dir
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  manifest="$root/tests/server/node_clients/package.json"
  dir="$root/.cache/node-clients"
  if ! command -v npm >/dev/null; then
    echo "setup: no npm: the npm client tests will skip" >&2
    return 0
  fi
  if [[ -d "$dir/node_modules" ]] && cmp -s "$manifest" "$dir/package.json"; then
    echo "setup: node clients present ($dir)"
    return 0
  fi
  echo "setup: installing the node clients into $dir"
  rm -rf "$dir.new"
  mkdir -p "$dir.new"
  cp "$manifest" "$dir.new/package.json"
  if (cd "$dir.new" && npm install --no-audit --no-fund --loglevel=error >/dev/null); then
    rm -rf "$dir"
    mv "$dir.new" "$dir"
  else
    rm -rf "$dir.new"
    echo "setup: npm install of the node clients failed: the npm client tests will skip" >&2
  fi
}

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  install_node_clients
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
install_node_clients
