//! The HBONE client: pooled HTTP/2 connections, one CONNECT stream per
//! proxied TCP connection.
//!
//! Connections are keyed by (source pod, source identity, destination
//! identity, peer address): the pod because its sockets are made in its own
//! network namespace by the caller's [`SocketFactory`], the identities
//! because the connection's TLS presents one and verified the other. Under
//! a key, a stream takes the first connection with a free slot; when all
//! are full a new one is opened. Opening happens under the key's lock, so a
//! burst of first streams to one destination opens one connection, not one
//! each. Each connection has a driver task: it polls the HTTP/2 connection,
//! sends keep-alive PINGs, and closes the connection once it has carried no
//! stream for [`HboneConfig::pool_idle_timeout`].

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::{Method, Request};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpSocket;
use tokio::time::Instant;
use tokio_rustls::TlsConnector;

use super::stream::{H2Stream, keepalive};
use super::{Error, HboneConfig, forwarded_for};
use crate::identity::{CertificateSource, Identity};
use crate::tls;

/// Makes the TCP socket of a new HBONE connection; the node proxy's makes it
/// inside the source pod's network namespace with mark 0x539 (so the pod's
/// redirection rules let it out).
pub trait SocketFactory: Send + Sync {
    fn tcp_socket(&self, peer: SocketAddr) -> io::Result<TcpSocket>;
}

/// Plain sockets in the caller's own network namespace (tests, and a proxy
/// that is its workload's only user).
#[derive(Debug, Default, Clone, Copy)]
pub struct PlainSockets;

impl SocketFactory for PlainSockets {
    fn tcp_socket(&self, peer: SocketAddr) -> io::Result<TcpSocket> {
        if peer.is_ipv4() { TcpSocket::new_v4() } else { TcpSocket::new_v6() }
    }
}

/// One stream to open: who for, to whom, through which peer.
#[derive(Clone)]
pub struct ConnectRequest {
    /// The workload the traffic comes from: its certificate is presented.
    pub source: Identity,
    /// The identity the peer's certificate must carry (the destination
    /// workload's, or the waypoint's), or, for a waypoint, any of its trust
    /// domain.
    pub destination_identity: ExpectedPeer,
    /// The destination node proxy or waypoint, `IP:15008`.
    pub peer: SocketAddr,
    /// The `:authority`: the destination pod's `IP:PORT`, or the service's
    /// `VIP:PORT` when the peer is a waypoint.
    pub authority: SocketAddr,
    /// The original client, sent as `forwarded: for="IP:PORT"`.
    pub source_address: SocketAddr,
    /// Makes the connection's socket (see [`SocketFactory`]).
    pub socket: Arc<dyn SocketFactory>,
    /// Names what `socket` makes sockets for (the source pod's uid): part of
    /// the pool key, so connections are never shared across pods.
    pub source_pod: Arc<str>,
}

/// Whom the peer of an HBONE connection must be.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ExpectedPeer {
    /// Exactly this identity: a node proxy knows the destination workload's.
    Exactly(Identity),
    /// Any workload identity of this trust domain (chained to the mesh root
    /// as always): a waypoint reaches many workloads, and istiod configures
    /// Envoy's waypoint to check no more than that (no SAN match).
    AnyInTrustDomain(String),
}

impl From<Identity> for ExpectedPeer {
    fn from(id: Identity) -> ExpectedPeer {
        ExpectedPeer::Exactly(id)
    }
}

impl ExpectedPeer {
    fn accepts(&self, presented: &str) -> bool {
        match self {
            ExpectedPeer::Exactly(id) => presented == id.to_string(),
            ExpectedPeer::AnyInTrustDomain(td) => presented.parse::<Identity>().is_ok_and(|p| &p.trust_domain == td),
        }
    }
}

impl std::fmt::Display for ExpectedPeer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExpectedPeer::Exactly(id) => id.fmt(f),
            ExpectedPeer::AnyInTrustDomain(td) => write!(f, "an identity of trust domain {td}"),
        }
    }
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct PoolKey {
    source_pod: Arc<str>,
    source: Identity,
    destination: ExpectedPeer,
    peer: SocketAddr,
}

/// The connections of one key; the async lock serializes opening them.
type Connections = Arc<tokio::sync::Mutex<Vec<Arc<PooledConnection>>>>;

/// HBONE's client side; one per node proxy, shared by its workers.
#[derive(Clone)]
pub struct Pool {
    inner: Arc<PoolInner>,
}

struct PoolInner {
    secrets: Arc<dyn CertificateSource>,
    config: HboneConfig,
    connections: Mutex<HashMap<PoolKey, Connections>>,
}

impl PoolInner {
    /// Removes `key`'s emptied `entry` from the map unless a caller is about
    /// to use it: two references (the map's and the caller's) mean none is,
    /// and new ones are only taken under the map's lock, held here.
    fn forget_if_unused(&self, key: &PoolKey, entry: &Connections) {
        let mut connections = self.connections.lock().unwrap_or_else(PoisonError::into_inner);
        if Arc::strong_count(entry) == 2 && connections.get(key).is_some_and(|e| Arc::ptr_eq(e, entry)) {
            connections.remove(key);
        }
    }
}

