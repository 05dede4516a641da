# goodput in a container: a multi-stage build, then a small runtime image (Debian slim, a
# non-root user, the binary and the example configs; the model and GPU catalogs are compiled
# into the binary).
#
#   docker build -t goodput .                      # or: podman build -t goodput .
#   docker run --rm goodput run                    # the main job: tiny model, dummy weights
#   docker run --rm --user "$(id -u):$(id -g)" -v "$PWD:/work" goodput run --config /usr/share/goodput/examples/bench.toml
#   docker run --rm --network host goodput run --target http://127.0.0.1:8000 --api chat
#
# The base images are build arguments, so a registry mirror (or images built locally, as
# scripts/container.sh does on a machine without Docker Hub) can stand in for them.
ARG RUST_IMAGE=docker.io/library/rust:1.95-slim-bookworm
ARG RUNTIME_IMAGE=docker.io/library/debian:bookworm-slim

FROM ${RUST_IMAGE} AS build
WORKDIR /src
COPY . .
# The registry and the build directory are cache mounts: a rebuild after a source change
# recompiles goodput's crates, not its dependencies.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin goodput \
    && cp target/release/goodput /usr/local/bin/goodput \
    && strip /usr/local/bin/goodput

FROM ${RUNTIME_IMAGE}
# CA roots for TLS targets (the binary also carries webpki-roots).
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --create-home --home-dir /home/goodput goodput \
    && mkdir -p /work && chown goodput /work
COPY --from=build /usr/local/bin/goodput /usr/local/bin/goodput
COPY examples/configs /usr/share/goodput/examples
USER goodput
WORKDIR /work
# `goodput serve` listens here when started with --host 0.0.0.0 --port 8000.
EXPOSE 8000
ENTRYPOINT ["goodput"]
CMD ["run"]
