#!/usr/bin/env bash
# The NCCL transport's GPU check: the one short script a session with a device machine runs.
# See docs/weight_sync.md ("Running the NCCL tests on a GPU") for what it can and cannot show on
# a one-GPU machine.
#
#   scripts/device/nccl_check.sh pack   # here, on the build machine: build the NCCL test
#                                       # binaries (through the build lock) and put them, with
#                                       # the shared libraries the device image lacks, in
#                                       # .nccl_check/ (git-ignored through .git/info/exclude)
#   scripts/device/nccl_check.sh run    # there, through the device tool, e.g.
#       run(command="bash scripts/device/nccl_check.sh run", carry=[".nccl_check"], timeout_s=420)
#
# `run` first tries to configure a CUDA build of the tree there (build-gpu/, sm_90, NCCL from the
# CUDA toolkit or the NCCL wheel of the image's PyTorch) and to build only the NCCL test targets.
# The device image has CUDA, CMake and ninja but not this project's Debian dependencies (abseil,
# gRPC, GoogleTest, ...), and nothing can be installed there, so when the configure fails it
# runs the binaries that `pack` carried instead, against the device's own libcudart and libnccl.
# Either way it runs the NCCL tests and writes under $OUT (at most 8 files come back):
#   env.log      GPUs, driver, toolkit, the NCCL library used and its version
#   build.log    configure and build (or why the carried binaries were used)
#   nccl_transport_test.log, nccl_contract_test.log  gtest output (NCCL_DEBUG=WARN)
#   nccl_transport_test.xml, nccl_contract_test.xml  gtest XML
#   summary.txt  passed / failed / skipped per binary, and the exit status
# Exit status: 0 when every test passed or skipped, 1 when one failed, 2 when nothing could run.
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
pack_dir="$root/.nccl_check"
tests=(weight_sync_nccl_transport_test weight_sync_nccl_contract_test)

pack() {
  set -e
  cd "$root"
  # Build only our targets, through the shared lock (the build machine is shared).
  flock "$root/build.lock" cmake --build "${SKYRL_BUILD_DIR:-$root/build}" -j2 --target "${tests[@]}"
  rm -rf "$pack_dir"
  mkdir -p "$pack_dir/bin" "$pack_dir/lib"
  grep -qx '/.nccl_check/' .git/info/exclude 2>/dev/null || echo '/.nccl_check/' >>.git/info/exclude
  for t in "${tests[@]}"; do
    cp "${SKYRL_BUILD_DIR:-$root/build}/bin/tests/$t" "$pack_dir/bin/"
    # Every shared library except the C/C++ runtime (the device's own are newer and compatible)
    # and CUDA/NCCL (taken from the device: the driver's libcuda must match, and libnccl is
    # 200 MB, far over what a call carries).
    ldd "$pack_dir/bin/$t" | awk '$3 ~ /^\// {print $3}' | while read -r lib; do
      case "$(basename "$lib")" in
        libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | libgcc_s.so* | libstdc++.so* | \
          libcudart.so* | libnccl.so* | libcuda.so*) ;;
        *) cp -L "$lib" "$pack_dir/lib/" ;;
      esac
    done
  done
  du -sh "$pack_dir"
  echo "carry .nccl_check in the device call"
}

# The first directory holding a file named $1 among the usual places and the image's Python
# packages (the nvidia-nccl-cu13 wheel that PyTorch uses).
find_lib_dir() {
  local name=$1 d
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
    /usr/lib/x86_64-linux-gnu; do
    [[ -e "$d/$name" ]] && { echo "$d"; return 0; }
  done
  local py
  for py in python3 /opt/torch/.venv/bin/python3; do
    command -v "$py" >/dev/null 2>&1 || continue
    "$py" - "$name" <<'EOF' 2>/dev/null && return 0
import glob, os, site, sys
roots = site.getsitepackages() + [site.getusersitepackages()]
for r in roots:
    for f in glob.glob(os.path.join(r, "nvidia", "*", "lib", sys.argv[1])):
        print(os.path.dirname(f)); sys.exit(0)
sys.exit(1)
EOF
  done
  return 1
}

