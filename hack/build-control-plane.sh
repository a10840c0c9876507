#!/usr/bin/env bash
# Builds kube-apiserver and etcd from the Go module proxy into a versioned
# directory, once. Later calls find the binaries and return at once.
#
#   hack/build-control-plane.sh DIR
#
# DIR receives kube-apiserver and etcd (the layout envtest's
# KUBEBUILDER_ASSETS expects). Versions come from the environment:
# K8S_VERSION (default 1.37.2) and ETCD_VERSION (default 3.7.3).
set -euo pipefail

dir=${1:?usage: build-control-plane.sh DIR}
k8s=${K8S_VERSION:-1.37.2}
etcd=${ETCD_VERSION:-3.7.3}
staging=v0.${k8s#1.}

if [[ -x "$dir/kube-apiserver" && -x "$dir/etcd" ]]; then
  exit 0
fi
mkdir -p "$dir"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
start=$(date +%s)

if [[ ! -x "$dir/kube-apiserver" ]]; then
  echo "building kube-apiserver v$k8s (first time only; several minutes)" >&2
  mkdir -p "$work/k8s" && cd "$work/k8s"
  go mod init recond.local/kube-apiserver >/dev/null 2>&1
  go mod edit -require="k8s.io/kubernetes@v$k8s"
  modfile=$(go mod download -json "k8s.io/kubernetes@v$k8s" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
  # Every staging module kubernetes replaces with ./staging/src/... gets the
  # published version instead.
  grep -E '^[[:space:]]*k8s\.io/[^ ]+ => \./staging/' "$modfile" | awk '{print $1}' | sort -u |
    while read -r m; do go mod edit -replace="$m=$m@$staging"; done
  cat >tools.go <<GO
//go:build tools

package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
GO
  go mod tidy >/dev/null 2>&1 || go mod tidy
  v=k8s.io/component-base/version
  go build -trimpath -o "$dir/kube-apiserver.tmp" \
    -ldflags "-s -w -X $v.gitVersion=v$k8s -X $v.gitMajor=${k8s%%.*} -X $v.gitMinor=$(echo "$k8s" | cut -d. -f2) -X $v.gitTreeState=clean" \
    k8s.io/kubernetes/cmd/kube-apiserver
  mv "$dir/kube-apiserver.tmp" "$dir/kube-apiserver"
fi

if [[ ! -x "$dir/etcd" ]]; then
  echo "building etcd v$etcd (first time only)" >&2
  mkdir -p "$work/etcd" && cd "$work/etcd"
  go mod init recond.local/etcd >/dev/null 2>&1
  go mod edit -require="go.etcd.io/etcd/server/v3@v$etcd"
  cat >tools.go <<GO
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3"
GO
  go mod tidy >/dev/null 2>&1 || go mod tidy
  go build -trimpath -ldflags "-s -w" -o "$dir/etcd.tmp" go.etcd.io/etcd/server/v3
  mv "$dir/etcd.tmp" "$dir/etcd"
fi
echo "control plane built in $(( $(date +%s) - start ))s: $dir" >&2
