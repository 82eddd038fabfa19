//! The waypoint's data path, as Istio configures an Envoy waypoint:
//!
//! - HBONE in: a chain whose connection manager accepts CONNECT
//!   (`connect_terminate`) is served by [`hbone::Server`], with the
//!   certificate SDS gave the waypoint (`default`, `ROOTCA`) and the client
//!   checked to be of our trust domain. Each CONNECT is routed by the chain's
//!   routes (`connect_matcher`) to a cluster whose endpoint is an internal
//!   listener (`main_internal`); the listener's chain for the CONNECT
//!   authority (a service `VIP:PORT`) then serves the stream itself, as a
//!   connection whose original destination is that authority: HTTP routing
//!   or tcp_proxy, exactly as on a sidecar's listeners, reported with
//!   `reporter="waypoint"`.
//! - HBONE out: an endpoint that names an internal listener whose chain is a
//!   tunneling tcp_proxy (`connect_originate`) is reached as one HBONE stream
//!   through the worker's [`hbone::Pool`]: to the destination's IP on the
//!   tunnel cluster's port override (15008), authority = the destination,
//!   our SDS identity presented, any identity of our trust domain accepted.
//!   The HTTP pools treat such a stream as they treat a TCP connection.
//!
//! Internal listeners are not run as user-space sockets (Envoy's way): the
//! stream is handed straight to the chain that would read it, so a request
//! through the waypoint is copied no more than through a sidecar.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use hyper::Method;
use tokio::net::TcpStream;

use super::drain::DrainWatch;
use super::lb::cluster_endpoints;
use super::listener::{Downstream, Serve, serve_conn, serve_for};
use super::route::{RequestHead, pick_cluster, select_route};
use super::{ProxyError, Reporter, SecurityPolicy, Shared};
use crate::hbone::{
    self, ConnectRequest, ExpectedPeer, HboneConfig, HboneStream, InboundDecision, InboundHandler, InboundRequest,
    PlainSockets, Refusal, Server,
};
use crate::identity::{self, CertificateSource, Identity, WorkloadCertificate};
use crate::state::{
    DiscoveryType, EndpointAddress, Handler, ListenerKind, ROOT_SECRET, RouteAction, RouteConfig, Secret, State,
    TcpHandler, TransportProtocol, Tunnel, UpstreamTransport, WORKLOAD_SECRET,
};

/// What one worker needs for HBONE: the shared SDS certificate and its own
/// pool of outgoing HBONE connections (per worker, as Envoy's connection
/// pools are, so a request and its tunnel stay on one thread).
pub(crate) struct Waypoint {
    state: Arc<State>,
    certs: Arc<SecretCertificates>,
    pool: hbone::Pool,
    config: HboneConfig,
    /// Sent as the streams' `forwarded: for=`: a pooled upstream connection
    /// carries requests of many clients, so the waypoint names itself.
    source_address: SocketAddr,
    /// The pool's key for the sockets it makes (all in our own namespace).
    source_pod: Arc<str>,
}

impl Waypoint {
    pub(crate) fn new(state: Arc<State>, certs: Arc<SecretCertificates>, source_address: SocketAddr) -> Waypoint {
        let config = HboneConfig::default();
        Waypoint {
            pool: hbone::Pool::new(certs.clone(), config.clone()),
            state,
            certs,
            config,
            source_address,
            source_pod: Arc::from("waypoint"),
        }
    }

    /// The same certificates and state with a pool of its own, for another worker.
    pub(crate) fn for_worker(&self) -> Waypoint {
        Waypoint::new(self.state.clone(), self.certs.clone(), self.source_address)
    }

