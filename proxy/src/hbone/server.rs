//! The HBONE server: one accepted 15008 connection, its CONNECT streams
//! handed to the node proxy's [`InboundHandler`].
//!
//! The TLS handshake presents the listener's workload certificate and
//! requires a client certificate chained to the mesh root
//! (`tls::hbone_server_config`); a client whose SPIFFE id is not in our
//! trust domain is then dropped before HTTP/2 starts. Per stream, as ztunnel answers: a method other than
//! CONNECT or an authority that is not `IP:PORT` is 400; then the handler
//! decides: an upstream (the server answers 200 only once it has one, then
//! copies both ways, END_STREAM half-closing the upstream and the upstream's
//! FIN ending the stream), or a [`Refusal`] status.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use h2::server::SendResponse;
use hyper::{HeaderMap, Method, Response, StatusCode};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

use super::headers::{parse_authority, parse_forwarded_for};
use super::stream::{H2Stream, keepalive};
use super::{Error, HboneConfig};
use crate::identity::{CertificateSource, Identity};
use crate::tls;

/// ztunnel's (hyper's default): more than a client pools per connection.
const MAX_CONCURRENT_STREAMS: u32 = 200;
/// Headers of a CONNECT are few; ztunnel's bound.
const MAX_HEADER_LIST_SIZE: u32 = 64 * 1024;

/// What the handler learns of one CONNECT stream.
#[derive(Debug, Clone)]
pub struct InboundRequest {
    /// The client's verified SPIFFE identity (in our trust domain).
    pub peer_identity: Identity,
    /// The `:authority`: where the client wants the stream delivered.
    pub authority: SocketAddr,
    /// The original source from `forwarded: for=`, when the client sent one
    /// that is an address.
    pub forwarded_for: Option<SocketAddr>,
    /// The TCP peer of the HBONE connection (the source node proxy or waypoint).
    pub peer_address: SocketAddr,
    /// The address the HBONE connection arrived on (`POD_IP:15008` in-pod).
    pub local_address: SocketAddr,
    /// All request headers (`baggage`, `traceparent`, ...).
    pub headers: HeaderMap,
}

/// An upstream the server copies a stream to and from.
pub trait Upstream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Upstream for T {}

/// Why a stream is refused, and the status that says so (ztunnel's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// 400: the request is not one to serve (e.g. an authority that is not
    /// the listener's workload's).
    BadRequest,
    /// 401: authorization policy denies it.
    Denied,
    /// 503: the upstream could not be reached.
    UpstreamUnavailable,
}

