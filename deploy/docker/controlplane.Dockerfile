# The control plane with the dashboard embedded (built into controlplane/web/dist before
# the binary). FROM scratch, as the collector's image; see deploy/docker/build.sh.
FROM scratch
ARG VERSION=dev
ARG REVISION=unknown
ARG CREATED=unknown
ARG SOURCE=https://github.com/otelcol-svc/otelcol-svc
COPY etc/ /etc/
COPY --chown=10001:10001 data/ /data/
# Mode 1777 from the build context (build.sh): Go's os.TempDir and SQLite's temporary
# files need a writable /tmp, which scratch does not have.
COPY tmproot/ /
COPY controlplane /usr/bin/controlplane
# SQLite under /data unless DATABASE_URL names PostgreSQL.
ENV SVC_DATA_DIR=/data \
    SVC_CONTROLPLANE_LISTEN=0.0.0.0:8080
USER 10001:10001
WORKDIR /data
VOLUME /data
EXPOSE 8080
ENTRYPOINT ["/usr/bin/controlplane"]
LABEL org.opencontainers.image.title="otelcol-svc-controlplane" \
      org.opencontainers.image.description="otelcol-svc control plane: API, MCP server and dashboard" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="${SOURCE}"
