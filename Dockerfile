# The broker's container image: a static binary on distroless, run as a
# non-root user, the store on the /data volume. docs/deploy.md says how to
# build and run it.
#
#   docker build -t rmq-broker .
#   docker run -d -p 127.0.0.1:9876:9876 -p 127.0.0.1:10911:10911 \
#     -v rmq-data:/data rmq-broker --config /etc/rmq/broker.yaml --insecure

# The Go version of go.mod.
ARG GO_VERSION=1.26

FROM docker.io/library/golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
# The plugin SDK is a module of its own that go.mod replaces with ./sdk, and
# raft one that it replaces with ./third_party/raft.
COPY sdk/go.mod sdk/
COPY third_party/raft/go.mod third_party/raft/
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/broker ./cmd/broker \
 && /out/broker config defaults > /dev/null \
 && mkdir -p /out/data

# distroless/static has no shell and no package manager; its nonroot user
# is 65532.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/broker /usr/local/bin/broker
COPY deploy/container.yaml /etc/rmq/broker.yaml
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
VOLUME /data
# name server, broker (RocketMQ 4.x clients), gRPC (5.x clients), HTTP
# (/metrics, /healthz, /readyz, console)
EXPOSE 9876 10911 10909 8081 8080
# /readyz: the store recovered, the plugins loaded, a name server reached.
# A large store can take a while to recover: hence the start period.
HEALTHCHECK --interval=10s --timeout=5s --start-period=2m --retries=3 \
  CMD ["/usr/local/bin/broker", "healthcheck", "--addr", "127.0.0.1:8080", "--path", "/readyz"]
ENTRYPOINT ["/usr/local/bin/broker"]
# Every port listens on the container's addresses, which the broker
# refuses with access control off unless told --insecure: add acl: to a
# config file of your own, or --insecure on a network only you reach.
CMD ["--config", "/etc/rmq/broker.yaml"]