impl Refusal {
    pub fn status(self) -> StatusCode {
        match self {
            Refusal::BadRequest => StatusCode::BAD_REQUEST,
            Refusal::Denied => StatusCode::UNAUTHORIZED,
            Refusal::UpstreamUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

/// The handler's answer for one stream.
pub enum InboundDecision {
    /// Connected: answer 200 and copy to and from this.
    Forward(Box<dyn Upstream>),
    /// Answer 200 and hand the stream itself to this, which serves it until
    /// it ends: a waypoint's internal listener, which reads the stream as
    /// its connection (no upstream socket, no copy).
    Serve(StreamService),
    Refuse(Refusal),
}

/// What serves an accepted stream (see [`InboundDecision::Serve`]); it
/// reports what it carried itself ([`InboundHandler::finished`] is not called).
pub type StreamService = Box<dyn FnOnce(ServerStream) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// An accepted CONNECT stream, answered 200: the client's bytes, both ways
/// (EOF on read is the client's END_STREAM, shutdown sends ours).
pub struct ServerStream(H2Stream);

impl AsyncRead for ServerStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for ServerStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// How a forwarded stream ended, for the handler's metrics and logs.
#[derive(Debug)]
pub struct StreamOutcome {
    /// Bytes from the HBONE client to the upstream, and back.
    pub received: u64,
    pub sent: u64,
    /// None when both directions ended cleanly.
    pub error: Option<std::io::Error>,
}

/// The node proxy's decision for each inbound stream: where it goes.
pub trait InboundHandler: Send + Sync + 'static {
    /// Checks the request (the authority is the listener's workload's, L4
    /// policy allows the peer) and connects upstream, or refuses.
    fn handle(&self, request: &InboundRequest) -> Pin<Box<dyn Future<Output = InboundDecision> + Send + '_>>;

    /// Called once a forwarded stream (not a served one) has ended, with what it carried.
    fn finished(&self, request: &InboundRequest, outcome: StreamOutcome) {
        let _ = (request, outcome);
    }
}

/// Serves HBONE for one workload (the listener's): one per 15008 listener.
pub struct Server {
    secrets: Arc<dyn CertificateSource>,
    identity: Identity,
    config: HboneConfig,
}

impl Server {
    /// A server presenting `identity`'s certificate from `secrets` (fetched
    /// per connection, so a renewed certificate serves new connections).
    pub fn new(secrets: Arc<dyn CertificateSource>, identity: Identity, config: HboneConfig) -> Server {
        Server { secrets, identity, config }
    }

    /// Serves one accepted connection until the client closes it or stops
    /// answering PINGs; each stream runs in a task of its own.
    pub async fn serve(&self, tcp: TcpStream, handler: Arc<dyn InboundHandler>) -> Result<(), Error> {
        self.serve_until(tcp, handler, std::future::pending()).await
    }

    /// As [`Server::serve`], and once `shutdown` completes, a graceful end
    /// (the proxy's drain): GOAWAY, so the client opens no new stream here,
    /// the streams already open run to their end, then the connection closes.
    pub async fn serve_until(
        &self,
        tcp: TcpStream,
        handler: Arc<dyn InboundHandler>,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), Error> {
        let peer = tcp.peer_addr().map_err(|source| Error::Connect { peer: self.unknown_peer(), source })?;
        let local = tcp.local_addr().map_err(|source| Error::Connect { peer, source })?;
        let cert = self.secrets.fetch(&self.identity).await?;
        let _ = tcp.set_nodelay(true);
        let timeout = self.config.handshake_timeout;
        let tls = tokio::time::timeout(timeout, TlsAcceptor::from(cert.server_config()).accept(tcp))
            .await
            .map_err(|_| Error::Timeout { peer, timeout })?
            .map_err(|source| Error::Tls { peer, source })?;
        // The handshake checked the chain; the identity must be Istio's
        // workload form in our trust domain (as ztunnel requires).
        let presented = tls::peer_identity(&tls);
        let peer_identity = presented.as_deref().and_then(|id| id.parse::<Identity>().ok());
        let Some(peer_identity) = peer_identity.filter(|id| id.trust_domain == self.identity.trust_domain) else {
            return Err(Error::ForeignPeer { peer, trust_domain: self.identity.trust_domain.clone(), presented });
        };

        let h2_err = |source| Error::Http2 { peer, source };
        let mut connection = h2::server::Builder::new()
            .initial_window_size(self.config.stream_window)
            .initial_connection_window_size(self.config.connection_window)
            .max_frame_size(self.config.max_frame_size)
            .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
            .max_header_list_size(MAX_HEADER_LIST_SIZE)
            .max_send_buffer_size(self.config.stream_window as usize)
            .handshake::<_, Bytes>(tls)
            .await
            .map_err(h2_err)?;
        let ping_pong = connection.ping_pong().expect("taken once, right after the handshake");
        let keepalive = keepalive(ping_pong, self.config.keepalive_interval, self.config.keepalive_timeout);
        tokio::pin!(keepalive, shutdown);
        let mut shutting_down = false;
        loop {
            let accepted = tokio::select! {
                a = connection.accept() => a,
                () = &mut keepalive => return Ok(()),
                () = &mut shutdown, if !shutting_down => {
                    shutting_down = true;
                    connection.graceful_shutdown();
                    continue;
                }
            };
            let (request, respond) = match accepted {
                None => return Ok(()),
                Some(Ok(r)) => r,
                Some(Err(e)) if e.is_go_away() || e.is_remote() => return Ok(()),
                Some(Err(e)) => return Err(h2_err(e)),
            };
            let (parts, body) = request.into_parts();
            let authority = parts.uri.authority().map(|a| a.as_str()).and_then(parse_authority);
            let Some(authority) = authority.filter(|_| parts.method == Method::CONNECT) else {
                tracing::debug!(%peer, method = %parts.method, uri = %parts.uri, "HBONE: not a CONNECT to IP:PORT");
                refuse(respond, Refusal::BadRequest);
                continue;
            };
            let request = InboundRequest {
                peer_identity: peer_identity.clone(),
                authority,
                forwarded_for: parts
                    .headers
                    .get("forwarded")
                    .and_then(|v| v.to_str().ok())
                    .and_then(parse_forwarded_for),
                peer_address: peer,
                local_address: local,
                headers: parts.headers,
            };
            tokio::spawn(serve_stream(request, respond, body, Arc::clone(&handler)));
        }
    }

    /// The peer of a socket that cannot say (never seen in practice).
    fn unknown_peer(&self) -> SocketAddr {
        SocketAddr::from(([0, 0, 0, 0], 0))
    }
}

async fn serve_stream(
    request: InboundRequest,
    mut respond: SendResponse<Bytes>,
    body: h2::RecvStream,
    handler: Arc<dyn InboundHandler>,
) {
    let decision = handler.handle(&request).await;
    if let InboundDecision::Refuse(refusal) = decision {
        return refuse(respond, refusal);
    }
    let ok = Response::builder().status(StatusCode::OK).body(()).expect("a bare 200 is valid");
    let send = match respond.send_response(ok, false) {
        Ok(send) => send,
        Err(e) => {
            let error = Some(std::io::Error::other(e));
            return handler.finished(&request, StreamOutcome { received: 0, sent: 0, error });
        }
    };
    let mut stream = H2Stream::new(send, body);
    let mut upstream = match decision {
        InboundDecision::Forward(upstream) => upstream,
        InboundDecision::Serve(service) => return service(ServerStream(stream)).await,
        InboundDecision::Refuse(_) => unreachable!("answered above"),
    };
    let outcome = match tokio::io::copy_bidirectional(&mut stream, &mut upstream).await {
        Ok((received, sent)) => StreamOutcome { received, sent, error: None },
        Err(e) => StreamOutcome { received: 0, sent: 0, error: Some(e) },
    };
    handler.finished(&request, outcome);
}

/// Answers the stream with `refusal`'s status and ends it.
fn refuse(mut respond: SendResponse<Bytes>, refusal: Refusal) {
    let response = Response::builder().status(refusal.status()).body(()).expect("a bare status is valid");
    if let Err(e) = respond.send_response(response, true) {
        tracing::debug!("HBONE: cannot answer {}: {e}", refusal.status());
    }
}
