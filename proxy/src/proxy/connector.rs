//! The upstream connector of the pooled HTTP clients: TCP, then mesh mTLS when
//! the cluster's transport asks for it for that endpoint.
//!
//! Written here rather than taken from hyper-rustls because the mesh needs two
//! things a URI-driven HTTPS connector does not give: the TLS decision and the
//! SNI come from the cluster (`ISTIO_MUTUAL`, or auto mTLS by the endpoint's
//! `tlsMode`), not from the URI; and the server's verified SPIFFE identity
//! must reach telemetry (`destination_principal`), which it does as a
//! [`Connected::extra`] that hyper copies into every response's extensions.
//!
//! An endpoint that names an internal listener (a waypoint's) is not TCP: it
//! is an HBONE stream opened by the worker's [`Waypoint`], which the pools
//! then use as they use a TCP connection.
//!
//! The decision and the TLS config are taken from the current snapshot at
//! connect time, so a certificate rotation applies to the next connection
//! while pooled connections carry on with the certificate they were made with.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use super::lb::cluster_endpoints;
use super::waypoint::Waypoint;
use crate::hbone::HboneStream;
use crate::state::{Cluster, EndpointAddress, Snapshot, State, TlsMode, UpstreamTransport};
use crate::tls::{self, AppProtocol, TlsConfigStore};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The verified SPIFFE identity of the upstream a response came from; found
/// in the response's extensions when the connection was mTLS.
#[derive(Debug, Clone)]
pub struct UpstreamPeer(pub Option<String>);

/// Connects to one cluster's endpoints.
#[derive(Clone)]
pub struct MeshConnector {
    tcp: HttpConnector,
    cluster: Arc<str>,
    app: AppProtocol,
    state: Arc<State>,
    tls: Arc<TlsConfigStore>,
    waypoint: Arc<Waypoint>,
}

impl MeshConnector {
    pub(crate) fn new(
        tcp: HttpConnector,
        cluster: &str,
        app: AppProtocol,
        state: Arc<State>,
        tls: Arc<TlsConfigStore>,
        waypoint: Arc<Waypoint>,
    ) -> Self {
        MeshConnector { tcp, cluster: Arc::from(cluster), app, state, tls, waypoint }
    }

    /// The internal listener and destination of the cluster's endpoint that
    /// `dst` names (by endpoint id), when it is an internal one.
    fn internal_endpoint(&self, dst: &Uri) -> Option<(String, Option<SocketAddr>)> {
        let id = dst.authority()?.as_str();
        let snap = self.state.snapshot();
        let cluster = snap.clusters.get(&*self.cluster)?;
        cluster_endpoints(&snap, cluster).iter().find_map(|e| match &e.address {
            EndpointAddress::Internal { listener, endpoint_id, destination } if endpoint_id == id => {
                Some((listener.clone(), *destination))
            }
            _ => None,
        })
    }

    /// The TLS client config and server name to use towards `endpoint`, or
    /// None for plain text.
    fn tls_for(&self, endpoint: SocketAddr) -> Result<Option<TlsTarget>, BoxError> {
        let snap = self.state.snapshot();
        let Some(cluster) = snap.clusters.get(&*self.cluster) else {
            // Removed while a request was on its way: plain text, as the cluster's last
            // known transport is gone with it.
            return Ok(None);
        };
        let mode = endpoint_tls_mode(&snap, cluster, endpoint);
        let Some(upstream) = tls::upstream_tls(cluster, mode) else { return Ok(None) };
        let config = self.tls.for_snapshot(&snap).client_for_tls(upstream, self.app)?;
        Ok(Some(TlsTarget { config, name: tls::server_name(upstream, endpoint.ip()) }))
    }
}

struct TlsTarget {
    config: Arc<rustls::ClientConfig>,
    name: rustls::pki_types::ServerName<'static>,
}

/// The endpoint's `tlsMode` (auto mTLS). An address the cluster does not
/// list (ORIGINAL_DST) is plain.
pub(crate) fn endpoint_tls_mode(snap: &Snapshot, cluster: &Cluster, addr: SocketAddr) -> TlsMode {
    if !matches!(cluster.transport, UpstreamTransport::Auto(_)) {
        return TlsMode::Disabled;
    }
    cluster_endpoints(snap, cluster)
        .iter()
        .find(|e| matches!(&e.address, EndpointAddress::Socket(a) if *a == addr))
        .map_or(TlsMode::Disabled, |e| e.tls_mode)
}

