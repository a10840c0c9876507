#!/usr/bin/env bash
# Scans recond for known vulnerabilities that its code can reach, offline.
#
# govulncheck (tools/govulncheck) reads a vulnerability database built from the
# golang.org/x/vulndb module that tools/vulndb/go.mod pins: both are built once
# into $TOOLS_DIR (the module proxy may be used for that), and the scans run
# with the module proxy off and, where unshare(1) can make one, in a network
# namespace of their own, so they cannot reach any network. Before recond, a
# module known to be vulnerable is scanned and must be reported: a broken
# database or scanner cannot pass for a clean result.
#
# Exits 3 when a vulnerability of a module is reachable from recond's code,
# another non-zero code on any other failure. A reachable vulnerability of the
# standard library belongs to the Go toolchain that builds recond
# (GOTOOLCHAIN, go1.27.3, fetched through the module proxy): it is listed,
# with the Go release that fixes it, and fails the scan too (VULNCHECK_STDLIB
# defaults to fail; VULNCHECK_STDLIB=warn only lists them).
#
#   hack/vulncheck.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=go1.27.3
tools=${TOOLS_DIR:-$HOME/.cache/recond}
vuln_version=$(awk '$1 == "golang.org/x/vuln" {print substr($2, 2)}' tools/govulncheck/go.mod)
db_version=$(awk '$1 == "golang.org/x/vulndb" {print substr($2, 2)}' tools/vulndb/go.mod)
# govulncheck type-checks recond's standard library with its own go/types:
# it is built with the toolchain that builds recond, which names its cache.
govulncheck=$tools/govulncheck-$vuln_version-$GOTOOLCHAIN/govulncheck
db=$tools/vulndb-$db_version

TOOL_GOTOOLCHAIN=$GOTOOLCHAIN hack/build-tool.sh tools/govulncheck golang.org/x/vuln/cmd/govulncheck "$govulncheck"
if [[ ! -f $db/index/db.json ]]; then
	echo "writing the vulnerability database into $db (first time only)" >&2
	(cd tools/vulndb && GOFLAGS=-mod=readonly go test -count=1 . >&2 && GOFLAGS=-mod=readonly go run . -out "$db" >&2)
fi
modified=$(sed -n 's/.*"modified":"\([^"]*\)".*/\1/p' "$db/index/db.json")
age=$(( ($(date +%s) - $(date -d "$modified" +%s)) / 86400 ))
echo "vulnerability database: golang.org/x/vulndb@v$db_version, modified $modified ($age days ago)"

# offline runs a command with no module proxy and, if possible, no network.
offline() {
	local net=(unshare -rn)
	"${net[@]}" true 2>/dev/null || net=()
	GOPROXY=off GOFLAGS=-mod=readonly "${net[@]}" "$@"
}

# scan DIR runs govulncheck over DIR's module, whose sources are fetched first.
scan() {
	(cd "$1" && GOFLAGS=-mod=readonly go mod download && offline "$govulncheck" -db "file://$db" ./...)
}

# A scan that cannot fail proves nothing: this module calls language.Parse of
# golang.org/x/text v0.3.5 (GO-2021-0113), and must be reported.
want=GO-2021-0113
rc=0
out=$(scan tools/vulndb/testdata/vulnerable 2>&1) || rc=$?
if [[ $rc -ne 3 || $out != *"Vulnerability #1: $want"* ]]; then
	echo "$out"
	echo "vulncheck: the scan of tools/vulndb/testdata/vulnerable exited $rc without reporting $want; it must exit 3 and report it" >&2
	exit 1
fi
echo "vulncheck: the known-vulnerable module is reported ($want), as it must be"

# The filter that reads the scan (tools/vulndb/cmd/findings), tested first.
json=$(mktemp)
findings=$(mktemp)
trap 'rm -f "$json" "$findings"' EXIT
(cd tools/vulndb && GOFLAGS=-mod=readonly go test ./cmd/findings >/dev/null && GOFLAGS=-mod=readonly go build -o "$findings" ./cmd/findings)
start=$(date +%s)
(GOFLAGS=-mod=readonly go mod download && offline "$govulncheck" -db "file://$db" -format json ./... >"$json")
rc=0
"$findings" -stdlib="${VULNCHECK_STDLIB:-fail}" <"$json" || rc=$?
echo "vulncheck: recond scanned in $(( $(date +%s) - start ))s, exit $rc"
exit "$rc"
