# The catalog image: opm serving the file-based catalog in catalog/, with its cache built
# at image build time so the registry starts serving at once.
FROM quay.io/operator-framework/opm:v1.73.0 AS builder
ADD catalog /configs
RUN ["/bin/opm", "serve", "/configs", "--cache-dir=/tmp/cache", "--cache-only"]

FROM quay.io/operator-framework/opm:v1.73.0
ENTRYPOINT ["/bin/opm"]
CMD ["serve", "/configs", "--cache-dir=/tmp/cache"]
COPY --from=builder /configs /configs
COPY --from=builder /tmp/cache /tmp/cache
LABEL operators.operatorframework.io.index.configs.v1=/configs
