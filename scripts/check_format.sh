#!/usr/bin/env bash
# Checks that every C++ file of the tree is formatted by the repo's .clang-format (Debian's clang-format 14).
# Prints the files that are not; exit 1 if any. `bash scripts/check_format.sh --fix` formats them in place.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.c' '*.h')
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
unformatted=()
for file in "${files[@]}"; do
  clang-format --dry-run --Werror "$file" > /dev/null 2>&1 || unformatted+=("$file")
done
if [ ${#unformatted[@]} -gt 0 ]; then
  printf '%s: not formatted (bash scripts/check_format.sh --fix)\n' "${unformatted[@]}"
  echo "check_format: ${#unformatted[@]} file(s) not formatted"
  exit 1
fi
echo "check_format: ${#files[@]} files formatted"
