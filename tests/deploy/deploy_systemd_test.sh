#!/usr/bin/env bash
# ctest deploy_systemd_units: deploy/systemd's units load cleanly (systemd-analyze verify, with
# the ExecStart paths pointed at this build), use only flags the daemons have, take every
# ${VAR} from skyrl.env, and stay hardened (systemd-analyze security exposure at most the
# bound below, so a dropped sandboxing line fails the test).
# Usage: deploy_systemd_test.sh SOURCE_DIR BUILD_DIR. Exit 77 (SKIP) without systemd-analyze.
set -euo pipefail
src=$1
build=$2
bin="${SKYRL_BIN_DIR:-$build/bin}"
units="$src/deploy/systemd"
command -v systemd-analyze >/dev/null 2>&1 || { echo "SKIP: systemd-analyze is not installed"; exit 77; }
fail() {
  echo "FAIL: $*"
  exit 1
}
work=$(mktemp -d "$build/deploy-systemd.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Exposure bounds: the head is sandboxed tightly; the worker less (GPUs, CUDA JIT, see its unit).
declare -A bound=([skyrl-head]=2.0 [skyrl-worker]=3.0)
for daemon in skyrl-head skyrl-worker; do
  [[ -x $bin/$daemon ]] || fail "$bin/$daemon is not built"
  sed -e "s|/opt/skyrl/bin/|$bin/|" -e "s|EnvironmentFile=/etc/skyrl/skyrl.env|EnvironmentFile=$units/skyrl.env|" \
    "$units/$daemon.service" >"$work/$daemon.service"
  out=$(cd "$work" && systemd-analyze verify "$daemon.service" 2>&1) || fail "$daemon.service: $out"
  [[ -z $out ]] || fail "$daemon.service: systemd-analyze verify warns: $out"

  # The command line, continuation lines joined.
  cmd=$(sed -n '/^ExecStart=/,/[^\\]$/p' "$units/$daemon.service" | sed 's/\\$//' | tr -s ' \n' ' ')
  help=$("$bin/$daemon" --help)
  for flag in $(grep -o -- ' --[a-z][a-z0-9-]*' <<<"$cmd"); do
    grep -q -- "$flag\b" <<<"$help" || fail "$daemon.service: $daemon has no flag $flag"
  done
  for var in $(grep -o '\${[A-Z_]*}' <<<"$cmd" | tr -d '${}'); do
    grep -q "^$var=" "$units/skyrl.env" || fail "$daemon.service: \${$var} is not set in skyrl.env"
  done

  exposure=$(cd "$work" && systemd-analyze security --offline=true "$daemon.service" 2>&1 |
    sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
  [[ -n $exposure ]] || fail "$daemon.service: systemd-analyze security printed no exposure level"
  awk -v e="$exposure" -v b="${bound[$daemon]}" 'BEGIN { exit !(e <= b) }' ||
    fail "$daemon.service: exposure $exposure above ${bound[$daemon]}: hardening was lost"
  echo "ok   $daemon.service: verifies, flags exist, exposure $exposure (bound ${bound[$daemon]})"
done

# The check bites: a misspelt directive and an unknown flag are caught.
sed 's/^ProtectSystem=strict/ProtectSystm=strict/' "$work/skyrl-head.service" >"$work/bad-key.service"
out=$(cd "$work" && systemd-analyze verify bad-key.service 2>&1 || true)
grep -q "Unknown key 'ProtectSystm'" <<<"$out" || fail "verify did not flag a misspelt directive: $out"
grep -q -- "--no-such-flag\b" <<<"$("$bin/skyrl-head" --help)" && fail "skyrl-head --help lists --no-such-flag"
echo "PASS: systemd units"
