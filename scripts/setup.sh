#!/usr/bin/env bash
# Installs sparsim's Debian packages (when missing) and builds it in Release into build/.
# Usage: bash scripts/setup.sh        (SPARSIM_BUILD_DIR overrides the build folder)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake g++ make pkg-config libsimgrid-dev libboost-graph-dev nlohmann-json3-dev libfmt-dev libgtest-dev
          python3-matplotlib dataset-fashion-mnist zlib1g-dev
          python3-pandas python3-nbconvert python3-ipykernel jupyter-nbconvert
          clang libclang-rt-14-dev  # clang and its sanitizer/libFuzzer runtimes: scripts/fuzz.sh
          clang-format)             # scripts/check_format.sh
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

build=${SPARSIM_BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$(nproc)"
