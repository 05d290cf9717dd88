# The collector (every role; the embedded default unless told otherwise). Built FROM
# scratch by deploy/docker/build.sh from a context it fills: a static binary, the shipped
# configs, CA certificates, and passwd/group lines for the non-root user.
FROM scratch
ARG VERSION=dev
ARG REVISION=unknown
ARG CREATED=unknown
ARG SOURCE=https://github.com/otelcol-svc/otelcol-svc
COPY etc/ /etc/
COPY configs/ /etc/otelcol-svc/
COPY --chown=10001:10001 data/ /data/
# Mode 1777 from the build context (build.sh): Go's os.TempDir and SQLite's temporary
# files need a writable /tmp, which scratch does not have.
COPY tmproot/ /
COPY otelcol-svc /usr/bin/otelcol-svc
# Inside a container the addresses are the container's own: listen on every interface
# where `make run` keeps to loopback. The embedded NATS too, so that a control plane in
# another container can reach it (it has no credentials: do not publish 4223 beyond the
# host, or set SVC_EMBEDDED_NATS_LISTEN=127.0.0.1:4223 with host networking).
ENV SVC_DATA_DIR=/data \
    SVC_RECEIVER_LISTEN=0.0.0.0:4318 \
    SVC_OTLP_GRPC_LISTEN=0.0.0.0:4317 \
    SVC_HEALTH_LISTEN=0.0.0.0:13133 \
    SVC_METRICS_HOST=0.0.0.0 \
    SVC_METRICS_PORT=8888 \
    SVC_EMBEDDED_NATS_LISTEN=0.0.0.0:4223
USER 10001:10001
WORKDIR /data
VOLUME /data
EXPOSE 4318 4317 13133 8888 4223
ENTRYPOINT ["/usr/bin/otelcol-svc"]
CMD ["--config", "/etc/otelcol-svc/embedded.yaml"]
LABEL org.opencontainers.image.title="otelcol-svc" \
      org.opencontainers.image.description="otelcol-svc collector: ingest, pipeline and sink roles (configs in /etc/otelcol-svc)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="${SOURCE}"
