# syntax=docker/dockerfile:1
#
# Nomos as a container image: one static binary that runs every Nomos role
# (`migrate`, `seed`, `bot`, `actuator`, `keygen`, ...). deploy/compose.yaml
# runs it; docs/install.md walks through the first start.
# This is the production build: without the nomosdev tag it links neither
# labsim nor the dev stack (docs/architecture.md, "The development build").
#
#   docker build -t nomos:local .
#
# `nomos version` in the image, and its OCI labels, carry VERSION and
# COMMIT; give them from the checkout, as make build does:
#
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) \
#     --build-arg COMMIT=$(git rev-parse HEAD) -t nomos:local .
#
# A release image holds the very binary `make release` put in dist/ and
# summed in dist/SHA256SUMS, rather than a second build of it:
#
#   make release VERSION=0.3.0
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     --build-arg NOMOS_BINARY=dist --build-arg VERSION=0.3.0 \
#     --build-arg COMMIT=$(git rev-parse HEAD) -t nomos:0.3.0 .
#
# The labels (OCI image annotations) say what the image is:
#   org.opencontainers.image.version   VERSION
#   org.opencontainers.image.revision  COMMIT, the source commit
#   org.opencontainers.image.source    the repository
# `docker inspect -f '{{json .Config.Labels}}' nomos:0.3.0` shows them.
#
# The build stage runs on the builder's own platform and cross-compiles, so
# `docker buildx build --platform linux/arm64` works without emulation.

# Where the binary comes from: `build` (compiled below) or `dist` (make
# release's output for the target architecture).
ARG NOMOS_BINARY=build

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
ARG COMMIT=
# goolm: pure-Go end-to-end encryption, so no libolm and no cgo.
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -tags goolm -buildvcs=false -trimpath \
      -ldflags "-s -w -buildid= -X main.version=${VERSION} -X main.commit=${COMMIT}" \
      -o /out/nomos ./cmd/nomos

FROM scratch AS dist
ARG TARGETARCH
ARG VERSION
COPY dist/nomos_${VERSION}_linux_${TARGETARCH} /out/nomos

FROM ${NOMOS_BINARY} AS binary

# Alpine rather than distroless: the health check needs an HTTP client
# (busybox wget), and an operator can `docker compose exec nomos-bot sh` to
# read a mounted file. The binary itself needs nothing from the image but
# the CA bundle Alpine ships.
FROM alpine:3.22
# A fixed uid, so the files in deploy/secrets/ can be owned by it
# (docs/install.md); not 65532, which every distroless image shares.
# postgresql17-client: the pg_dump `nomos migrate -backup` runs, of the
# major version of compose's postgres:17.
RUN apk add --no-cache postgresql17-client \
 && addgroup -S -g 10001 nomos \
 && adduser -S -D -H -u 10001 -G nomos -h /var/lib/nomos -s /sbin/nologin nomos \
 && install -d -o nomos -g nomos -m 0700 /var/lib/nomos
COPY --from=binary /out/nomos /usr/local/bin/nomos
ARG VERSION=dev
ARG COMMIT=
LABEL org.opencontainers.image.title="nomos" \
      org.opencontainers.image.description="Matrix-native chat-ops steward for Proxmox homelabs" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}" \
      org.opencontainers.image.source="https://github.com/nomoshq/nomos" \
      org.opencontainers.image.licenses="Apache-2.0"
USER 10001:10001
WORKDIR /var/lib/nomos
# The bot's /healthz on web.listen :8080 (deploy/compose.yaml sets it). The
# actuator and the one-shot roles have no listener: compose replaces this
# check for them, and `docker run` of those roles wants --no-healthcheck.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD wget -q -O /dev/null http://127.0.0.1:8080/healthz || exit 1
ENTRYPOINT ["/usr/local/bin/nomos"]
CMD ["version"]
