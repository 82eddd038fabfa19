//! Accepting connections and choosing the filter chain that serves each one.
//!
//! With iptables the proxy binds 15001 (outbound) and 15006 (inbound) and
//! reads each connection's original destination from the socket; with
//! explicit `--listen` bindings it binds the given addresses and treats each
//! connection as if it had been redirected to the named xDS listener with the
//! given destination port. Outbound connections are dispatched by
//! destination port to the per-port listener (`0.0.0.0_PORT`), falling back to
//! virtualOutbound's own chain (passthrough or blackhole).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};

use super::drain::{DrainWatch, ListenersOpen};
use super::http::{HttpConn, Routes};
use super::tcp::TcpConn;
use super::workers::Handoff;
use super::{ProxyError, Reporter, SecurityPolicy, Shared};
use crate::config::{CaptureMode, Config};
use crate::state::{
    DownstreamTls, FilterChain, Handler, HttpHandler, Listener, ListenerKind, RouteConfig, RouteSource, Snapshot,
    TrafficDirection, TransportProtocol,
};
use crate::tls::{self, Detected};

const OUTBOUND_CAPTURE_PORT: u16 = 15001;
const INBOUND_CAPTURE_PORT: u16 = 15006;
/// A client that has not finished its TLS handshake in this long is dropped
/// (Envoy's default transport_socket_connect_timeout is 10 s on listeners).
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Which xDS listener serves a bound socket.
#[derive(Debug, Clone)]
pub enum ListenerTarget {
    /// A capture listener: the one of this kind in the config; the original
    /// destination comes from SO_ORIGINAL_DST.
    Capture(ListenerKind),
    /// An explicit binding: the listener by name, and the destination port to
    /// assume (None: the listener's own port).
    Named { name: String, dest_port: Option<u16> },
}

/// A bound socket and the listener that serves it.
pub struct BoundListener {
    socket: TcpListener,
    target: ListenerTarget,
}

impl BoundListener {
    pub fn new(socket: TcpListener, target: ListenerTarget) -> BoundListener {
        BoundListener { socket, target }
    }
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.socket.local_addr()
    }
}

async fn bind(address: SocketAddr, target: ListenerTarget) -> Result<BoundListener, ProxyError> {
    let socket = TcpListener::bind(address).await.map_err(|source| ProxyError::Bind { address, source })?;
    Ok(BoundListener { socket, target })
}

pub(crate) async fn bind_all(config: &Config) -> Result<Vec<BoundListener>, ProxyError> {
    match config.capture_mode {
        CaptureMode::Iptables => {
            let any = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
            Ok(vec![
                bind(
                    SocketAddr::new(any, OUTBOUND_CAPTURE_PORT),
                    ListenerTarget::Capture(ListenerKind::VirtualOutbound),
                )
                .await?,
                bind(SocketAddr::new(any, INBOUND_CAPTURE_PORT), ListenerTarget::Capture(ListenerKind::VirtualInbound))
                    .await?,
            ])
        }
        CaptureMode::None => {
            let mut out = Vec::new();
            for b in &config.listen {
                let target = ListenerTarget::Named { name: b.listener.clone(), dest_port: b.dest_port };
                out.push(bind(b.local, target).await?);
            }
            Ok(out)
        }
    }
}

/// Accepts on every listener until the drain starts, then closes them; each
/// connection is served here, or, given a handoff, by the worker it picks.
/// `open` is dropped once every listener's socket is closed.
pub(crate) async fn serve_all(
    shared: Arc<Shared>,
    listeners: Vec<BoundListener>,
    handoff: Option<Arc<Handoff>>,
    open: ListenersOpen,
) {
    let drain = open.watch().for_this_runtime();
    let loops: Vec<_> = listeners
        .into_iter()
        .map(|l| tokio::spawn(accept_loop(shared.clone(), l, handoff.clone(), drain.clone())))
        .collect();
    drain.draining().await;
    for l in loops {
        l.abort();
        // An aborted task's future, and so its socket, is dropped before its
        // handle resolves.
        let _ = l.await;
    }
    drop(open);
}

