#!/usr/bin/env bash
# Makes again, with the real sops ($SOPS_BIN, which make fixtures builds from
# tools/sops) and keys made by age-keygen (Debian's age), what sops made for
# each test of one package that has a directory in its testdata/sops
# (testenv.SOPS: its keys, the files it encrypted, what it decrypted:
# calls.json and one file a call). A test new to sops is named as an
# argument. Each package's testdata/sops/generate.sh calls it.
#
#   SOPS_BIN=... hack/sops-fixtures.sh PACKAGE/testdata/sops [TEST...]
set -euo pipefail
: "${SOPS_BIN:?SOPS_BIN names the sops binary (make fixtures builds it)}"
here=$(cd "${1:?testdata/sops dir}" && pwd)
shift
tests=("$@")
for d in "$here"/*/; do
  [[ -d $d ]] && tests+=("$(basename "$d")")
done
exec "$(dirname "$0")/fixture-tests.sh" "$here/../.." "${tests[@]}"
