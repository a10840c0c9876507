# recond — `make demo` runs the loop against a local control plane and Git
# repository; `make test` runs the whole suite. Both build what they need.

K8S_VERSION  ?= 1.37.2
ETCD_VERSION ?= 3.7.3
# Tools built from source are cached per version, outside the work tree, so
# that every clone on a machine shares them.
TOOLS_DIR    ?= $(HOME)/.cache/recond
KUBEBUILDER_ASSETS ?= $(TOOLS_DIR)/k8s-$(K8S_VERSION)-etcd-$(ETCD_VERSION)
# Test tools built from their own modules under tools/ (kept out of go.mod);
# the version in each tools/<tool>/go.mod names the cache directory. `make
# test` builds Jaeger and promtool, which its tests run live; helm, sops and
# cosign made the fixtures under testdata/ once, and only `make fixtures`
# (and `make bench`) builds them.
JAEGER_VERSION := $(shell awk '$$1 == "github.com/jaegertracing/jaeger" {print substr($$2, 2)}' tools/jaeger/go.mod)
JAEGER_BIN   ?= $(TOOLS_DIR)/jaeger-$(JAEGER_VERSION)/jaeger
PROMTOOL_VERSION := $(shell awk '$$1 == "github.com/prometheus/prometheus" {print substr($$2, 2)}' tools/promtool/go.mod)
# promtool without the service discoveries it registers through
# prometheus/plugins (AWS, Azure, GCE...): Kubernetes', which promtool
# imports itself, is what the scrape config uses.
PROMTOOL_TAGS := remove_all_sd
PROMTOOL     ?= $(TOOLS_DIR)/promtool-$(PROMTOOL_VERSION)-$(PROMTOOL_TAGS)/promtool
HELM_VERSION := $(shell awk '$$1 == "helm.sh/helm/v4" {print substr($$2, 2)}' tools/helm/go.mod)
HELM_BIN     ?= $(TOOLS_DIR)/helm-$(HELM_VERSION)/helm
SOPS_VERSION := $(shell awk '$$1 == "github.com/getsops/sops/v3" {print substr($$2, 2)}' tools/sops/go.mod)
SOPS_BIN     ?= $(TOOLS_DIR)/sops-$(SOPS_VERSION)/sops
COSIGN_VERSION := $(shell awk '$$1 == "github.com/sigstore/cosign/v2" {print substr($$2, 2)}' tools/cosign/go.mod)
COSIGN_BIN   ?= $(TOOLS_DIR)/cosign-$(COSIGN_VERSION)/cosign
# grpcnotrace leaves out gRPC's golang.org/x/net/trace, whose html/template
# would switch off the linker's dead-method elimination in recond (the OTLP
# exporters link gRPC).
BUILD_TAGS   ?= grpcnotrace
VERSION      ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
GO           ?= go
GOTEST_FLAGS ?= -count=1 -timeout 40m

export GOTOOLCHAIN := go1.27.3
export BUILD_TAGS KUBEBUILDER_ASSETS JAEGER_BIN PROMTOOL HELM_BIN SOPS_BIN COSIGN_BIN

# Deployment manifests, image and their test inputs.
include deploy/deploy.mk
export K8S_VERSION ETCD_VERSION

.PHONY: all build control-plane tools fixture-tools fixtures prometheus chromium age registry screenshots generate verify test test-under-load test-short vet vulncheck fuzz fuzz-short soak demo bench clean

all: build

## build: the recond binary and its render binary, of one build, in bin/recond and bin/recond-render (recond finds
## the render binary beside itself)
build:
	@mkdir -p bin
	CGO_ENABLED=0 $(GO) build -tags $(BUILD_TAGS) -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o bin/ ./cmd/recond ./cmd/recond-render

## control-plane: kube-apiserver and etcd, built once into $(KUBEBUILDER_ASSETS)
control-plane:
	@hack/build-control-plane.sh $(KUBEBUILDER_ASSETS)

## tools: the tools the tests run live, built once into $(TOOLS_DIR): Jaeger (traces end to end) and promtool (rule
## tests)
tools:
	@hack/build-tool.sh tools/jaeger github.com/jaegertracing/jaeger/cmd/jaeger $(JAEGER_BIN)
	@TOOL_TAGS=$(PROMTOOL_TAGS) hack/build-tool.sh tools/promtool github.com/prometheus/prometheus/cmd/promtool $(PROMTOOL)

## fixture-tools: helm (the chart corpus, charts as pushed), sops (encrypted files) and cosign (signed OCI artifacts),
## built once into $(TOOLS_DIR): what makes the fixtures under testdata/
fixture-tools:
	@hack/build-tool.sh tools/helm helm.sh/helm/v4/cmd/helm $(HELM_BIN)
	@hack/build-tool.sh tools/sops github.com/getsops/sops/v3/cmd/sops $(SOPS_BIN)
	@hack/build-tool.sh tools/cosign github.com/sigstore/cosign/v2/cmd/cosign $(COSIGN_BIN)

## fixtures: what the real tools make once, made again into testdata/ (helm template's output, charts as helm pushed
## them, cosign's signatures, commits signed by git with gpg and ssh-keygen, SOPS-encrypted files and their keys, the
## monitoring CRDs): every testdata/*/generate.sh
fixtures: control-plane fixture-tools age registry
	@hack/fixtures.sh

