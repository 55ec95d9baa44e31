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
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
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
