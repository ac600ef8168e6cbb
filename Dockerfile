# cfp's container image, for people with Docker (or any BuildKit builder):
#
#   docker buildx build --platform linux/amd64,linux/arm64 -t cfp:dev .
#   docker run --rm cfp:dev estimate --help
#   docker buildx build --target shell -t cfp:dev-shell .    # the shell variant, for --exec
#
# The same image without a daemon: go run ./ociimage build (in tools/; see .ci/run), and
# goreleaser builds the release images with Dockerfile.goreleaser. All three make one static
# cfp at /usr/bin/cfp on an empty base, CA certificates, and the user nonroot (65532). The
# empty base has no sh, which `cfp process --exec` and `--exec-lines` run their command with:
# the target shell adds a static busybox (sh, cat, wget, ...), as `ociimage build -shell` does.
ARG GO_VERSION=1.26
ARG BUSYBOX_IMAGE=busybox:1.36-musl

FROM ${BUSYBOX_IMAGE} AS busybox

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
ARG REVISION=unknown
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath \
      -ldflags "-s -w -X github.com/cfp-dev/cfp/internal/buildinfo.Version=${VERSION} -X github.com/cfp-dev/cfp/internal/buildinfo.Commit=${REVISION}" \
      -o /out/usr/bin/cfp . \
 && mkdir -p /out/etc /out/home/nonroot /out/tmp \
 && printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > /out/etc/passwd \
 && printf 'root:x:0:\nnonroot:x:65532:\n' > /out/etc/group \
 && chmod 1777 /out/tmp \
 && mkdir -p /out/shell/bin \
 && for a in sh ash cat echo printf env test '[' true false sleep date wc head tail tee cut tr sort uniq grep sed awk xargs ls cp mv rm mkdir mktemp touch base64 sha256sum gzip gunzip wget nc; do ln -s busybox "/out/shell/bin/$a"; done

FROM scratch AS image
ARG VERSION=dev
ARG REVISION=unknown
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/etc/ /etc/
COPY --from=build /out/tmp /tmp
COPY --from=build --chown=65532:65532 /out/home/nonroot /home/nonroot
COPY --from=build /out/usr/bin/cfp /usr/bin/cfp
USER 65532:65532
WORKDIR /home/nonroot
ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt HOME=/home/nonroot
# 9464: --metrics-addr (/metrics, /healthz, /readyz); 8081: cfp emulator --addr 0.0.0.0:8081
EXPOSE 9464 8081
LABEL org.opencontainers.image.title="cfp" \
      org.opencontainers.image.description="Azure Cosmos DB change feed processor host, lease tools, estimator and emulator" \
      org.opencontainers.image.source="https://github.com/cfp-dev/cfp" \
      org.opencontainers.image.licenses="MIT" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
ENTRYPOINT ["/usr/bin/cfp"]
CMD ["--help"]

# The shell variant: docker buildx build --target shell.
# No RUN: the links (the applets of tools/ociimage's busyboxApplets) are made in the build stage,
# so cross-platform builds need no emulator.
FROM image AS shell
COPY --from=busybox /bin/busybox /bin/busybox
COPY --from=build /out/shell/bin/ /bin/
LABEL dev.cfp.image.variant="shell"

# The default target: cfp alone.
FROM image
