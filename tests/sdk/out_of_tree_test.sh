#!/usr/bin/env bash
# The C++ SDK from outside the tree: installs this build into a temporary prefix, builds
# examples/cpp_actor against it with find_package(SkyrlRuntime), and runs its actor on a local
# cluster of the installed daemons, the host binary shipped in the actor's working_dir, from
# the installed Python package.
#   out_of_tree_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d /tmp/skyrl-sdk-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

echo "== install into $prefix"
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log"
for f in bin/skyrl-head bin/skyrl-worker bin/skyrl bin/skyrl-actor-host bin/skyrl-actor-host-python \
         include/runtime/client/client.h include/runtime/actor/actor.h include/skyrl/actor.pb.h \
         lib/libskyrl_client.a lib/cmake/SkyrlRuntime/SkyrlRuntimeConfig.cmake python/skyrl_runtime/__init__.py; do
  [[ -e $prefix/$f ]] || { echo "FAIL: the install has no $f"; exit 1; }
done

echo "== build examples/cpp_actor against it"
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S "$src/examples/cpp_actor" -B "$tmp/greeter" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >"$tmp/configure.log" || { cat "$tmp/configure.log"; exit 1; }
cmake --build "$tmp/greeter" >"$tmp/build.log" || { cat "$tmp/build.log"; exit 1; }
mkdir "$tmp/wd"
cp "$tmp/greeter/skyrl-actor-host-greeter" "$tmp/wd/"

echo "== run it on a local cluster of the installed daemons"
cd "$tmp"
env -u SKYRL_BIN_DIR -u SKYRL_ADDRESS -u SKYRL_TOKEN HOME="$tmp" PYTHONPATH="$prefix/python" \
  /usr/bin/python3 - "$tmp/wd" "$prefix" <<'PY'
import os
import sys

import skyrl_runtime as ray
from skyrl_runtime import _cluster

wd, prefix = sys.argv[1], sys.argv[2]
assert os.path.realpath(ray.__file__).startswith(os.path.realpath(prefix)), ray.__file__
assert os.path.realpath(_cluster.bin_dir()) == os.path.realpath(os.path.join(prefix, "bin"))
ray.init(num_cpus=2)
Greeter = ray.cross_language.cpp_actor_class("greeter", host="greeter")
g = Greeter.options(num_cpus=0.5, runtime_env={"working_dir": wd}).remote(b"Hello")
assert ray.get(g.greet.remote(b"skyrl"), timeout=60) == b"Hello, skyrl"
cwd = ray.get(g.cwd.remote()).decode()
assert cwd != wd and "working_dirs" in cwd, cwd
missing = Greeter.options(num_cpus=0.5).remote(b"Hello")  # no working_dir: no such host
try:
    ray.get(missing.greet.remote(b"x"), timeout=60)
    raise SystemExit("FAIL: an actor of a host nobody shipped answered")
except ray.exceptions.RayError as e:
    assert "no actor host \"greeter\"" in str(e), e
ray.shutdown()
print("out-of-tree actor host: ok")
PY
