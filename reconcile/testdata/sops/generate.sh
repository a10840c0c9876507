#!/usr/bin/env bash
# Makes again, with the real sops, what sops made for each test of this
# package that has a directory here (hack/sops-fixtures.sh). A test new to
# sops is named as an argument.
#
#   SOPS_BIN=... testdata/sops/generate.sh [TEST...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$(git -C "$here" rev-parse --show-toplevel)/hack/sops-fixtures.sh" "$here" "$@"
