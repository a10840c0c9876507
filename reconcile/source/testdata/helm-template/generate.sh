#!/usr/bin/env bash
# Writes what `helm template` renders for each chart of ../charts (the
# corpus of TestHelmCorpus, reconcile/source/helm_corpus_test.go) into
# CHART.yaml here, with the helm CLI at the version recond links: $HELM_BIN,
# which `make fixtures` builds from tools/helm. The test's table says which
# values files each chart gets; each file's header names the command, the
# helm version and the SHA-256 of the chart and values files it read, which
# the test checks.
#
#   HELM_BIN=... testdata/helm-template/generate.sh
set -euo pipefail
: "${HELM_BIN:?HELM_BIN names the helm binary (make fixtures builds it)}"
here=$(cd "$(dirname "$0")" && pwd)
exec "$(git -C "$here" rev-parse --show-toplevel)/hack/fixture-tests.sh" "$here/../.." TestHelmCorpus
