#!/usr/bin/env bash
# Signs, with the real cosign ($COSIGN_BIN, which make fixtures builds from
# tools/cosign) and keys it makes or imports, the artifacts TestCosignCLI pushes
# to a registry on loopback (Debian's docker-registry), and writes the
# repository as cosign left it (oci/, an OCI image layout), the public keys
# and cosign's version here. cosign runs sealed (testenv.Cosign): a request
# beyond the registry fails.
#
#   COSIGN_BIN=... testdata/cosign-cli/generate.sh
set -euo pipefail
: "${COSIGN_BIN:?COSIGN_BIN names the cosign binary (make fixtures builds it)}"
here=$(cd "$(dirname "$0")" && pwd)
exec "$(git -C "$here" rev-parse --show-toplevel)/hack/fixture-tests.sh" "$here/../.." TestCosignCLI
