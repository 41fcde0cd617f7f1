# syntax=docker/dockerfile:1
#
# Nomos as a container image: one static binary that runs every role
# (`migrate`, `seed`, `bot`, `actuator`, `keygen`, ...). deploy/compose.yaml
# runs it; docs/install.md walks through the first start.
# This is the production build: without the nomosdev tag it links neither
# labsim nor the dev stack (docs/architecture.md, "The development build").
#
#   docker build -t nomos:local .
#
# `nomos version` in the image prints VERSION and COMMIT; give them from the
# checkout, as make build does:
#
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) \
#     --build-arg COMMIT=$(git rev-parse HEAD) -t nomos:local .
#
# The build stage runs on the builder's own platform and cross-compiles, so
# `docker buildx build --platform linux/arm64` works without emulation.
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
      -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" \
      -o /out/nomos ./cmd/nomos

# Alpine rather than distroless: the health check needs an HTTP client
# (busybox wget), and an operator can `docker compose exec nomos-bot sh` to
# read a mounted file. The binary itself needs nothing from the image but
# the CA bundle Alpine ships.
FROM alpine:3.22
# A fixed uid, so the files in deploy/secrets/ can be owned by it
# (docs/install.md); not 65532, which every distroless image shares.
RUN addgroup -S -g 10001 nomos \
 && adduser -S -D -H -u 10001 -G nomos -h /var/lib/nomos -s /sbin/nologin nomos \
 && install -d -o nomos -g nomos -m 0700 /var/lib/nomos
COPY --from=build /out/nomos /usr/local/bin/nomos
USER 10001:10001
WORKDIR /var/lib/nomos
# The bot's /healthz on web.listen :8080 (deploy/compose.yaml sets it). The
# actuator and the one-shot roles have no listener: compose replaces this
# check for them, and `docker run` of those roles wants --no-healthcheck.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD wget -q -O /dev/null http://127.0.0.1:8080/healthz || exit 1
ENTRYPOINT ["/usr/local/bin/nomos"]
CMD ["version"]
