#!/bin/sh
# Builds the OCI images with this machine's Docker: static binaries (no cgo), each FROM
# scratch with its CA certificates, passwd/group lines for the non-root user 10001, a
# /data owned by it (the working directory) and a /tmp anyone may write (mode 1777, for
# os.TempDir and SQLite's temporary files). Nothing is pulled. `make images` runs it.
#
#   deploy/docker/build.sh [collector] [controlplane] [nats]   (default: collector controlplane)
#
# Tags <name>:$VERSION and <name>:dev; VERSION defaults to `git describe --tags --always
# --dirty`, which the control plane also reports (--version, its startup log). The
# collector's --version is dist.version of builder-config.yaml: ocb writes it into the
# generated main.go, which must not change per commit (make check-generate); the image's
# tag and org.opencontainers.image.version label say the build. The control plane embeds whatever controlplane/web/dist holds: `make images`
# builds the dashboard first when npm is there.
set -eu

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
GO=${GO:-go}
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
REVISION=${REVISION:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
CREATED=${CREATED:-$(date -u +%Y-%m-%dT%H:%M:%SZ)}
SOURCE=${SOURCE:-https://github.com/otelcol-svc/otelcol-svc}
COLLECTOR_IMAGE=${COLLECTOR_IMAGE:-otelcol-svc}
CONTROLPLANE_IMAGE=${CONTROLPLANE_IMAGE:-otelcol-svc-controlplane}
NATS_BUILD_IMAGE=${NATS_BUILD_IMAGE:-otelcol-svc-nats}
CA_CERTS=${CA_CERTS:-/etc/ssl/certs/ca-certificates.crt}

[ $# -gt 0 ] || set -- collector controlplane
[ -r "$CA_CERTS" ] || { echo "build.sh: no CA certificates at $CA_CERTS (install ca-certificates or set CA_CERTS)" >&2; exit 1; }

ctx=$(mktemp -d "${TMPDIR:-/tmp}/otelcol-svc-image.XXXXXX")
trap 'rm -rf "$ctx"' EXIT

# build <go package> <binary name> <dockerfile> <image> [extra -ldflags]
build() {
	pkg=$1 bin=$2 dockerfile=$3 image=$4 ldflags=${5:-}
	shift 4
	rm -rf "$ctx"/*
	# COPY makes a directory it copies into 0755, whatever the context's mode: /tmp is
	# copied as an entry of tmproot/ (COPY tmproot/ /), which keeps its 1777.
	mkdir -p "$ctx/etc/ssl/certs" "$ctx/data" "$ctx/configs" "$ctx/tmproot/tmp"
	chmod 1777 "$ctx/tmproot/tmp"
	cp "$CA_CERTS" "$ctx/etc/ssl/certs/ca-certificates.crt"
	printf 'root:x:0:0:root:/root:/sbin/nologin\notelcol:x:10001:10001:otelcol-svc:/data:/sbin/nologin\n' >"$ctx/etc/passwd"
	printf 'root:x:0:\notelcol:x:10001:\n' >"$ctx/etc/group"
	cp configs/*.yaml "$ctx/configs/"
	cp "deploy/docker/$dockerfile" "$ctx/Dockerfile"
	echo "build.sh: go build $pkg"
	# timetzdata: there is no /usr/share/zoneinfo in a scratch image. grpcnotrace: gRPC's
	# request tracing (off unless a program turns it on; nothing here does) pulls in
	# html/template, whose reflection keeps every exported method of every type in the
	# binary: without it the collector is 49 MB instead of 63.
	CGO_ENABLED=0 "$GO" build -trimpath -tags timetzdata,grpcnotrace -ldflags="-s -w $ldflags" -o "$ctx/$bin" "$pkg"
	echo "build.sh: docker build $image:$VERSION"
	docker build -q \
		--build-arg VERSION="$VERSION" --build-arg REVISION="$REVISION" \
		--build-arg CREATED="$CREATED" --build-arg SOURCE="$SOURCE" \
		-t "$image:$VERSION" -t "$image:dev" "$ctx"
}

for what in "$@"; do
	case $what in
	collector) build ./cmd/otelcol-svc otelcol-svc otelcol-svc.Dockerfile "$COLLECTOR_IMAGE" ;;
	controlplane) build ./controlplane controlplane controlplane.Dockerfile "$CONTROLPLANE_IMAGE" "-X main.version=$VERSION" ;;
	nats) build github.com/nats-io/nats-server/v2 nats-server nats.Dockerfile "$NATS_BUILD_IMAGE" ;;
	*) echo "build.sh: unknown image $what (collector, controlplane, nats)" >&2; exit 2 ;;
	esac
done
