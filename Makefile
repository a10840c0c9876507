# recond — `make demo` runs the loop against a local control plane and Git
# repository; `make test` runs the whole suite. Both build what they need.

K8S_VERSION  ?= 1.37.2
ETCD_VERSION ?= 3.7.3
# Tools built from source are cached per version, outside the work tree, so
# that every clone on a machine shares them.
TOOLS_DIR    ?= $(HOME)/.cache/recond
KUBEBUILDER_ASSETS ?= $(TOOLS_DIR)/k8s-$(K8S_VERSION)-etcd-$(ETCD_VERSION)
VERSION      ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
GO           ?= go
GOTEST_FLAGS ?= -count=1 -timeout 40m

export GOTOOLCHAIN := local
export KUBEBUILDER_ASSETS
export K8S_VERSION ETCD_VERSION

.PHONY: all build control-plane test test-short vet demo bench clean

all: build

## build: the recond binary, in bin/recond
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o bin/recond ./cmd/recond

## control-plane: kube-apiserver and etcd, built once into $(KUBEBUILDER_ASSETS)
control-plane:
	@hack/build-control-plane.sh $(KUBEBUILDER_ASSETS)

## vet: go vet and a gofmt check
vet:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

## test: vet, then every test against a real kube-apiserver, etcd and Git
test: control-plane vet
	$(GO) test $(GOTEST_FLAGS) ./...

## test-short: the quick tests only (no control plane)
test-short:
	$(GO) test -short -count=1 ./...

## bench: benchmarks (figures go to docs/performance.md)
bench: control-plane
	$(GO) test -run '^$$' -bench . -benchmem ./...

## demo: recond holding a namespace of a local control plane against a local repository
demo: build control-plane
	$(GO) run ./hack/demo -recond bin/recond -examples examples/demo-app

clean:
	rm -rf bin
