#!/bin/sh
# generate.sh regenerates the Go code of the apache.rocketmq.v2 protos with
# pinned generators (go generate runs it; protoc comes from the system,
# e.g. Debian's protobuf-compiler). With -check it regenerates into a
# temporary directory and fails if the committed code differs.
set -eu
cd "$(dirname "$0")"
PROTOC_GEN_GO=google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
PROTOC_GEN_GO_GRPC=google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
PKG=github.com/rmq-go/rmq/internal/rmqpb

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
GOBIN="$tmp/bin" go install "$PROTOC_GEN_GO"
GOBIN="$tmp/bin" go install "$PROTOC_GEN_GO_GRPC"
mkdir -p "$tmp/out"
M="Mapache/rocketmq/v2/definition.proto=$PKG,Mapache/rocketmq/v2/service.proto=$PKG"
protoc -I proto \
	--plugin=protoc-gen-go="$tmp/bin/protoc-gen-go" \
	--plugin=protoc-gen-go-grpc="$tmp/bin/protoc-gen-go-grpc" \
	--go_out="$tmp/out" --go_opt=paths=source_relative,"$M" \
	--go-grpc_out="$tmp/out" --go-grpc_opt=paths=source_relative,"$M" \
	apache/rocketmq/v2/definition.proto apache/rocketmq/v2/service.proto
# protoc strips the version of protoc it ran from nothing we pin: drop the
# line, so the check does not depend on the installed protoc.
for f in "$tmp"/out/apache/rocketmq/v2/*.go; do
	sed '/^\/\/ 	protoc  *v/d; /^\/\/ - protoc  *v/d' "$f" > "$tmp/out/$(basename "$f")"
done
if [ "${1:-}" = "-check" ]; then
	for f in "$tmp"/out/*.go; do
		cmp -s "$f" "$(basename "$f")" || { echo "generate.sh: $(basename "$f") is stale: run go generate ./internal/rmqpb" >&2; exit 1; }
	done
	exit 0
fi
cp "$tmp"/out/*.go .
