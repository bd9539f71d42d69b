# syntax=docker/dockerfile:1
#
# The gateway image: gatewayd (the node), gatewayctl (the operator's CLI, and
# the container's health check) and, once it is built, acquirerd (the sandbox
# acquirer host). See docs/operations.md, "Docker".
#
#   docker build -t paygate/gateway .
#
# Stage 1 builds static binaries (CGO_ENABLED=0: no libc needed at run time);
# stage 2 is a small image with a shell (busybox) for deploy/compose.yaml's
# join step, running as an unprivileged user.

FROM golang:1.26-bookworm AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false
# Dependencies first: a change to the source does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN mkdir -p /out \
 && go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/gatewayd ./cmd/gatewayctl \
 && if [ -d cmd/acquirerd ]; then go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/acquirerd; fi

FROM busybox:1.37-musl
# Notifications go to merchants' https callback URLs: the system's CA roots.
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/ /usr/local/bin/
# An unprivileged user owns the data directory and nothing else.
RUN addgroup -S -g 10001 gateway \
 && adduser -S -D -H -u 10001 -G gateway -h /var/lib/gateway gateway \
 && mkdir -p /var/lib/gateway \
 && chown gateway:gateway /var/lib/gateway \
 && chmod 0700 /var/lib/gateway
USER 10001:10001
WORKDIR /var/lib/gateway
# Flags as environment (contract section 10: every flag is also GATEWAY_<NAME>).
# The HTTP listener takes every interface inside the container; give
# --advertise-http-addr (GATEWAY_ADVERTISE_HTTP_ADDR) and --raft-addr names
# the other nodes reach this one by.
ENV GATEWAY_HTTP_ADDR=0.0.0.0:8080 \
    GATEWAY_DATA_DIR=/var/lib/gateway
VOLUME ["/var/lib/gateway"]
# 8080: merchant API, form, admin, health, metrics. 7000: cluster links (Raft).
EXPOSE 8080 7000
# No curl in the image: gatewayctl asks /readyz (leader known, log applied).
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["/usr/local/bin/gatewayctl", "ready", "--quiet"]
# SIGTERM drains in-flight requests and exits 0 (contract section 10).
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/gatewayd"]
