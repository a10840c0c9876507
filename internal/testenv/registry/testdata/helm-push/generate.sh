#!/usr/bin/env bash
# Packages and pushes, with the real helm ($HELM_BIN, which make fixtures
# builds from tools/helm), each chart the tests of this package push
# (Registry.PushChart), into a registry on loopback (Debian's
# docker-registry), and writes what helm pushed into NAME-VERSION/ here: an
# OCI image layout (oci/) and the digest of the chart's files.
#
#   HELM_BIN=... testdata/helm-push/generate.sh
set -euo pipefail
: "${HELM_BIN:?HELM_BIN names the helm binary (make fixtures builds it)}"
here=$(cd "$(dirname "$0")" && pwd)
exec "$(git -C "$here" rev-parse --show-toplevel)/hack/fixture-tests.sh" "$here/../.." TestRegistryPlain TestRegistryTLSBasic TestRegistryToken TestRegistryFront
