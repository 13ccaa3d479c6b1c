# The ax image: a static binary on distroless, running as non-root.
#   docker build -t ghcr.io/axhq/ax:0.1.0 .
# Kubernetes: deploy/helm/ax (its image.repository/tag point here).

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /ax ./cmd/server

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /ax /ax
# distroless's "nonroot" user; the Helm chart runs it with the same UID.
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/ax"]
CMD ["serve"]
