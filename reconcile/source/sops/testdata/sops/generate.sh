#!/usr/bin/env bash
# Makes again, with the real sops ($SOPS_BIN, which make fixtures builds from
# tools/sops) and keys made by age-keygen (Debian's age), what sops made for
# each test of this package that has a directory here (testenv.SOPS: its
# keys, the files it encrypted, what it decrypted: calls.json and one file a
# call). A test new to sops is named as an argument.
#
#   SOPS_BIN=... testdata/sops/generate.sh [TEST...]
set -euo pipefail
: "${SOPS_BIN:?SOPS_BIN names the sops binary (make fixtures builds it)}"
here=$(cd "$(dirname "$0")" && pwd)
tests=("$@")
for d in "$here"/*/; do
  [[ -d $d ]] && tests+=("$(basename "$d")")
done
exec "$(git -C "$here" rev-parse --show-toplevel)/hack/fixture-tests.sh" "$here/../.." "${tests[@]}"
