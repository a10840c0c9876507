# Targets for deploy/: included by the Makefile. TEST_DEPS lists what `make
# test` needs from here. docs/deploy.md describes them.

# The Prometheus Operator CRDs (ServiceMonitor, PodMonitor, PrometheusRule)
# that the deploy tests install before applying deploy/monitoring: generated
# with controller-gen from the monitoring API's Go types, whose version
# tools/crds/go.mod pins, into deploy/testdata/monitoring-crds, committed
# (`make crds` writes them again; `make fixtures` too).
MONITORING_VERSION := $(shell awk '{for (i = 1; i < NF; i++) if ($$i == "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring") print $$(i+1)}' tools/crds/go.mod)

# The image `make image` builds (when a Docker engine is reachable).
IMAGE  ?= recond:$(VERSION)
DOCKER ?= docker

.PHONY: crds manifests image deploy-generate

## crds: the monitoring.coreos.com CRDs ($(MONITORING_VERSION)), generated again into deploy/testdata/monitoring-crds
crds:
	@deploy/testdata/monitoring-crds/generate.sh

## manifests: every kustomization under deploy/ rendered into bin/manifests/<dir>.yaml
manifests:
	@rm -rf bin/manifests
	$(GO) run ./deploy/render -root deploy -out bin/manifests

## image: docker build (or, without a Docker engine, the image's static binary in bin/image)
image:
	@if $(DOCKER) info >/dev/null 2>&1; then \
		echo "$(DOCKER) build --build-arg VERSION=$(VERSION) -t $(IMAGE) ."; \
		$(DOCKER) build --build-arg VERSION=$(VERSION) -t $(IMAGE) . ; \
	else \
		echo "image: no Docker engine reachable ($(DOCKER) info failed): building the image's binaries with the Dockerfile's flags into bin/image/ instead"; \
		echo "CGO_ENABLED=0 GOOS=linux $(GO) build -tags $(BUILD_TAGS) -trimpath -ldflags \"-s -w -X main.version=$(VERSION)\" -o bin/image/ ./cmd/recond ./cmd/recond-render"; \
		mkdir -p bin/image && CGO_ENABLED=0 GOOS=linux $(GO) build -tags $(BUILD_TAGS) -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o bin/image/ ./cmd/recond ./cmd/recond-render && \
		$(GO) run ./deploy/checkstatic bin/image/recond bin/image/recond-render && bin/image/recond version && bin/image/recond-render version; \
	fi

# deploy/monitoring/dashboards.yaml, from the same source as dashboards/*.json
# (dashboards.Build), so that its order relative to dashboards/gen does not
# matter. A prerequisite of the Makefile's generate (and so of verify).
deploy-generate:
	$(GO) run ./deploy/gen

generate: deploy-generate