struct PooledConnection {
    sender: h2::client::SendRequest<Bytes>,
    /// The SPIFFE id the peer presented (checked against the request's
    /// [`ExpectedPeer`]).
    peer_identity: Arc<str>,
    /// Streams at most (ours, capped by the peer's SETTINGS).
    capacity: usize,
    /// Streams reserved or open; changed under the key's lock when taken,
    /// freely when released.
    active: AtomicUsize,
    /// Set (under the key's lock) when the driver has ended or decided to
    /// close: no stream may be reserved any more.
    closed: AtomicBool,
    idle_since: Mutex<Instant>,
}

impl PooledConnection {
    fn release(&self) {
        if self.active.fetch_sub(1, Ordering::AcqRel) == 1 {
            *self.idle_since.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now();
        }
    }
}

/// A reserved stream slot on a connection, freed on drop.
struct Slot(Arc<PooledConnection>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.release();
    }
}

impl Pool {
    pub fn new(secrets: Arc<dyn CertificateSource>, config: HboneConfig) -> Pool {
        Pool { inner: Arc::new(PoolInner { secrets, config, connections: Mutex::default() }) }
    }

    /// Opens a CONNECT stream to `req.authority` through `req.peer`, on a
    /// pooled connection or a new one. Ok only once the peer answered 200;
    /// any other status is [`Error::Status`].
    pub async fn connect(&self, req: ConnectRequest) -> Result<HboneStream, Error> {
        let slot = self.checkout(&req).await?;
        let request = Request::builder()
            .method(Method::CONNECT)
            .uri(req.authority.to_string())
            .header("forwarded", forwarded_for(req.source_address))
            .body(())
            .expect("a CONNECT request to a socket address is valid");
        let h2_err = |source| Error::Http2 { peer: req.peer, source };
        let mut sender = slot.0.sender.clone().ready().await.map_err(h2_err)?;
        let (response, send) = sender.send_request(request, false).map_err(h2_err)?;
        let response = response.await.map_err(h2_err)?;
        if response.status() != hyper::StatusCode::OK {
            return Err(Error::Status { peer: req.peer, authority: req.authority, status: response.status().as_u16() });
        }
        Ok(HboneStream { stream: H2Stream::new(send, response.into_body()), slot })
    }

    /// Open connections in the pool, for tests and the admin view (a key
    /// whose connections are being changed at this moment is not counted).
    pub fn connection_count(&self) -> usize {
        let connections = self.inner.connections.lock().unwrap_or_else(PoisonError::into_inner);
        connections
            .values()
            .filter_map(|c| c.try_lock().ok().map(|c| c.iter().filter(|c| !c.closed.load(Ordering::Acquire)).count()))
            .sum()
    }

    /// A slot on a connection of `req`'s key, opening one if all are full.
    async fn checkout(&self, req: &ConnectRequest) -> Result<Slot, Error> {
        let key = PoolKey {
            source_pod: Arc::clone(&req.source_pod),
            source: req.source.clone(),
            destination: req.destination_identity.clone(),
            peer: req.peer,
        };
        let entry = {
            let mut connections = self.inner.connections.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(connections.entry(key.clone()).or_default())
        };
        let mut conns = entry.lock().await;
        conns.retain(|c| !c.closed.load(Ordering::Acquire));
        for conn in conns.iter() {
            if conn.active.load(Ordering::Acquire) < conn.capacity {
                conn.active.fetch_add(1, Ordering::AcqRel);
                return Ok(Slot(Arc::clone(conn)));
            }
        }
        let conn = match self.open(req).await {
            Ok(conn) => conn,
            Err(e) => {
                let unused = conns.is_empty();
                drop(conns);
                if unused {
                    self.inner.forget_if_unused(&key, &entry);
                }
                return Err(e);
            }
        };
        conn.active.fetch_add(1, Ordering::AcqRel);
        conns.push(Arc::clone(&conn));
        Ok(Slot(conn))
    }

