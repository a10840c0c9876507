#!/usr/bin/env bash
# Runs every Go fuzz target of the module, one after the other, each for
# FUZZTIME (default 10s), and stops at the first finding.
#
#   hack/fuzz.sh [FUZZTIME]
#
# Targets are the `func Fuzz...` of the module's *_test.go files (third_party/
# and nested modules excluded). Each runs as
#   go test -short -run '^$' -fuzz '^Name$' -fuzztime FUZZTIME ./pkg
# -short keeps packages whose TestMain starts a control plane from starting
# one: fuzz targets are pure. FUZZ_PARALLEL sets the workers (default 2).
# On a finding go writes the failing input to pkg/testdata/fuzz/Name/; the
# script names the file. Fix the bug, then keep the file: it becomes a seed
# that every `go test` runs.
set -euo pipefail

fuzztime=${1:-10s}
export GOTOOLCHAIN=${GOTOOLCHAIN:-go1.27.3}
parallel=${FUZZ_PARALLEL:-2}
cd "$(dirname "$0")/.."
root=$(pwd)

# pkg dir <TAB> target, in package then file order.
targets=()
while IFS= read -r dir; do
  rel=${dir#"$root"/}
  [[ $dir == "$root" ]] && rel=.
  [[ $rel == third_party || $rel == third_party/* ]] && continue
  for file in "$dir"/*_test.go; do
    [[ -f $file ]] || continue
    while IFS= read -r name; do
      targets+=("$rel"$'\t'"$name")
    done < <(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file")
  done
done < <(go list -f '{{.Dir}}' ./...)

if [[ ${#targets[@]} -eq 0 ]]; then
  echo "fuzz: no targets found" >&2
  exit 1
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
total_start=$(date +%s)
for t in "${targets[@]}"; do
  rel=${t%%$'\t'*} name=${t#*$'\t'}
  corpus="$rel/testdata/fuzz/$name"
  before=$(ls "$corpus" 2>/dev/null | sort || true)
  start=$(date +%s)
  if go test -short -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" -parallel "$parallel" "./$rel" >"$log" 2>&1; then
    execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1 | cut -d' ' -f2 || true)
    secs=$(( $(date +%s) - start ))
    printf 'ok    %-24s ./%-20s %4ss  %s execs\n' "$name" "$rel" "$secs" "${execs:-?}"
    continue
  fi
  printf 'FAIL  %-24s ./%s\n' "$name" "$rel"
  cat "$log"
  after=$(ls "$corpus" 2>/dev/null | sort || true)
  found=$(comm -13 <(echo "$before") <(echo "$after") | head -1)
  if [[ -n $found ]]; then
    echo "fuzz: go wrote the failing input to $corpus/$found" >&2
    echo "fuzz: reproduce with: go test -short -run '^$name/$found\$' ./$rel" >&2
    echo "fuzz: fix the bug, then keep the file as a seed (never commit it while it fails)" >&2
  else
    echo "fuzz: $name failed without a new input (a failing seed or a build error); see above" >&2
  fi
  exit 1
done
echo "fuzz: ${#targets[@]} targets, ${fuzztime} each, $(( $(date +%s) - total_start ))s in all"