async fn accept_loop(shared: Arc<Shared>, l: BoundListener, handoff: Option<Arc<Handoff>>, drain: DrainWatch) {
    let target = Arc::new(l.target);
    loop {
        match l.socket.accept().await {
            Ok((stream, peer)) => {
                let _ = stream.set_nodelay(true);
                let counted = drain.connection();
                match &handoff {
                    Some(h) => h.dispatch(stream, peer, target.clone(), counted),
                    None => spawn_connection(shared.clone(), target.clone(), stream, peer, &drain, counted),
                }
            }
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Serves one accepted connection on its own task of the current runtime
/// until it ends or the drain is over; `guard` is dropped when it ends.
/// `drain` is this runtime's watch.
pub(crate) fn spawn_connection<G: Send + 'static>(
    shared: Arc<Shared>,
    target: Arc<ListenerTarget>,
    stream: TcpStream,
    peer: SocketAddr,
    drain: &DrainWatch,
    guard: G,
) {
    let drain = drain.clone();
    tokio::spawn(async move {
        tokio::select! {
            handled = handle(shared, &target, stream, peer, &drain) => if let Err(e) = handled {
                tracing::debug!(%peer, error = %e, "connection closed");
            },
            _ = drain.stopped() => tracing::debug!(%peer, "connection closed: the drain period is over"),
        }
        drop(guard);
    });
}

/// What the chain selection decided, copied out of the snapshot.
pub(super) enum Serve {
    Http {
        listener: String,
        routes: Routes,
        fault_filter: bool,
        idle_timeout: Option<Duration>,
    },
    Tcp {
        listener: String,
        target: crate::state::ClusterTarget,
        idle_timeout: Option<Duration>,
    },
    /// A connection manager that accepts CONNECT, with inline routes: a
    /// waypoint's HBONE termination (see `waypoint`), which does its own TLS.
    HboneTerminate {
        routes: Arc<RouteConfig>,
    },
}

/// Who is on the other end of a downstream connection, once TLS (if any) is
/// done, and which side of the workload the connection is on.
pub(super) struct Downstream {
    pub reporter: Reporter,
    pub peer: SocketAddr,
    pub original_dst: SocketAddr,
    pub security: SecurityPolicy,
    pub peer_principal: Option<String>,
}

async fn handle(
    shared: Arc<Shared>,
    target: &ListenerTarget,
    stream: TcpStream,
    peer: SocketAddr,
    drain: &DrainWatch,
) -> Result<(), ProxyError> {
    let snap = shared.state.snapshot();
    let (listener, original_dst) = match target {
        ListenerTarget::Capture(kind) => {
            let dst = super::original_dst::original_dst(&stream).map_err(ProxyError::OriginalDst)?;
            let l = snap.listeners.values().find(|l| l.kind == *kind).cloned();
            (l.ok_or_else(|| ProxyError::UnknownListener(format!("{kind:?}")))?, dst)
        }
        ListenerTarget::Named { name, dest_port } => {
            let l = snap.listeners.get(name).cloned().ok_or_else(|| ProxyError::UnknownListener(name.clone()))?;
            let dst = explicit_dst(&shared.config, &l, *dest_port);
            (l, dst)
        }
    };
    let transport = if listener.tls_inspector {
        match tls::detect(&stream, tls::DETECT_TIMEOUT).await? {
            Detected::Tls => TransportProtocol::Tls,
            Detected::Plaintext => TransportProtocol::RawBuffer,
            Detected::Closed => return Ok(()),
        }
    } else {
        TransportProtocol::RawBuffer
    };
    let reporter = match listener.kind {
        ListenerKind::VirtualInbound => Reporter::Destination,
        ListenerKind::Bound if listener.direction == TrafficDirection::Inbound => Reporter::Destination,
        _ => Reporter::Source,
    };
    let (chain_name, serve, tls) = select(&snap, &listener, original_dst, transport)?;
    if let Serve::HboneTerminate { routes } = serve {
        drop(snap);
        return super::waypoint::terminate(shared, routes, stream, drain).await;
    }
    let server_tls = tls
        .map(|t| shared.tls.for_snapshot(&snap).server_for(&t))
        .transpose()
        .map_err(|source| ProxyError::TlsConfig { chain: chain_name, source })?;
    drop(snap);
    let Some(server_tls) = server_tls else {
        let plain = Downstream { reporter, peer, original_dst, security: SecurityPolicy::None, peer_principal: None };
        serve_conn(shared, serve, plain, stream, drain).await;
        return Ok(());
    };
    let accept = tokio_rustls::TlsAcceptor::from(server_tls).accept(stream);
    let stream = match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, accept).await {
        Ok(Ok(s)) => s,
        Ok(Err(source)) => return Err(ProxyError::TlsHandshake { peer, source }),
        Err(_) => {
            let source = std::io::Error::new(std::io::ErrorKind::TimedOut, "no complete handshake in time");
            return Err(ProxyError::TlsHandshake { peer, source });
        }
    };
    let peer_principal = tls::peer_identity(&stream);
    let security = if peer_principal.is_some() { SecurityPolicy::MutualTls } else { SecurityPolicy::None };
    let downstream = Downstream { reporter, peer, original_dst, security, peer_principal };
    serve_conn(shared, serve, downstream, stream, drain).await;
    Ok(())
}

pub(super) async fn serve_conn<IO>(
    shared: Arc<Shared>,
    serve: Serve,
    downstream: Downstream,
    io: IO,
    drain: &DrainWatch,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let Downstream { reporter, peer, original_dst, security, peer_principal } = downstream;
    match serve {
        Serve::Http { listener, routes, fault_filter, idle_timeout } => {
            let conn = HttpConn {
                shared,
                reporter,
                listener: listener.into(),
                routes,
                fault_filter,
                peer,
                original_dst,
                security,
                peer_principal,
            };
            super::http::serve(Arc::new(conn), io, idle_timeout, drain).await;
        }
        Serve::Tcp { listener, target, idle_timeout } => {
            let conn = TcpConn { shared, reporter, listener, peer, original_dst, security, peer_principal };
            super::tcp::proxy(conn, &target, io, idle_timeout).await;
        }
        Serve::HboneTerminate { .. } => {
            tracing::debug!(%peer, "HBONE reached a chain that terminates HBONE again: closed");
        }
    }
}

/// The original destination an explicit binding stands for: the listener's
/// own IP when it has one, the instance IP for inbound, loopback otherwise.
fn explicit_dst(config: &Config, l: &Listener, dest_port: Option<u16>) -> SocketAddr {
    let port = dest_port.unwrap_or(l.address.port());
    let ip = if !l.address.ip().is_unspecified() && l.kind == ListenerKind::Outbound {
        l.address.ip()
    } else if l.kind == ListenerKind::VirtualInbound || l.direction == TrafficDirection::Inbound {
        config.node.instance_ips.first().copied().unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))
    } else {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    };
    SocketAddr::new(ip, port)
}

