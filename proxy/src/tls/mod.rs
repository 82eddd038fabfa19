//! Mutual TLS between sidecars, built from the SDS secrets of the active
//! [`Snapshot`](crate::state::Snapshot).
//!
//! The mesh's certificates carry one identity, a SPIFFE URI SAN
//! (`spiffe://<trust domain>/ns/<ns>/sa/<sa>`), and no DNS names, so the client
//! side cannot use rustls's hostname verification: [`SpiffeServerVerifier`] checks the chain
//! to the mesh root with rustls's own webpki primitives and then the peer's
//! SPIFFE ID. The server side requires a client certificate signed by the same
//! root and hands the verified identity to telemetry ([`peer_identity`]).
//!
//! Configs are built lazily and cached in a [`TlsConfigs`] tied to one set of
//! secrets; [`TlsConfigStore`] swaps in a new set when SDS delivers new
//! secrets, so new handshakes use the new certificate while established
//! connections keep the config they were made with (rotation drops nothing).
//! [`detect`] tells a TLS ClientHello from plain text for PERMISSIVE ports.
//!
//! The node proxy's additions: HBONE's configs ([`hbone_client_config`],
//! [`hbone_server_config`]: TLS 1.3, AES-GCM, ALPN `h2`, no SNI, built once
//! per workload certificate) and the TLS channel to the control plane's
//! secure port ([`control_plane_channel`]) for the CA and workload discovery.

mod build;
mod configs;
mod control;
mod detect;
mod hbone;
mod identity;
mod verify;

pub(crate) use build::certified_key;
pub use build::{AppProtocol, MESH_ALPN, client_config, server_config};
pub use configs::{TlsConfigStore, TlsConfigs, server_name, upstream_tls};
pub use control::control_plane_channel;
pub use detect::{DETECT_TIMEOUT, Detected, detect};
pub use hbone::{HBONE_ALPN, hbone_client_config, hbone_server_config};
pub use identity::{PeerIdentities, identity_of, peer_identity, server_identity, spiffe_id};
pub use verify::SpiffeServerVerifier;

/// Why a TLS config could not be built. Each names what is missing or wrong;
/// the data path logs it and fails the one connection that needed it.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("SDS secret {name:?} has not arrived")]
    MissingSecret { name: String },
    #[error("SDS secret {name:?} is not a {want}")]
    WrongSecretType { name: String, want: &'static str },
    #[error("upstream TLS without a client certificate (SIMPLE TLS) is not supported")]
    NoClientCertificate,
    #[error("upstream TLS without a validation context (SDS ROOTCA) is not supported: the peer would go unverified")]
    NoValidation,
    #[error("a client certificate is required but the TLS context has no validation context to verify it")]
    ClientCertWithoutValidation,
    #[error("the workload certificate has no SPIFFE ID, so the trust domain of peers is unknown")]
    NoTrustDomain,
    #[error("the workload certificate and key are unusable: {0}")]
    Certificate(#[source] rustls::Error),
    #[error("cannot build a TLS config: {0}")]
    Config(#[source] rustls::Error),
    #[error("cannot build the client certificate verifier: {0}")]
    Verifier(#[source] rustls::server::VerifierBuilderError),
    #[error("cannot read the control plane's root certificate {path}: {reason}")]
    RootCa { path: String, reason: String },
    #[error("bad control plane address {address:?}: {reason}")]
    ControlPlaneAddress { address: String, reason: String },
}
