# syntax=docker/dockerfile:1
#
# recond's image: the static binaries (CGO_ENABLED=0, -trimpath, the version in
# -ldflags, as `make build`): recond and, beside it, its render binary
# recond-render (of the same build: recond checks it at start), on distroless/static (CA certificates for HTTPS
# Git and OTLP, /etc/passwd with nonroot, nothing else), as user 65532.
#
#   make image     (docker build --build-arg VERSION=$(git describe ...) -t recond:<version> .)

FROM --platform=$BUILDPLATFORM golang:1.27 AS build
ARG TARGETOS=linux
ARG TARGETARCH
ARG VERSION=dev
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-mod=readonly
COPY go.mod go.sum ./
# The sealed kustomize fork is a local replacement: its go.mod is part of
# the module graph.
COPY third_party/kustomize-api/go.mod third_party/kustomize-api/go.mod
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -tags grpcnotrace -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/ ./cmd/recond ./cmd/recond-render

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/recond /out/recond-render /usr/local/bin/
# The numeric UID, so that runAsNonRoot can verify it without /etc/passwd.
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/recond"]
CMD ["run"]
