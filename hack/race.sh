#!/usr/bin/env bash
# Runs the tests hack/race-tests lists, in PACKAGEs, with the race
# detector: `make test` runs every test once without it, then these again
# with it. A listed name found in none of the packages is an error (a test
# renamed or removed must leave the list too).
#
#   hack/race.sh PACKAGE...      (GOTEST_FLAGS: more go test flags)
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -gt 0 ]] || { echo "race: no package" >&2; exit 1; }
mapfile -t names < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' hack/race-tests | grep -v '^$')
dirs=$(${GO:-go} list -f '{{.Dir}}' "$@")
for n in "${names[@]}"; do
  # shellcheck disable=SC2086
  if ! grep -q "^func $n(t \*testing.T)" $(for d in $dirs; do ls "$d"/*_test.go; done); then
    echo "race: hack/race-tests names $n, which no test of $* is" >&2
    exit 1
  fi
done
run="^($(IFS='|'; echo "${names[*]}"))\$"
# shellcheck disable=SC2086
${GO:-go} test -race ${GOTEST_FLAGS:-} -run "$run" "$@"
