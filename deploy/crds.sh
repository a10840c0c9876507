#!/usr/bin/env bash
# Generates the CustomResourceDefinitions of the Prometheus Operator's
# ServiceMonitor, PodMonitor and PrometheusRule from their Go types (the
# module pinned in tools/crds/go.mod) with controller-gen (pinned there as a
# tool), once: a later call finds them and returns.
#
#   deploy/crds.sh OUTPUT_DIR
set -euo pipefail
out=${1:?output dir}
[[ -f "$out/.complete" ]] && exit 0
cd "$(dirname "$0")/../tools/crds"
echo "generating the monitoring.coreos.com CRDs into $out (first time only)" >&2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
GOTOOLCHAIN=local GOFLAGS=-mod=readonly go tool controller-gen \
  crd:crdVersions=v1,maxDescLen=0 \
  paths=github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1 \
  output:crd:dir="$tmp/all"
mkdir -p "$tmp/out"
for kind in servicemonitors podmonitors prometheusrules; do
  cp "$tmp/all/monitoring.coreos.com_$kind.yaml" "$tmp/out/"
done
touch "$tmp/out/.complete"
mkdir -p "$(dirname "$out")"
rm -rf "$out"
mv "$tmp/out" "$out"
ls "$out" >&2