run() {
  local out=${OUT:-$root/nccl_check_out}
  mkdir -p "$out"
  local env_log="$out/env.log" build_log="$out/build.log" summary="$out/summary.txt"
  {
    echo "== $(date -u +%FT%TZ) on $(hostname)"
    nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv 2>&1 || echo "nvidia-smi failed"
    nvcc --version 2>&1 | tail -2 || echo "no nvcc"
    cmake --version 2>&1 | head -1 || echo "no cmake"
  } >"$env_log" 2>&1

  local nccl_dir cudart_dir nccl_inc=""
  nccl_dir=$(find_lib_dir libnccl.so.2) || nccl_dir=""
  cudart_dir=$(find_lib_dir libcudart.so.13) || cudart_dir=""
  [[ -n "$nccl_dir" && -e "$nccl_dir/../include/nccl.h" ]] && nccl_inc=$(cd "$nccl_dir/../include" && pwd)
  {
    echo "libnccl.so.2 in: ${nccl_dir:-NOT FOUND}; nccl.h in: ${nccl_inc:-not beside it}"
    echo "libcudart.so.13 in: ${cudart_dir:-NOT FOUND}"
    [[ -n "$nccl_dir" ]] && grep -aoE 'NCCL version [0-9.]+[+a-z0-9.]*' "$nccl_dir/libnccl.so.2" | head -1
    python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version(), "devices", torch.cuda.device_count())' 2>&1
  } >>"$env_log" 2>&1

  # 1. A CUDA build of the tree, NCCL targets only (NCCL_CHECK_SKIP_BUILD=1: use the carried
  # binaries at once; also how to try the script on the build machine, where a build outside the
  # build lock is not allowed).
  local bin_dir="" ld_extra=""
  {
    if [[ "${NCCL_CHECK_SKIP_BUILD:-0}" == 1 ]]; then
      echo "== source build skipped (NCCL_CHECK_SKIP_BUILD=1)"
    else
    echo "== configure (build-gpu)"
    local nccl_args=()
    [[ -n "$nccl_dir" ]] && nccl_args+=("-DSKYRL_NCCL_LIBRARY=$nccl_dir/libnccl.so.2")
    [[ -n "$nccl_inc" ]] && nccl_args+=("-DSKYRL_NCCL_INCLUDE_DIR=$nccl_inc")
    if cmake -S "$root" -B "$root/build-gpu" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSKYRL_WITH_NCCL=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90 "${nccl_args[@]}" &&
      cmake --build "$root/build-gpu" -j "$(nproc)" --target "${tests[@]}"; then
      echo "== built here"
    else
      echo "== the source build failed (expected on the bare CUDA image: no abseil, gRPC or GoogleTest there)"
    fi
    fi
  } >"$build_log" 2>&1
  if [[ -x "$root/build-gpu/bin/tests/${tests[0]}" ]]; then
    bin_dir="$root/build-gpu/bin/tests"
  elif [[ -x "$pack_dir/bin/${tests[0]}" ]]; then
    bin_dir="$pack_dir/bin"
    ld_extra="$pack_dir/lib"
    echo "== using the binaries carried in .nccl_check (built on the Debian 12 machine, CUDA 13.0, NCCL 2.28.9 headers)" >>"$build_log"
  else
    echo "nothing to run: no build and no carried .nccl_check (run 'nccl_check.sh pack' first and carry it)" | tee -a "$summary"
    return 2
  fi

  # 2. Run them. NCCL_DEBUG=WARN puts NCCL's own reason (e.g. "Duplicate GPU detected") in the log.
  export LD_LIBRARY_PATH="${ld_extra:+$ld_extra:}${nccl_dir:+$nccl_dir:}${cudart_dir:+$cudart_dir:}${LD_LIBRARY_PATH:-}"
  export NCCL_DEBUG=WARN
  local status=0 t name rc
  for t in "${tests[@]}"; do
    name=${t#weight_sync_}
    timeout 240 "$bin_dir/$t" --gtest_output="xml:$out/$name.xml" >"$out/$name.log" 2>&1
    rc=$?
    {
      echo "$t: exit $rc; $(grep -c '^\[       OK \]' "$out/$name.log") passed," \
        "$(grep -c '^\[  FAILED  \] .*(' "$out/$name.log") failed, $(grep -c '^\[  SKIPPED \] .*(' "$out/$name.log") skipped"
      grep -E '^\[  FAILED  \] .*\(' "$out/$name.log" || true
      [[ $rc -eq 124 ]] && echo "$t: TIMED OUT after 240 s (a hang: look at the last RUN line of $name.log)"
      [[ $rc -eq 127 ]] && echo "$t: could not start (missing shared library?)" && ldd "$bin_dir/$t" | grep 'not found'
    } >>"$summary"
    [[ $rc -ne 0 ]] && status=1
  done
  echo "exit $status" >>"$summary"
  cat "$summary"
  return $status
}

case "${1:-}" in
  pack) pack ;;
  run) run ;;
  *)
    echo "usage: $0 pack|run" >&2
    exit 2
    ;;
esac
