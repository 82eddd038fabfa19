//! The proxy's integration tests, one binary: real sockets on loopback, the
//! proxy in process (its library API) or as the real binary, a scripted
//! control plane over a real ADS stream, or the real one (`meshperf pilot`).
//! One module per area; `support` holds what they share.
//!
//! Two tests need the Go binary and are ignored unless asked for:
//! `go build -o /tmp/meshperf ./cmd/meshperf` at the repo root, then
//! `MESHPERF_BIN=/tmp/meshperf cargo test --test it -- --ignored`.

mod support;

mod admin;
mod drain;
mod grpc;
mod hbone;
mod http;
mod idle;
mod mesh_e2e;
mod mtls;
mod pilot;
mod resilience;
mod tcp;
mod tls_detect;
mod tls_mtls;
mod upstream_pool;
mod waypoint;
mod workers;
mod xds_client;