impl tower_service::Service<Uri> for MeshConnector {
    type Response = MeshStream;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<MeshStream, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.tcp.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        let connector = self.clone();
        if let Some((listener, destination)) = self.internal_endpoint(&dst) {
            return Box::pin(async move {
                let destination = destination.ok_or_else(|| format!("internal endpoint {dst} has no destination"))?;
                let stream = connector.waypoint.originate(&listener, destination).await?;
                Ok(MeshStream::Hbone(Box::new(TokioIo::new(stream))))
            });
        }
        let tcp = self.tcp.call(dst);
        Box::pin(async move {
            let stream = tcp.await?.into_inner();
            let peer = stream.peer_addr()?;
            let Some(target) = connector.tls_for(peer)? else {
                return Ok(MeshStream::Plain(TokioIo::new(stream)));
            };
            let tls = TlsConnector::from(target.config).connect(target.name, stream).await?;
            Ok(MeshStream::Tls(Box::new(TokioIo::new(tls))))
        })
    }
}

/// A connection to an upstream: plain TCP, mesh mTLS, or an HBONE stream.
pub enum MeshStream {
    Plain(TokioIo<TcpStream>),
    // Boxed: a TLS session is ten times the size of a socket.
    Tls(Box<TokioIo<TlsStream<TcpStream>>>),
    Hbone(Box<TokioIo<HboneStream>>),
}

impl MeshStream {
    /// The server's verified identity, when the connection is mTLS (or HBONE).
    pub(crate) fn peer(&self) -> Option<UpstreamPeer> {
        match self {
            MeshStream::Plain(_) => None,
            MeshStream::Tls(s) => Some(UpstreamPeer(tls::identity_of(s.inner().get_ref().1))),
            MeshStream::Hbone(s) => Some(UpstreamPeer(Some(s.inner().peer_identity().to_string()))),
        }
    }
}

impl Connection for MeshStream {
    fn connected(&self) -> Connected {
        match self {
            MeshStream::Plain(s) => s.connected(),
            MeshStream::Tls(s) => {
                let (tcp, session) = s.inner().get_ref();
                let connected = tcp.connected().extra(UpstreamPeer(tls::identity_of(session)));
                if session.alpn_protocol() == Some(b"h2") { connected.negotiated_h2() } else { connected }
            }
            MeshStream::Hbone(s) => Connected::new().extra(UpstreamPeer(Some(s.inner().peer_identity().to_string()))),
        }
    }
}

impl Read for MeshStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: ReadBufCursor<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MeshStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            MeshStream::Tls(s) => Pin::new(&mut **s).poll_read(cx, buf),
            MeshStream::Hbone(s) => Pin::new(&mut **s).poll_read(cx, buf),
        }
    }
}

impl Write for MeshStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            MeshStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            MeshStream::Tls(s) => Pin::new(&mut **s).poll_write(cx, buf),
            MeshStream::Hbone(s) => Pin::new(&mut **s).poll_write(cx, buf),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MeshStream::Plain(s) => Pin::new(s).poll_flush(cx),
            MeshStream::Tls(s) => Pin::new(&mut **s).poll_flush(cx),
            MeshStream::Hbone(s) => Pin::new(&mut **s).poll_flush(cx),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MeshStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            MeshStream::Tls(s) => Pin::new(&mut **s).poll_shutdown(cx),
            MeshStream::Hbone(s) => Pin::new(&mut **s).poll_shutdown(cx),
        }
    }
    fn is_write_vectored(&self) -> bool {
        match self {
            MeshStream::Plain(s) => s.is_write_vectored(),
            MeshStream::Tls(s) => s.is_write_vectored(),
            MeshStream::Hbone(s) => s.is_write_vectored(),
        }
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            MeshStream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            MeshStream::Tls(s) => Pin::new(&mut **s).poll_write_vectored(cx, bufs),
            MeshStream::Hbone(s) => Pin::new(&mut **s).poll_write_vectored(cx, bufs),
        }
    }
}

/// A TLS handshake to a TCP-proxied upstream, when the cluster wants mTLS
/// for it; returns the stream and the peer's identity.
pub(crate) async fn tls_tcp(
    state: &State,
    store: &TlsConfigStore,
    cluster: &Cluster,
    stream: TcpStream,
) -> Result<(UpstreamIo, Option<String>), BoxError> {
    let peer = stream.peer_addr()?;
    let snap = state.snapshot();
    let mode = endpoint_tls_mode(&snap, cluster, peer);
    let Some(upstream) = tls::upstream_tls(cluster, mode) else { return Ok((UpstreamIo::Plain(stream), None)) };
    let config = store.for_snapshot(&snap).client_for_tls(upstream, AppProtocol::Tcp)?;
    drop(snap);
    let tls = TlsConnector::from(config).connect(tls::server_name(upstream, peer.ip()), stream).await?;
    let identity = tls::identity_of(tls.get_ref().1);
    Ok((UpstreamIo::Tls(Box::new(tls)), identity))
}

/// A TCP-proxied upstream connection (tokio I/O, for copy_bidirectional).
pub(crate) enum UpstreamIo {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
    Hbone(Box<HboneStream>),
}