    /// TCP, TLS (checking the peer is `destination_identity`), HTTP/2; then
    /// the driver task.
    async fn open(&self, req: &ConnectRequest) -> Result<Arc<PooledConnection>, Error> {
        let config = &self.inner.config;
        let peer = req.peer;
        let cert = self.inner.secrets.fetch(&req.source).await?;
        let handshake = async {
            let socket = req.socket.tcp_socket(peer).map_err(|source| Error::Connect { peer, source })?;
            let tcp = socket.connect(peer).await.map_err(|source| Error::Connect { peer, source })?;
            let _ = tcp.set_nodelay(true);
            let connector = TlsConnector::from(cert.client_config());
            // An IP as the server name: rustls sends no SNI for it.
            let name = ServerName::IpAddress(peer.ip().into());
            connector.connect(name, tcp).await.map_err(|source| Error::Tls { peer, source })
        };
        let tls = tokio::time::timeout(config.handshake_timeout, handshake)
            .await
            .map_err(|_| Error::Timeout { peer, timeout: config.handshake_timeout })??;
        let presented = tls::server_identity(&tls);
        let Some(peer_identity) = presented.as_deref().filter(|p| req.destination_identity.accepts(p)) else {
            return Err(Error::PeerIdentity { peer, expected: req.destination_identity.clone(), presented });
        };
        let peer_identity = Arc::from(peer_identity);

        let (sender, mut connection) = h2::client::Builder::new()
            .initial_window_size(config.stream_window)
            .initial_connection_window_size(config.connection_window)
            .max_frame_size(config.max_frame_size)
            .initial_max_send_streams(usize::from(config.max_streams_per_connection))
            .max_send_buffer_size(config.stream_window as usize)
            .enable_push(false)
            .handshake::<_, Bytes>(tls)
            .await
            .map_err(|source| Error::Http2 { peer, source })?;
        let capacity = usize::from(config.max_streams_per_connection).min(connection.max_concurrent_send_streams());
        let conn = Arc::new(PooledConnection {
            sender,
            peer_identity,
            capacity: capacity.max(1),
            active: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            idle_since: Mutex::new(Instant::now()),
        });
        let ping_pong = connection.ping_pong().expect("taken once, right after the handshake");
        let key = PoolKey {
            source_pod: Arc::clone(&req.source_pod),
            source: req.source.clone(),
            destination: req.destination_identity.clone(),
            peer,
        };
        let driver = Driver { pool: Arc::downgrade(&self.inner), key, conn: Arc::clone(&conn) };
        let config = config.clone();
        tokio::spawn(async move {
            tokio::select! {
                r = &mut connection => if let Err(e) = r { tracing::debug!(%peer, "HBONE connection ended: {e}") },
                () = keepalive(ping_pong, config.keepalive_interval, config.keepalive_timeout) => {}
                () = driver.idle(config.pool_idle_timeout) => {
                    // Out of the pool, our handle dropped: h2 sends GOAWAY
                    // and ends the connection cleanly (no stream is left).
                    driver.close().await;
                    drop(driver);
                    let closed = tokio::time::timeout(config.keepalive_timeout, connection).await;
                    tracing::debug!(%peer, cleanly = matches!(closed, Ok(Ok(()))), "HBONE connection idle: closed");
                    return;
                }
            }
            driver.close().await;
        });
        Ok(conn)
    }
}

/// What a connection's task needs to close it and leave the pool.
struct Driver {
    pool: Weak<PoolInner>,
    key: PoolKey,
    conn: Arc<PooledConnection>,
}

impl Driver {
    /// Completes once the connection has had no stream for `timeout`.
    async fn idle(&self, timeout: std::time::Duration) {
        loop {
            let idle_since = *self.conn.idle_since.lock().unwrap_or_else(PoisonError::into_inner);
            let busy = self.conn.active.load(Ordering::Acquire) > 0;
            tokio::time::sleep_until(if busy { Instant::now() + timeout } else { idle_since + timeout }).await;
            if self.conn.active.load(Ordering::Acquire) > 0 || idle_since.elapsed() < timeout {
                continue;
            }
            // Decide under the key's lock, where streams are reserved, so
            // none is handed this connection as it closes.
            let Some(entry) = self.entry() else { return };
            let _conns = entry.lock().await;
            let still_idle_since = *self.conn.idle_since.lock().unwrap_or_else(PoisonError::into_inner);
            if self.conn.active.load(Ordering::Acquire) == 0 && still_idle_since.elapsed() >= timeout {
                self.conn.closed.store(true, Ordering::Release);
                return;
            }
        }
    }

    fn entry(&self) -> Option<Connections> {
        let pool = self.pool.upgrade()?;
        let connections = pool.connections.lock().unwrap_or_else(PoisonError::into_inner);
        connections.get(&self.key).cloned()
    }

    /// Marks the connection closed and removes it (and its key, if no other
    /// connection or caller uses it) from the pool.
    async fn close(&self) {
        self.conn.closed.store(true, Ordering::Release);
        let Some(pool) = self.pool.upgrade() else { return };
        let Some(entry) = self.entry() else { return };
        let empty = {
            let mut conns = entry.lock().await;
            conns.retain(|c| !Arc::ptr_eq(c, &self.conn));
            conns.is_empty()
        };
        if empty {
            pool.forget_if_unused(&self.key, &entry);
        }
    }
}

/// One CONNECT stream: the proxied connection's bytes, both ways.
/// `shutdown` sends END_STREAM (a FIN at the far end); EOF on read is the
/// far end's FIN. Dropping it resets the stream if it has not ended and
/// frees its slot on the pooled connection.
pub struct HboneStream {
    stream: H2Stream,
    slot: Slot,
}

impl HboneStream {
    /// The SPIFFE id the peer presented: telemetry's `destination_principal`.
    pub fn peer_identity(&self) -> &str {
        &self.slot.0.peer_identity
    }
}

impl AsyncRead for HboneStream {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for HboneStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
