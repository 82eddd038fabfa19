//! meshperf-proxy: a sidecar proxy configured only over xDS.
//!
//! One module per job, as in ztunnel: `config` turns flags and environment into
//! one [`config::Config`]; `logging` sets up tracing with a filter the admin
//! endpoint can change; `state` is the compact model of what the control plane
//! sent, swapped atomically so the data path reads it without locks; `xds` is the
//! ADS client that fills it; `admin` serves readiness, config dumps and stats on
//! loopback. For the node proxy (ambient): `identity` holds workload identities
//! and their certificates from the CA, `hbone` the HBONE client pool and server.
//! Admin, xDS and metrics run on a current-thread runtime of their own so
//! that they never take time from the traffic workers.
#![forbid(unsafe_code)]

pub mod admin;
pub mod config;
pub mod hbone;
pub mod identity;
pub mod logging;
pub mod proto;
pub mod proxy;
pub mod state;
pub mod telemetry;
pub mod tls;
pub mod xds;
