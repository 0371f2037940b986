#!/usr/bin/env bash
# Checks every #include of the engine against its layers (docs/ARCHITECTURE.md, "Layers"): a folder may
# include only the folders listed for it, and only sim/network/simgrid/ includes SimGrid's headers (tests and
# bench/smpi may too: they test and compare the SimGrid backend). Prints each violation; exit 1 if any.
# Usage: bash scripts/check_layers.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# folder -> the project folders its files may include (its own always allowed)
declare -A allowed=(
  [sim/base]=""
  [sim/data]="sim/base"
  [sim/comm]="sim/base sim/data"
  [topologies]="sim/base"
  [algorithms]="sim/base sim/data sim/comm"
  [sim/gradients]="sim/base sim/data"
  [sim/network]="sim/base"
  [sim/network/link_level]="sim/base sim/data sim/comm sim/network"
  [sim/network/fibers]="sim/base sim/network sim/network/link_level"
  [sim/network/simgrid]="sim/base sim/data sim/comm sim/network sim/network/link_level topologies"
  [sim/network/models]="sim/base sim/data sim/comm sim/network sim/network/link_level sim/network/fibers sim/network/simgrid topologies"
  [sim/network/mpi]="sim/base sim/data sim/comm sim/network sim/network/models topologies"
  [sim/run]="sim/base sim/data sim/comm sim/gradients sim/network sim/network/models topologies algorithms"
  [sim/output]="sim/base sim/data sim/comm sim/gradients sim/network topologies algorithms sim/run"
  [sim/cli]="sim/base sim/data sim/comm sim/gradients sim/network sim/network/models sim/network/mpi topologies algorithms sim/run sim/output"
)

violations=0
for folder in "${!allowed[@]}"; do
  for file in "$folder"/*.hpp "$folder"/*.cpp; do
    [ -e "$file" ] || continue
    while IFS= read -r line; do
      target=${line#*\"}
      target=${target%%\"*}
      target_folder=$(dirname "$target")
      ok=0
      [ "$target_folder" = "$folder" ] && ok=1
      for permitted in ${allowed[$folder]}; do
        [ "$target_folder" = "$permitted" ] && ok=1
      done
      if [ $ok = 0 ]; then
        echo "$file: includes $target (allowed: $folder ${allowed[$folder]})"
        violations=$((violations + 1))
      fi
    done < <(grep -E '^\s*#\s*include\s+"' "$file" || true)
    if [ "$folder" != sim/network/simgrid ] && grep -qE '^\s*#\s*include\s+<simgrid' "$file"; then
      echo "$file: includes a SimGrid header (only sim/network/simgrid/ may)"
      violations=$((violations + 1))
    fi
  done
done
# Every source folder of the engine is listed above.
for dir in $(find sim topologies algorithms -type f \( -name '*.hpp' -o -name '*.cpp' \) -printf '%h\n' | sort -u); do
  [ -n "${allowed[$dir]+x}" ] || { echo "$dir: a source folder without layer rules in scripts/check_layers.sh"; violations=$((violations + 1)); }
done
if [ $violations -gt 0 ]; then
  echo "check_layers: $violations violation(s)"
  exit 1
fi
echo "check_layers: every include follows the layers"
