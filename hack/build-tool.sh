#!/usr/bin/env bash
# Builds a test tool from its own module under tools/ (its go.mod and go.sum
# pin the version), once: a later call finds the binary and returns.
#
# It builds with the installed Go unless TOOL_GOTOOLCHAIN names another
# (a tool that reads recond's sources must be built with recond's toolchain),
# with the build tags TOOL_TAGS names (comma-separated) if any.
#
#   hack/build-tool.sh MODULE_DIR PACKAGE OUTPUT
set -euo pipefail
moddir=${1:?module dir} pkg=${2:?package} out=${3:?output}
[[ -x "$out" ]] && exit 0
mkdir -p "$(dirname "$out")"
echo "building $pkg into $out (first time only; several minutes)" >&2
start=$(date +%s)
cd "$moddir"
GOTOOLCHAIN=${TOOL_GOTOOLCHAIN:-local} CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath -tags "${TOOL_TAGS:-}" -ldflags "-s -w" -o "$out.tmp" "$pkg"
mv "$out.tmp" "$out"
echo "built $(basename "$out") in $(( $(date +%s) - start ))s" >&2
