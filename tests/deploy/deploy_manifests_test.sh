#!/usr/bin/env bash
# ctest deploy_manifests: renders every kustomize overlay of deploy/k8s and the example job,
# and validates each rendered object (tests/deploy/k8s_validate.mjs: kubernetes-models schemas,
# API-server rules a schema misses, SkyRL's contract), then proves the validator bites on the
# fixtures in tests/deploy/reject/. Offline after the first run: kubernetes-models is installed
# with npm once into the build folder and reused.
# With MODE "pods" (ctest deploy_pods_local) it instead runs the cpu-dev overlay's Redis, head and
# worker containers as local processes with their rendered command lines and probes
# (tests/deploy/pods_local.mjs).
# Usage: deploy_manifests_test.sh SOURCE_DIR BUILD_DIR [validate|pods]
# Exit 77 (ctest SKIP) only when kubectl (with kustomize v4+) or npm/node is missing.
set -euo pipefail
src=$1
build=$2
mode=${3:-validate}
bin="${SKYRL_BIN_DIR:-$build/bin}"
skip() {
  echo "SKIP: $*"
  exit 77
}
fail() {
  echo "FAIL: $*"
  exit 1
}

command -v node >/dev/null 2>&1 || skip "node is not installed (scripts/install-deps installs nodejs and npm)"
command -v npm >/dev/null 2>&1 || skip "npm is not installed (scripts/install-deps installs nodejs and npm)"
# A standalone kustomize is used when present, else kubectl's built-in one.
if command -v kustomize >/dev/null 2>&1; then
  render=(kustomize build)
elif command -v kubectl >/dev/null 2>&1; then
  # kubectl 1.21+ prints its kustomize version; older ones bundle kustomize v2.0.3, which
  # cannot render these kustomizations (no `patches`, broken JSON-patch removes).
  kv=$(kubectl version --client -o json 2>/dev/null | sed -n 's/.*"kustomizeVersion": *"v\{0,1\}\([0-9]*\).*/\1/p')
  if [[ -z $kv || $kv -lt 4 ]]; then
    version=$(kubectl version --client -o json 2>/dev/null | sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p')
    skip "kubectl ${version:-(unknown version)} bundles a kustomize older than v4;" \
      "install kubectl 1.21+ or kustomize v4+ (docs/deploy.md)"
  fi
  render=(kubectl kustomize)
else
  skip "neither kubectl nor kustomize is installed (docs/deploy.md says how to get kubectl)"
fi

# kubernetes-models (and yaml, to read multi-document YAML) in the build folder, installed once.
models="$build/k8s-validate"
want_models=5.1.0 want_yaml=2.9.1
have() { sed -n 's/^  "version": "\(.*\)",$/\1/p' "$models/node_modules/$1/package.json" 2>/dev/null; }
if [[ $(have kubernetes-models) != "$want_models" || $(have yaml) != "$want_yaml" ]]; then
  echo "installing kubernetes-models@$want_models yaml@$want_yaml into $models (once)"
  mkdir -p "$models"
  npm install --prefix "$models" --no-audit --no-fund --prefer-offline --loglevel=error \
    "kubernetes-models@$want_models" "yaml@$want_yaml" ||
    fail "npm install kubernetes-models failed (it needs the npm registry once, then its cache)"
fi

work=$(mktemp -d "$build/deploy-test.XXXXXX")
cleanup() {
  # Daemons pods_local.mjs started, should it have been killed before stopping them.
  if [[ -f $work/pods/pids ]]; then
    while read -r pid; do kill -9 "$pid" 2>/dev/null || true; done <"$work/pods/pids"
  fi
  rm -rf "$work"
}
trap cleanup EXIT
# Render a copy, so the secrets the overlays need are generated here, never in the checkout.
cp -r "$src/deploy/k8s" "$work/k8s"
rm -rf "$work"/k8s/overlays/*/secrets
for overlay in gpu cpu-dev; do
  # Without generated secrets an overlay must not render: nobody deploys a known token.
  if "${render[@]}" "$work/k8s/overlays/$overlay" >"$work/$overlay.out" 2>&1; then
    fail "overlay $overlay rendered without secrets/token; it must refuse"
  fi
  grep -q "secrets/" "$work/$overlay.out" ||
    fail "overlay $overlay without secrets failed for another reason: $(head -3 "$work/$overlay.out")"
  "$work/k8s/make-secrets" "$work/k8s/overlays/$overlay" >/dev/null
  "${render[@]}" "$work/k8s/overlays/$overlay" >"$work/$overlay.yaml" 2>"$work/$overlay.err" ||
    fail "rendering overlay $overlay: $(cat "$work/$overlay.err")"
  if grep -v '^# Warning' "$work/$overlay.err" | grep -q .; then
    fail "rendering overlay $overlay printed: $(cat "$work/$overlay.err")"
  fi
  # The rendered Secret carries the generated token, byte for byte.
  token=$(cat "$work/k8s/overlays/$overlay/secrets/token")
  grep -A3 '^  token:' "$work/$overlay.yaml" | tr -d ' \n|' | grep -q "token:$(printf %s "$token" | base64 -w0)" ||
    fail "overlay $overlay: Secret skyrl-token does not hold secrets/token"
done
if [[ $mode == pods ]]; then
  mkdir -p "$work/pods"
  node "$src/tests/deploy/pods_local.mjs" --models "$models" --bin-dir "$bin" --render "$work/cpu-dev.yaml" \
    --gpu-render "$work/gpu.yaml" --work "$work/pods" || fail "see the lines above"
  echo "PASS: the cpu-dev overlay's Redis, head and worker run from their rendered command lines"
  exit 0
fi
"${render[@]}" "$work/k8s/examples/job-submit" >"$work/job.yaml" 2>"$work/job.err" ||
  fail "rendering examples/job-submit: $(cat "$work/job.err")"
# The gpu overlay with the Prometheus Operator's ServiceMonitor (its secrets are gpu's).
"${render[@]}" "$work/k8s/overlays/gpu-monitoring" >"$work/gpu-monitoring.yaml" 2>"$work/gpu-monitoring.err" ||
  fail "rendering overlay gpu-monitoring: $(cat "$work/gpu-monitoring.err")"
grep -q "kind: ServiceMonitor" "$work/gpu-monitoring.yaml" || fail "overlay gpu-monitoring has no ServiceMonitor"

validate=(node "$src/tests/deploy/k8s_validate.mjs" --models "$models" --bin-dir "$bin")
status=0
"${validate[@]}" --render "gpu:gpu-cluster:$work/gpu.yaml" --render "cpu-dev:cpu-cluster:$work/cpu-dev.yaml" \
  --render "gpu-monitoring:gpu-cluster:$work/gpu-monitoring.yaml" || status=1
# The example job mounts the cluster's Secret, which an overlay creates.
"${validate[@]}" --external-secret skyrl-token --render "job-submit:job:$work/job.yaml" || status=1
rejects=()
for f in "$src"/tests/deploy/reject/*.yaml; do rejects+=(--expect-reject "$f"); done
"${validate[@]}" "${rejects[@]}" || status=1
((status == 0)) || fail "see the lines above"
echo "PASS: overlays gpu, gpu-monitoring and cpu-dev and the example job render and validate;" \
  "$((${#rejects[@]} / 2)) bad manifests rejected"