    /// Opens the HBONE stream an internal endpoint of `listener` stands for,
    /// towards `destination` (see the module doc).
    pub(crate) async fn originate(&self, listener: &str, destination: SocketAddr) -> Result<HboneStream, ProxyError> {
        let peer = {
            let snap = self.state.snapshot();
            let l = snap
                .listeners
                .get(listener)
                .filter(|l| l.kind == ListenerKind::Internal)
                .ok_or_else(|| ProxyError::UnknownListener(listener.to_string()))?;
            let chain = l.select_chain(destination, None, TransportProtocol::RawBuffer, &[]).ok_or_else(|| {
                ProxyError::NoFilterChain { listener: listener.to_string(), port: destination.port() }
            })?;
            let not_tunnel = || ProxyError::NotATunnel(listener.to_string());
            let Handler::Tcp(TcpHandler { tunnel: Some(Tunnel::DownstreamLocalAddress), target, .. }) = &chain.handler
            else {
                return Err(not_tunnel());
            };
            let cluster_name = pick_cluster(target);
            let cluster =
                snap.clusters.get(cluster_name).ok_or_else(|| ProxyError::UnknownCluster(cluster_name.to_string()))?;
            if cluster.discovery != DiscoveryType::OriginalDst {
                return Err(not_tunnel());
            }
            // The tunnel's TLS is HBONE's, with the certificate and roots SDS
            // gave us: the cluster must ask for exactly those.
            let sds_tls = matches!(&cluster.transport, UpstreamTransport::Tls(t)
                if t.certificate_secret.as_deref() == Some(WORKLOAD_SECRET)
                    && t.validation_secret.as_deref() == Some(ROOT_SECRET));
            if !sds_tls {
                return Err(ProxyError::TunnelTls(cluster_name.to_string()));
            }
            SocketAddr::new(destination.ip(), cluster.original_dst_port.unwrap_or(destination.port()))
        };
        let own = self.certs.current()?;
        let request = ConnectRequest {
            source: own.identity().clone(),
            destination_identity: ExpectedPeer::AnyInTrustDomain(own.identity().trust_domain.clone()),
            peer,
            authority: destination,
            source_address: self.source_address,
            socket: Arc::new(PlainSockets),
            source_pod: Arc::clone(&self.source_pod),
        };
        Ok(self.pool.connect(request).await?)
    }
}

/// Terminates HBONE on an accepted connection of a CONNECT chain whose
/// routes are `routes`, until the client closes it, or, once the drain
/// starts, until its open streams have ended (GOAWAY first).
pub(super) async fn terminate(
    shared: Arc<Shared>,
    routes: Arc<RouteConfig>,
    stream: TcpStream,
    drain: &DrainWatch,
) -> Result<(), ProxyError> {
    let waypoint = &shared.waypoint;
    let own = waypoint.certs.current()?;
    let server = Server::new(waypoint.certs.clone(), own.identity().clone(), waypoint.config.clone());
    let handler = Arc::new(Terminate { shared: shared.clone(), routes, drain: drain.clone() });
    Ok(server.serve(stream, handler, drain.draining()).await?)
}

/// Where each CONNECT stream of one HBONE connection goes.
struct Terminate {
    shared: Arc<Shared>,
    routes: Arc<RouteConfig>,
    drain: DrainWatch,
}

impl InboundHandler for Terminate {
    fn handle(&self, request: &InboundRequest) -> Pin<Box<dyn Future<Output = InboundDecision> + Send + '_>> {
        let decision = self.decide(request);
        Box::pin(async move { decision })
    }
}

