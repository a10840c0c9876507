#!/usr/bin/env bash
# Generates the CustomResourceDefinitions of the Prometheus Operator's
# ServiceMonitor, PodMonitor and PrometheusRule from their Go types (the
# module pinned in tools/crds/go.mod) with controller-gen (pinned there as a
# tool) into OUTPUT_DIR, replacing the three files there:
# deploy/testdata/monitoring-crds, which the deploy tests read, is made with
# it (`make crds`, `make fixtures`).
#
#   deploy/crds.sh OUTPUT_DIR
set -euo pipefail
out=${1:?output dir}
out=$(mkdir -p "$out" && cd "$out" && pwd)
cd "$(dirname "$0")/../tools/crds"
echo "generating the monitoring.coreos.com CRDs into $out" >&2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
GOTOOLCHAIN=local GOFLAGS=-mod=readonly go tool controller-gen \
  crd:crdVersions=v1,maxDescLen=0 \
  paths=github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1 \
  output:crd:dir="$tmp/all"
for kind in servicemonitors podmonitors prometheusrules; do
  cp "$tmp/all/monitoring.coreos.com_$kind.yaml" "$out/"
done
ls "$out" >&2