/// The chain that serves a connection: its name, what it does, and the TLS it
/// terminates first, if any.
fn select(
    snap: &Snapshot,
    listener: &Listener,
    dst: SocketAddr,
    transport: TransportProtocol,
) -> Result<(String, Serve, Option<DownstreamTls>), ProxyError> {
    fn chain_of(l: &Listener, dst: SocketAddr, t: TransportProtocol) -> Option<(String, &FilterChain)> {
        l.select_chain(dst, None, t, &[]).map(|c| (l.name.clone(), c))
    }
    let chosen = match listener.kind {
        ListenerKind::VirtualOutbound => outbound_listener(snap, dst)
            .and_then(|l| chain_of(l, dst, transport))
            .or_else(|| chain_of(listener, dst, transport)),
        ListenerKind::Outbound => chain_of(listener, dst, transport).or_else(|| {
            snap.listeners
                .values()
                .find(|l| l.kind == ListenerKind::VirtualOutbound)
                .and_then(|l| chain_of(l, dst, transport))
        }),
        ListenerKind::VirtualInbound | ListenerKind::Bound | ListenerKind::Internal => {
            chain_of(listener, dst, transport)
        }
    };
    let Some((name, chain)) = chosen else {
        return Err(ProxyError::NoFilterChain { listener: listener.name.clone(), port: dst.port() });
    };
    Ok((chain.name.clone(), serve_for(name, chain), chain.tls.clone()))
}

pub(super) fn serve_for(listener: String, chain: &FilterChain) -> Serve {
    match &chain.handler {
        Handler::Http(HttpHandler { connect: true, routes: RouteSource::Inline(rc), .. }) => {
            Serve::HboneTerminate { routes: rc.clone() }
        }
        Handler::Http(h) => Serve::Http {
            listener,
            routes: match &h.routes {
                RouteSource::Rds(name) => Routes::Rds(name.clone()),
                RouteSource::Inline(rc) => Routes::Inline(rc.clone()),
            },
            fault_filter: h.fault_filter,
            idle_timeout: h.idle_timeout,
        },
        Handler::Tcp(t) => Serve::Tcp { listener, target: t.target.clone(), idle_timeout: t.idle_timeout },
    }
}

/// The per-port outbound listener for a destination: one bound to the
/// destination IP itself (TCP services with a VIP) before `0.0.0.0_PORT`.
fn outbound_listener(snap: &Snapshot, dst: SocketAddr) -> Option<&Listener> {
    let per_port =
        || snap.listeners.values().filter(|l| l.kind == ListenerKind::Outbound && l.address.port() == dst.port());
    per_port()
        .find(|l| l.address.ip() == dst.ip())
        .or_else(|| per_port().find(|l| l.address.ip().is_unspecified()))
        .map(|l| l.as_ref())
}
