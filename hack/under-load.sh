#!/usr/bin/env bash
# Runs the packages whose tests wait on time (the webhook server, the fault
# matrix, the binary, the loop) RUNS times in a row while stress-ng keeps
# every core busy: a test that fails only because the machine is busy is a
# test of the machine. Installs Debian's stress-ng when missing.
#
#   hack/under-load.sh [RUNS] [PACKAGE...]     (default: 3 ./webhook ./faults ./cmd/recond ./reconcile)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
shift || true
pkgs=("$@")
[[ ${#pkgs[@]} -gt 0 ]] || pkgs=(./webhook ./faults ./cmd/recond ./reconcile)
hack/ensure-apt.sh stress-ng stress-ng
${GO:-go} test -count=1 -run XXX "${pkgs[@]}" >/dev/null # build first, unloaded
stress-ng --cpu "$(nproc)" --timeout 0 --quiet &
load=$!
trap 'kill $load 2>/dev/null || true' EXIT
for i in $(seq 1 "$runs"); do
  echo "under load, run $i of $runs: ${pkgs[*]}"
  ${GO:-go} test -count=1 ${GOTEST_FLAGS:--timeout 40m} "${pkgs[@]}"
done
