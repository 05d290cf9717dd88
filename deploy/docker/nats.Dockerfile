# nats-server at the version go.mod pins, for machines that cannot pull the official
# image (the container tests): `make images-nats`, then NATS_IMAGE=otelcol-svc-nats:dev.
# Its entrypoint is the server itself, as the official image's, so compose files pass
# the same flags to either.
FROM scratch
ARG VERSION=dev
COPY etc/ /etc/
COPY --chown=10001:10001 data/ /data/
# Mode 1777 from the build context (build.sh): Go's os.TempDir and SQLite's temporary
# files need a writable /tmp, which scratch does not have.
COPY tmproot/ /
COPY nats-server /usr/bin/nats-server
USER 10001:10001
WORKDIR /data
VOLUME /data
EXPOSE 4222 6222 8222
ENTRYPOINT ["/usr/bin/nats-server"]
LABEL org.opencontainers.image.title="otelcol-svc-nats" \
      org.opencontainers.image.version="${VERSION}"