impl Terminate {
    /// Routes the CONNECT, then picks the internal listener's chain for its
    /// authority. A destination the waypoint serves no chain for is 503
    /// before the stream is accepted (Envoy accepts it, then closes the
    /// internal connection at once): the client learns why, as from ztunnel
    /// for an upstream it cannot reach.
    fn decide(&self, request: &InboundRequest) -> InboundDecision {
        let authority = request.authority.to_string();
        let head = RequestHead {
            authority: &authority,
            path: "",
            method: &Method::CONNECT,
            headers: &request.headers,
            scheme: "https",
        };
        let Some(route) = select_route(&self.routes, &head) else {
            tracing::debug!(%authority, "HBONE: no CONNECT route");
            return InboundDecision::Refuse(Refusal::BadRequest);
        };
        let RouteAction::Forward(forward) = &route.action else {
            return InboundDecision::Refuse(Refusal::BadRequest);
        };
        if !forward.terminate_connect {
            tracing::debug!(%authority, "HBONE: the CONNECT route does not terminate (forwarding CONNECT is not supported)");
            return InboundDecision::Refuse(Refusal::BadRequest);
        }
        let snap = self.shared.state.snapshot();
        let cluster_name = pick_cluster(&forward.target);
        let listener = snap.clusters.get(cluster_name).and_then(|c| {
            cluster_endpoints(&snap, c).iter().find_map(|e| match &e.address {
                EndpointAddress::Internal { listener, .. } => snap.listeners.get(listener),
                _ => None,
            })
        });
        let Some(listener) = listener.filter(|l| l.kind == ListenerKind::Internal) else {
            tracing::debug!(cluster = cluster_name, "HBONE: the CONNECT cluster has no internal listener endpoint");
            return InboundDecision::Refuse(Refusal::UpstreamUnavailable);
        };
        let Some(chain) = listener.select_chain(request.authority, None, TransportProtocol::RawBuffer, &[]) else {
            tracing::debug!(%authority, listener = %listener.name, "HBONE: no chain for the destination");
            return InboundDecision::Refuse(Refusal::UpstreamUnavailable);
        };
        let serve = serve_for(listener.name.clone(), chain);
        if matches!(serve, Serve::HboneTerminate { .. }) {
            // HBONE inside HBONE: a loop in the config, not a destination.
            return InboundDecision::Refuse(Refusal::BadRequest);
        }
        drop(snap);
        let downstream = Downstream {
            reporter: Reporter::Waypoint,
            peer: request.forwarded_for.unwrap_or(request.peer_address),
            original_dst: request.authority,
            security: SecurityPolicy::MutualTls,
            peer_principal: Some(request.peer_identity.to_string()),
        };
        let (shared, drain) = (self.shared.clone(), self.drain.clone());
        InboundDecision::Serve(Box::new(move |stream| {
            Box::pin(async move { serve_conn(shared, serve, downstream, stream, &drain).await })
        }))
    }
}

/// The waypoint's certificate from its `default` and `ROOTCA` secrets (sent
/// by SDS, or installed from the CA given `--ca-address`), as HBONE's
/// configs; rebuilt when the secrets change, so new connections use the new
/// certificate and open ones keep theirs.
pub(crate) struct SecretCertificates {
    state: Arc<State>,
    built: Mutex<Option<Built>>,
}

/// The secrets a certificate was built from (compared by `Arc`, as the xDS
/// store makes a new one only for a secret that changed).
struct Built {
    certificate: Arc<Secret>,
    roots: Arc<Secret>,
    built: Arc<WorkloadCertificate>,
}

impl SecretCertificates {
    pub(crate) fn new(state: Arc<State>) -> SecretCertificates {
        SecretCertificates { state, built: Mutex::default() }
    }

    /// The certificate of the current secrets.
    pub(crate) fn current(&self) -> Result<Arc<WorkloadCertificate>, identity::Error> {
        let snap = self.state.snapshot();
        let missing = |why: &str| identity::Error::NoCertificateSecret(why.to_string());
        let (Some(certificate), Some(roots)) = (snap.secrets.get(WORKLOAD_SECRET), snap.secrets.get(ROOT_SECRET))
        else {
            return Err(missing("the default and ROOTCA secrets have not both arrived"));
        };
        let mut built = self.built.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(b) = built.as_ref()
            && Arc::ptr_eq(&b.certificate, certificate)
            && Arc::ptr_eq(&b.roots, roots)
        {
            return Ok(Arc::clone(&b.built));
        }
        let (Secret::Certificate(c), Secret::Validation(v)) = (&**certificate, &**roots) else {
            return Err(missing("default is not a certificate or ROOTCA is not a validation context"));
        };
        let cert = Arc::new(WorkloadCertificate::from_secrets(c, v)?);
        *built =
            Some(Built { certificate: Arc::clone(certificate), roots: Arc::clone(roots), built: Arc::clone(&cert) });
        Ok(cert)
    }
}

impl CertificateSource for SecretCertificates {
    fn fetch<'a>(
        &'a self,
        id: &'a Identity,
    ) -> Pin<Box<dyn Future<Output = Result<Arc<WorkloadCertificate>, identity::Error>> + Send + 'a>> {
        let current = self.current().and_then(|cert| match cert.identity() == id {
            true => Ok(cert),
            // Rotated to another identity between the caller's look and this one.
            false => {
                Err(identity::Error::WrongIdentity { requested: id.clone(), presented: cert.identity().to_string() })
            }
        });
        Box::pin(async move { current })
    }
}
