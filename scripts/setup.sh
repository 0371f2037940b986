#!/usr/bin/env bash
# Installs sparsim's Debian packages (when missing) and builds it in Release into build/.
# Usage: bash scripts/setup.sh          everything: the simulator, the tests and the checks' tools
#        bash scripts/setup.sh main     what the main job needs: the sparsim binary, matplotlib, Fashion-MNIST
# (SPARSIM_BUILD_DIR overrides the build folder)
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-all}
case "$mode" in
  all|main) ;;
  *) echo "usage: bash scripts/setup.sh [main]" >&2; exit 2 ;;
esac

packages=(cmake g++ make pkg-config libsimgrid-dev libboost-graph-dev libboost-context-dev nlohmann-json3-dev libfmt-dev zlib1g-dev libsleef-dev
          python3-matplotlib dataset-fashion-mnist)
if [ "$mode" = all ]; then
  packages+=(libgtest-dev
             python3-pandas python3-nbconvert python3-ipykernel jupyter-nbconvert  # notebooks test
             python3-torch             # the recorder's tests (python/sparsim_record)
             clang libclang-rt-14-dev  # clang and its sanitizer/libFuzzer runtimes: scripts/fuzz.sh
             clang-format              # scripts/check_format.sh
             libopenmpi-dev openmpi-bin)  # sparsim-mpi and its tests (docs/mpi.md)
fi
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
if [ "$mode" = main ]; then
  # A build folder configured with the tests keeps them (and libgtest-dev is then installed already).
  tests=$(sed -n 's/^SPARSIM_BUILD_TESTS:BOOL=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSPARSIM_BUILD_TESTS="${tests:-OFF}" >/dev/null
  cmake --build "$build" -j"$(nproc)" --target sparsim
else
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSPARSIM_BUILD_TESTS=ON >/dev/null
  cmake --build "$build" -j"$(nproc)"
fi
