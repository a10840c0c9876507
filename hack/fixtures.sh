#!/usr/bin/env bash
# Makes every fixture the real tools made once again: runs each
# testdata/*/generate.sh of the repository (third_party/ excluded), in path
# order, and stops at the first that fails. `make fixtures` builds and
# installs the tools first and exports where they are (HELM_BIN, SOPS_BIN,
# COSIGN_BIN, KUBEBUILDER_ASSETS; age-keygen and docker-registry on PATH).
# Review the diff before committing it: a fixture that changes for no
# reason is a tool that changed.
#
#   hack/fixtures.sh [GENERATE_SH...]
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=${GOTOOLCHAIN:-go1.27.3}
scripts=("$@")
if [[ ${#scripts[@]} -eq 0 ]]; then
  mapfile -t scripts < <(find . -path ./third_party -prune -o -path '*/testdata/*' -name generate.sh -print | sort)
fi
for s in "${scripts[@]}"; do
  start=$(date +%s)
  echo "== $s" >&2
  "$s"
  echo "== $s: $(( $(date +%s) - start ))s" >&2
done
