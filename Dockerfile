# The operator image: a static binary on distroless, running as a non-root user.
# Build with `make docker-build` on a machine with a container engine.
FROM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=0.0.0-dev
ARG GIT_COMMIT=unknown
WORKDIR /workspace
# Dependencies first: this layer is reused until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY controllers/ controllers/
COPY internal/ internal/
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} go build -trimpath \
    -ldflags "-s -w -X github.com/dolphin-operator/dolphin/internal/version.Version=${VERSION} -X github.com/dolphin-operator/dolphin/internal/version.GitCommit=${GIT_COMMIT}" \
    -o manager ./cmd/manager

FROM gcr.io/distroless/static:nonroot
LABEL org.opencontainers.image.title="Dolphin" \
      org.opencontainers.image.description="A MySQL operator for Kubernetes" \
      org.opencontainers.image.source="https://github.com/dolphin-operator/dolphin" \
      org.opencontainers.image.licenses="Apache-2.0"
WORKDIR /
COPY --from=builder /workspace/manager .
USER 65532:65532
ENTRYPOINT ["/manager"]
