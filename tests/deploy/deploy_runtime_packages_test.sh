#!/usr/bin/env bash
# ctest deploy_runtime_packages: deploy/docker/runtime-packages, which decides what the image's
# runtime stage installs, maps this build's skyrl-head to installed Debian packages (gRPC among
# them), and fails, naming the library, when a library belongs to no package.
# Usage: deploy_runtime_packages_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
build=$2
bin="${SKYRL_BIN_DIR:-$build/bin}"
tool="$src/deploy/docker/runtime-packages"
fail() {
  echo "FAIL: $*"
  exit 1
}
command -v dpkg-query >/dev/null 2>&1 || { echo "SKIP: not a Debian system (no dpkg-query)"; exit 77; }
[[ -x $bin/skyrl-head ]] || fail "$bin/skyrl-head is not built"

packages=$("$tool" "$bin/skyrl-head") || fail "runtime-packages failed on skyrl-head"
grep -q '^libgrpc++' <<<"$packages" || fail "no libgrpc++ package among: $packages"
grep -q '^libhiredis' <<<"$packages" || fail "no libhiredis package among: $packages"
while read -r p; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    fail "runtime-packages printed \"$p\", which is not an installed package"
done <<<"$packages"
echo "ok   skyrl-head needs $(wc -l <<<"$packages") packages: $(tr '\n' ' ' <<<"$packages")"

# A library no package owns (a private copy found through LD_LIBRARY_PATH) must stop the build.
work=$(mktemp -d "$build/deploy-rtpkg.XXXXXX")
trap 'rm -rf "$work"' EXIT
hiredis=$(ldd "$bin/skyrl-head" | awk '$1 ~ /^libhiredis/ { print $3 }')
[[ -n $hiredis ]] || fail "skyrl-head does not link hiredis; pick another library for this check"
cp "$hiredis" "$work/"
if out=$(LD_LIBRARY_PATH="$work" "$tool" "$bin/skyrl-head" 2>&1); then
  fail "runtime-packages accepted a library outside any package: $out"
fi
grep -q "no Debian package owns $work/libhiredis" <<<"$out" || fail "unexpected error: $out"
echo "ok   a library outside any package is refused: $out"
echo "PASS: runtime-packages"