## prometheus: a Prometheus server for the end-to-end alert test (Debian's package, if missing)
prometheus:
	@hack/ensure-apt.sh prometheus prometheus

## age: age-keygen, the keys of the SOPS tests' fixtures (Debian's package, if missing)
age:
	@hack/ensure-apt.sh age-keygen age

## chromium: a headless Chromium for the status page's browser test (Debian's package, if missing)
chromium:
	@hack/ensure-apt.sh chromium-headless-shell chromium-headless-shell

## registry: docker-registry (CNCF distribution 2.8), the real OCI registry the OCI source tests push to and pull
## from (Debian's package, if missing; its service is not left running)
registry:
	@hack/ensure-apt.sh docker-registry docker-registry

## screenshots: PNGs of the dashboards' main panels with real data, and of the status page, into docs/img
screenshots: control-plane prometheus chromium
	RECOND_SCREENSHOTS_DIR=$(CURDIR)/docs/img $(GO) test -count=1 -run TestDashboardScreenshots -v ./cmd/recond/ | grep -E 'png|^(ok|FAIL|---)'
	RECOND_SCREENSHOTS_DIR=$(CURDIR)/docs/img $(GO) test -count=1 -run TestBrowser -v ./status/ | grep -E 'png|^(ok|FAIL|---)'

## generate: the alert rules, the PrometheusRule and the dashboards, from Go
generate:
	$(GO) run ./alerts/gen
	$(GO) run ./dashboards/gen

## verify: generate, then fail if that changed a committed file
verify: generate
	@git diff --exit-code -- alerts deploy dashboards || (echo "generated files are stale: run make generate and commit"; exit 1)

## vet: go vet and a gofmt check
vet:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# The packages whose concurrent tests (hack/race-tests: the loop, waves,
# watches, render workers, `recond run`) run a second time with the race
# detector; every test runs once without it.
RACE_PKGS    := ./reconcile ./reconcile/heal ./reconcile/loop ./reconcile/wave ./reconcile/source ./reconcile/source/git ./cmd/recond
FUZZTIME     ?= 10s

## test: vet, the vulnerability scan, every test against a real kube-apiserver, etcd and Git, the fault matrix, the
## concurrent tests of the loop, sources and binary again with -race, then every fuzz target for $(FUZZTIME)
test: control-plane tools prometheus chromium registry $(TEST_DEPS) vet vulncheck
	$(GO) test $(GOTEST_FLAGS) ./...
	@GO=$(GO) GOTEST_FLAGS="$(GOTEST_FLAGS)" hack/race.sh $(RACE_PKGS)
	@hack/fuzz.sh $(FUZZTIME)

## vulncheck: govulncheck (golang.org/x/vuln) against an offline database built from golang.org/x/vulndb
vulncheck:
	@hack/vulncheck.sh

## fuzz: every fuzz target for FUZZTIME each (default here 5m; `make test` runs each for 10s)
fuzz: FUZZTIME = 5m
fuzz:
	@hack/fuzz.sh $(FUZZTIME)

## soak: recond holding 300 objects at a 1 s interval for 10 minutes (RECOND_SOAK_DURATION) with drift, webhooks
## and manual syncs; samples plotted into docs/img/soak.png
soak: control-plane
	RECOND_SOAK=1 RECOND_SOAK_DOCS=$(CURDIR)/docs $(GO) test -count=1 -timeout 30m -run '^TestSoak$$' -v ./faults/

## test-under-load: the webhook, fault-matrix, binary and loop packages 3 times in a row while stress-ng keeps
## every core busy (RUNS=, PKGS= to choose)
test-under-load: control-plane tools prometheus chromium registry $(TEST_DEPS)
	@hack/under-load.sh $(or $(RUNS),3) $(PKGS)

## test-short: the quick tests only (no control plane)
test-short:
	$(GO) test -short -count=1 ./...

## bench: recond (the library in both observe modes, and the binary) against Flux's engine on one API server,
## N=90..3000, then a fleet of 100 recond processes (list, watch, watch with the claimed Lease) and Flux's engine
## holding the same 100 namespaces in one process (about 35 minutes; tables into docs/performance.md, plot into
## docs/img/bench-converged.png; RECOND_BENCH_N=90,300 for fewer sizes, RECOND_BENCH_FLEET=0 for no fleet), and what
## decrypting 100 SOPS-encrypted Secrets costs, an OCI artifact of 1,000 objects against Git, and heal latency on the binary
bench: control-plane tools fixture-tools age registry
	RECOND_BENCH=1 RECOND_BENCH_DOCS=$(CURDIR)/docs $(GO) test -count=1 -timeout 40m -run '^(TestCompare|TestFleet|TestCharts|TestSOPS|TestOCI|TestHealBinary)$$' -v ./bench/

## demo: recond holding a namespace of a local control plane against a local repository (and an OCI artifact in a
## registry on loopback)
demo: build control-plane registry
	$(GO) run ./hack/demo -recond bin/recond -examples examples/demo-app -chart examples/demo-chart -sops examples/demo-sops

clean:
	rm -rf bin
