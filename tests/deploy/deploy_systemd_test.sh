#!/usr/bin/env bash
# ctest deploy_systemd_units: deploy/systemd's units load cleanly (systemd-analyze verify, with
# the ExecStart paths pointed at this build), use only flags the daemons have, take every
# ${VAR} from skyrl.env, and stay hardened (systemd-analyze security exposure at most the
# bound below, so a dropped sandboxing line fails the test), and their command lines, expanded
# from skyrl.env, start a head and a worker that registers with it.
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

# The units' command lines start real daemons: ExecStart with skyrl.env's values (store, bind
# address, ports and node address made local), ${VAR} expanded to one word each as systemd does
# (an empty value stays an empty argument), %d the credentials directory, the log directory a
# temporary one. The worker must register with the head.
free_port() {  # a port nothing listens on now (the head refuses to start if it is taken since)
  local p
  while true; do
    p=$((20000 + RANDOM % 40000))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
}
head_port=$(free_port)
sed -e "s|^SKYRL_STORE=.*|SKYRL_STORE=memory|" -e "s|^SKYRL_HEAD_BIND=.*|SKYRL_HEAD_BIND=127.0.0.1|" \
  -e "s|^SKYRL_HEAD_PORT=.*|SKYRL_HEAD_PORT=$head_port|" -e "s|^SKYRL_HEAD_ADDRESS=.*|SKYRL_HEAD_ADDRESS=127.0.0.1:$head_port|" \
  -e "s|^SKYRL_NODE_IP=.*|SKYRL_NODE_IP=127.0.0.1|" -e "s|^SKYRL_WORKER_BIND=.*|SKYRL_WORKER_BIND=127.0.0.1|" \
  -e "s|^SKYRL_WORKER_PORT=.*|SKYRL_WORKER_PORT=0|" "$units/skyrl.env" >"$work/skyrl.env"
mkdir -p "$work/credentials" "$work/logs"
od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$work/credentials/token"
exec_words() {  # prints the unit's ExecStart as NUL-separated words, expanded
  local unit=$1 word var value
  local -a words
  read -r -a words <<<"$(sed -n '/^ExecStart=/,/[^\\]$/p' "$units/$unit" | sed 's/^ExecStart=//; s/\\$//' | tr '\n' ' ')"
  for word in "${words[@]}"; do
    word=${word//%d/$work/credentials}
    word=${word//\/var\/log\/skyrl/$work/logs}
    word=${word//\/opt\/skyrl\/bin\//$bin/}
    while [[ $word =~ \$\{([A-Z_]+)\} ]]; do
      var=${BASH_REMATCH[1]}
      grep -q "^$var=" "$work/skyrl.env" || fail "$unit: \${$var} is not in skyrl.env"
      value=$(sed -n "s/^$var=//p" "$work/skyrl.env")
      word=${word//"\${$var}"/$value}
    done
    printf '%s\0' "$word"
  done
}
mapfile -d '' head_cmd < <(exec_words skyrl-head.service)
mapfile -d '' worker_cmd < <(exec_words skyrl-worker.service)
pids=()
stop_daemons() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap 'stop_daemons; rm -rf "$work"' EXIT
"${head_cmd[@]}" >"$work/head.log" 2>&1 &
pids+=($!)
"${worker_cmd[@]}" >"$work/worker.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  grep -q "registered with head" "$work/worker.log" && break
  kill -0 "${pids[1]}" 2>/dev/null || fail "skyrl-worker.service's command exited: $(cat "$work/worker.log")"
  sleep 0.1
done
grep -q "registered with head 127.0.0.1:$head_port" "$work/worker.log" ||
  fail "the worker did not register: head: $(cat "$work/head.log") worker: $(cat "$work/worker.log")"
stop_daemons
echo "ok   the units' command lines start a head and a worker that registers"

# The check bites: a misspelt directive and an unknown flag are caught.
sed 's/^ProtectSystem=strict/ProtectSystm=strict/' "$work/skyrl-head.service" >"$work/bad-key.service"
out=$(cd "$work" && systemd-analyze verify bad-key.service 2>&1 || true)
grep -q "Unknown key 'ProtectSystm'" <<<"$out" || fail "verify did not flag a misspelt directive: $out"
grep -q -- "--no-such-flag\b" <<<"$("$bin/skyrl-head" --help)" && fail "skyrl-head --help lists --no-such-flag"
echo "PASS: systemd units"
