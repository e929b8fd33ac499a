# syntax=docker/dockerfile:1
# Multi-stage build: a static quiver binary in a distroless, non-root image.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN mkdir -p /out/data && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/quiver ./server/cmd/quiver

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/quiver /usr/local/bin/quiver
COPY examples/docker.yaml /etc/quiver/quiver.yaml
# data_dir must be writable by the non-root user.
COPY --from=build --chown=nonroot:nonroot /out/data /var/lib/quiver
USER nonroot:nonroot
WORKDIR /var/lib/quiver
EXPOSE 8815 9815
ENTRYPOINT ["/usr/local/bin/quiver"]
CMD ["serve", "--config", "/etc/quiver/quiver.yaml"]
