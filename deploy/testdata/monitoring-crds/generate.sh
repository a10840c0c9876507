#!/usr/bin/env bash
# Generates the monitoring.coreos.com CRDs (ServiceMonitor, PodMonitor,
# PrometheusRule) that the deploy tests install here, with controller-gen
# from the Prometheus Operator's Go types at the version tools/crds/go.mod
# pins (deploy/crds.sh).
#
#   deploy/testdata/monitoring-crds/generate.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../../crds.sh" "$here"
