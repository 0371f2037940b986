#!/usr/bin/env bash
# The installed binary runs without the source tree: `cmake --install` into a temporary prefix, the prefix
# moved elsewhere, then an example config that names a platform preset and a model table, and a user config
# with a platform file of its own beside it, run from the moved prefix while the source and build trees are
# hidden (an empty folder mounted over them in a private mount namespace).
# Usage: run_install_test.sh BUILD_DIR SOURCE_DIR       (exit 77: skipped, no mount namespace available)
set -euo pipefail
build=$(realpath "$1")
source=$(realpath "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if ! unshare --mount true 2>/dev/null; then
  echo "install test skipped: cannot create a mount namespace here (needs root or user namespaces)"
  exit 77
fi

cmake --install "$build" --prefix "$tmp/installed" >/dev/null
mv "$tmp/installed" "$tmp/moved" # nothing in the prefix may depend on where it was installed
mkdir -p "$tmp/empty" "$tmp/work/mine"
# An example as shipped (presets named as "platforms/...", the model table by name).
cp "$tmp/moved/share/sparsim/configs/examples/platform_star_16.json" "$tmp/work/example.json"
# A user config whose platform file sits beside it: relative paths resolve against the config's folder.
cp "$source/configs/platforms/star_16.json" "$tmp/work/mine/my_star.json"
cat > "$tmp/work/mine/user.json" <<'JSON'
{"name": "user", "ranks": 4, "iterations": 1, "topology": {"file": "my_star.json"},
 "algorithm": {"name": "topka"}, "workload": {"n": 100000, "density": 0.01},
 "gradients": {"source": "calibrated", "model": "lstm_an4"}}
JSON

hidden() { # runs "$@" in the work folder with the source and build trees out of reach
  unshare --mount bash -c 'mount --bind "$1" "$3" && mount --bind "$1" "$2" && shift 3 && cd "$0" && "$@"' \
    "$tmp/work" "$tmp/empty" "$source" "$build" "$@"
}
sparsim=$tmp/moved/bin/sparsim

hidden test ! -e "$source/configs" || { echo "FAIL: the source tree is still visible"; exit 1; }
hidden "$sparsim" run example.json --out out-example --quiet
hidden "$sparsim" run mine/user.json --out out-user --quiet
for out in out-example out-user; do
  test -s "$tmp/work/$out/manifest.json" || { echo "FAIL: $out has no manifest"; exit 1; }
done
grep -q "\"git_revision\": \"$(cat "$tmp/moved/share/sparsim/revision")\"" "$tmp/work/out-example/manifest.json" ||
  { echo "FAIL: the manifest does not carry the installed revision"; exit 1; }
# The gradient recorder ships beside the data (PYTHONPATH=PREFIX/share/sparsim/python).
test -f "$tmp/moved/share/sparsim/python/sparsim_record/ddp.py" || { echo "FAIL: the recorder is not installed"; exit 1; }

# The presets came from the prefix: without them the same config is a config error that says where it looked.
rm -r "$tmp/moved/share/sparsim/configs/platforms"
set +e
message=$(hidden "$sparsim" validate example.json 2>&1)
status=$?
set -e
if [ "$status" -ne 2 ] || ! grep -q "$tmp/moved/share/sparsim/configs/platforms/star_16.json" <<<"$message"; then
  echo "FAIL: without the prefix's presets, expected exit 2 naming them; got $status: $message"
  exit 1
fi
echo "install test passed: the installed binary ran an example and a user config without the source tree"
