# The leasetune image the chart runs: a static binary on a distroless,
# non-root base. Build: docker build -t <registry>/leasetune:<version> .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd ./cmd
COPY pkg ./pkg
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /leasetune ./cmd/leasetune

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /leasetune /usr/local/bin/leasetune
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/leasetune"]
