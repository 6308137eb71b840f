# kfollower, as the docker-compose.yml "kfollower" service builds it.
#   docker build -t kfollower .
#   docker run --rm kfollower run --help
# Needs golang and distroless from a registry; without one, deploy/images/build
# makes the same image from a binary built on the host.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=devel
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/kfollower ./cmd/kfollower \
 && mkdir -p /out/data

# Static binary, no shell; runs as the distroless "nonroot" user (65532),
# who owns the data dir so a fresh named volume is writable.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/kfollower /usr/local/bin/kfollower
COPY --from=build --chown=65532:65532 /out/data /var/lib/kfollower
ENV KFOLLOWER_DATA_DIR=/var/lib/kfollower \
    KFOLLOWER_HTTP_LISTEN=:7644
VOLUME /var/lib/kfollower
EXPOSE 7644
ENTRYPOINT ["/usr/local/bin/kfollower"]
CMD ["run"]
