#!/usr/bin/env bash
# Runs tests of one package with RECOND_UPDATE_FIXTURES=1, so that they make
# again, with the real tools, the fixtures they read from the package's
# testdata/ (internal/testenv/tools/fixtures.go: what sops, cosign and helm made).
# A testdata/*/generate.sh calls it; `make fixtures` runs every one of those.
#
#   hack/fixture-tests.sh PACKAGE_DIR TEST...
set -euo pipefail
dir=${1:?package dir}
shift
if [[ $# -eq 0 ]]; then
  echo "fixture-tests: no test named for $dir" >&2
  exit 1
fi
names=$(IFS='|'; echo "$*")
cd "$dir"
echo "fixtures of $(pwd): $*" >&2
RECOND_UPDATE_FIXTURES=1 GOTOOLCHAIN=${GOTOOLCHAIN:-go1.27.3} go test -count=1 -timeout 30m -run "^($names)\$" .
