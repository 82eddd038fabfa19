//! HBONE: TCP connections carried as HTTP/2 CONNECT streams over mutual TLS
//! 1.3 between node proxies (and waypoints) on port 15008, as ztunnel and
//! Istio's waypoints speak it.
//!
//! - [`Pool`] is the client: `connect` gives one CONNECT stream
//!   ([`HboneStream`], AsyncRead + AsyncWrite) to a destination, on a pooled
//!   connection keyed by (source pod, source identity, destination identity,
//!   peer address) carrying up to [`HboneConfig::max_streams_per_connection`]
//!   streams, so connections are never shared across pods or identities.
//! - [`Server`] terminates one accepted 15008 connection: TLS with the
//!   listener's workload certificate, the client's identity checked, and for
//!   each CONNECT stream an [`InboundHandler`] decides where it goes (or
//!   which status refuses it).
//!
//! Both ends count nothing themselves: the caller copies bytes (e.g.
//! `tokio::io::copy_bidirectional`, which returns the bytes each way) on
//! the client side; on the server side [`InboundHandler::finished`] gets the
//! totals.
//!
//! The defaults are ztunnel's (its `config.rs`): 100 streams per connection
//! (`POOL_MAX_STREAMS_PER_CONNECTION`), unused connections closed after 5
//! minutes (`POOL_UNUSED_RELEASE_TIMEOUT`), windows of 4 MiB per stream and
//! 16 MiB per connection, frames up to 1 MiB, a PING every 10 s answered
//! within 20 s.

mod headers;
mod pool;
mod server;
mod stream;

use std::net::SocketAddr;
use std::time::Duration;

pub use headers::{forwarded_for, parse_authority, parse_forwarded_for};
pub use pool::{ConnectRequest, ExpectedPeer, HboneStream, PlainSockets, Pool, SocketFactory};
pub use server::{
    InboundDecision, InboundHandler, InboundRequest, Refusal, Server, ServerStream, StreamOutcome, StreamService,
    Upstream,
};

use crate::identity;

/// The port node proxies and waypoints accept HBONE on.
pub const HBONE_PORT: u16 = 15008;

/// HBONE's HTTP/2 and pooling settings, the same on both ends.
#[derive(Debug, Clone)]
pub struct HboneConfig {
    /// Streams one pooled connection carries at once; a new connection is
    /// opened when all are busy (also capped by the peer's SETTINGS).
    pub max_streams_per_connection: u16,
    /// A pooled connection with no stream for this long is closed.
    pub pool_idle_timeout: Duration,
    pub stream_window: u32,
    pub connection_window: u32,
    pub max_frame_size: u32,
    /// Time between keep-alive PINGs, and how long an answer may take
    /// before the connection is given up.
    pub keepalive_interval: Duration,
    pub keepalive_timeout: Duration,
    /// TCP connect plus TLS handshake, on either side.
    pub handshake_timeout: Duration,
}

impl Default for HboneConfig {
    fn default() -> Self {
        HboneConfig {
            max_streams_per_connection: 100,
            pool_idle_timeout: Duration::from_secs(5 * 60),
            stream_window: 4 * 1024 * 1024,
            connection_window: 16 * 1024 * 1024,
            max_frame_size: 1024 * 1024,
            keepalive_interval: Duration::from_secs(10),
            keepalive_timeout: Duration::from_secs(20),
            handshake_timeout: Duration::from_secs(10),
        }
    }
}

/// Why an HBONE connection or stream failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Certificate(#[from] identity::Error),
    #[error("cannot connect to {peer}: {source}")]
    Connect { peer: SocketAddr, source: std::io::Error },
    #[error("TLS handshake with {peer} failed: {source}")]
    Tls { peer: SocketAddr, source: std::io::Error },
    #[error("connecting to {peer} took longer than {timeout:?}")]
    Timeout { peer: SocketAddr, timeout: Duration },
    #[error("{peer} presented {presented:?}, not a workload identity of trust domain {trust_domain}")]
    ForeignPeer { peer: SocketAddr, trust_domain: String, presented: Option<String> },
    #[error("{peer} presented {presented:?}, not {expected}")]
    PeerIdentity { peer: SocketAddr, expected: ExpectedPeer, presented: Option<String> },
    #[error("HTTP/2 with {peer} failed: {source}")]
    Http2 { peer: SocketAddr, source: h2::Error },
    #[error("{peer} answered CONNECT {authority} with status {status}")]
    Status { peer: SocketAddr, authority: SocketAddr, status: u16 },
}
