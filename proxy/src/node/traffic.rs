//! The node proxy's data path for one pod: outbound (15001) to HBONE or
//! plain TCP, inbound HBONE (15008) and plaintext inbound (15006), each
//! authorized against the destination workload's policies and counted in
//! Istio's TCP metrics with the labels ztunnel gives them.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use super::pods::Pod;
use super::rbac::{self, Connection};
use super::state::{Service, Tunnel, Waypoint, Workload, WorkloadSnapshot, WorkloadState};
use crate::hbone::{
    self, ConnectRequest, HboneConfig, InboundDecision, InboundHandler, InboundRequest, Refusal, StreamOutcome,
};
use crate::identity::{Identity, SecretManager};
use crate::proxy::original_dst::original_dst;
use crate::telemetry::{
    ConnectionFlag, Peer, Reporter, ResponseFlags, SecurityPolicy, ServiceName, TcpRecord, Telemetry, WorkloadLabels,
    ZtunnelLabels,
};

/// What every pod's listeners share.
pub struct NodeContext {
    pub state: Arc<WorkloadState>,
    pub secrets: Arc<SecretManager>,
    pub pool: hbone::Pool,
    pub hbone: HboneConfig,
    pub telemetry: Arc<Telemetry>,
    pub trust_domain: String,
}

/// Where an outbound connection goes.
#[derive(Debug, PartialEq, Eq)]
pub enum Route {
    /// HBONE through `peer` (the destination's node proxy, or a waypoint).
    Hbone { peer: SocketAddr, authority: SocketAddr, identity: Identity },
    /// Plain TCP to the address.
    Direct(SocketAddr),
}

/// The destination of an outbound connection, as workload discovery knows it.
pub struct Destination {
    pub route: Route,
    pub workload: Option<Arc<Workload>>,
    pub service: Option<Arc<Service>>,
}

/// Decides where a connection to `dst` goes: a service VIP picks one of its
/// healthy endpoints (at random); a workload address is that workload; a
/// destination that uses HBONE is reached through its waypoint if it (or
/// its service) has one, else through its node proxy on 15008; anything
/// else (outside the mesh) passes through.
pub fn route(snap: &WorkloadSnapshot, dst: SocketAddr) -> Result<Destination, String> {
    let service = snap.service_by_vip(dst.ip()).cloned();
    let (workload, port) = match &service {
        Some(svc) => {
            let (w, port) = pick_endpoint(snap, svc, dst.port())?;
            (Some(w), port)
        }
        None => (snap.workload_by_address(dst.ip()).cloned(), dst.port()),
    };
    let Some(w) = workload.clone().filter(|w| w.tunnel == Tunnel::Hbone) else {
        let target = match &workload {
            Some(w) => SocketAddr::new(w.addresses.first().copied().unwrap_or(dst.ip()), port),
            None => dst,
        };
        return Ok(Destination { route: Route::Direct(target), workload, service });
    };
    let waypoint = service.as_ref().and_then(|s| s.waypoint.clone()).or_else(|| w.waypoint.clone());
    let route = match waypoint {
        Some(wp) => {
            let (peer, identity) = waypoint_peer(snap, &wp)?;
            Route::Hbone { peer, authority: dst, identity }
        }
        None => {
            let ip = w.addresses.first().copied().ok_or_else(|| format!("workload {} has no address", w.uid))?;
            Route::Hbone {
                peer: SocketAddr::new(ip, hbone::HBONE_PORT),
                authority: SocketAddr::new(ip, port),
                identity: w.identity(),
            }
        }
    };
    Ok(Destination { route, workload: Some(w), service })
}

/// One of a service's healthy endpoints for `service_port` (at random): the
/// workload and the port to connect to on it.
fn pick_endpoint(snap: &WorkloadSnapshot, svc: &Service, service_port: u16) -> Result<(Arc<Workload>, u16), String> {
    let eps = snap.endpoints_for(svc, service_port);
    if eps.is_empty() {
        return Err(format!("service {} has no healthy endpoint for port {service_port}", svc.key()));
    }
    Ok(eps[fastrand::usize(..eps.len())].clone())
}

/// The HBONE peer of a waypoint and the identity it must prove, as ztunnel
/// resolves it: an address that is a workload's is that workload (the lab
/// gives the waypoint's pod IP); a service (by VIP, as a cluster's control
/// plane gives the waypoint Service's cluster IP, or by name) is one of its
/// healthy endpoints for the waypoint port, on the port it maps to. HBONE
/// goes to the pod, not the VIP: nothing in between would balance it.
fn waypoint_peer(snap: &WorkloadSnapshot, wp: &Waypoint) -> Result<(SocketAddr, Identity), String> {
    let (service, port) = match wp {
        Waypoint::Address(a) => {
            if let Some(w) = snap.workload_by_address(a.ip()) {
                return Ok((*a, w.identity()));
            }
            let service = snap
                .service_by_vip(a.ip())
                .ok_or_else(|| format!("waypoint {a} is not a known workload or service"))?;
            (service, a.port())
        }
        Waypoint::Service { service, port } => {
            let found = snap.services.get(service).ok_or_else(|| format!("waypoint service {service} is not known"))?;
            (found, *port)
        }
    };
    let (w, target) = pick_endpoint(snap, service, port).map_err(|e| format!("waypoint: {e}"))?;
    let ip = w.addresses.first().copied().ok_or_else(|| format!("waypoint workload {} has no address", w.uid))?;
    Ok((SocketAddr::new(ip, target), w.identity()))
}

/// A workload as ztunnel labels it: its `workload_name`, namespace and
/// `principal`, which is the identity the connection proved (the source's
/// certificate) or, for a destination, the workload's own; unknown otherwise.
fn peer_of(w: Option<&Workload>, principal: Option<&Identity>) -> Peer {
    let principal = principal.map(Identity::to_string).unwrap_or_default();
    match w {
        Some(w) => Peer::new(&w.workload_name, &w.namespace, &principal),
        None => Peer::new("", "", &principal),
    }
}

fn workload_labels(w: Option<&Workload>) -> Arc<WorkloadLabels> {
    Arc::new(w.map_or_else(WorkloadLabels::unknown, |w| {
        WorkloadLabels::new(&w.canonical_name, &w.canonical_revision, &w.cluster_id)
    }))
}

fn service_name(s: Option<&Service>) -> ServiceName {
    s.map_or_else(ServiceName::unknown, |s| ServiceName::from_host(&s.hostname))
}

/// One connection's record, labelled as ztunnel labels it.
struct Labels<'a> {
    reporter: Reporter,
    source: Option<&'a Workload>,
    source_principal: Option<&'a Identity>,
    destination: Option<&'a Workload>,
    service: Option<&'a Service>,
    security: SecurityPolicy,
}

impl Labels<'_> {
    fn record(self) -> TcpRecord {
        let destination_principal = self.destination.map(Workload::identity);
        TcpRecord {
            reporter: self.reporter,
            source: peer_of(self.source, self.source_principal),
            destination: peer_of(self.destination, destination_principal.as_ref()),
            destination_service: service_name(self.service),
            response_flags: ResponseFlags::NONE,
            security: self.security,
            ztunnel: Some(ZtunnelLabels {
                source: workload_labels(self.source),
                destination: workload_labels(self.destination),
                flag: ConnectionFlag::None,
            }),
        }
    }
}

/// ztunnel's flag for an HBONE connect that failed.
fn hbone_flag(e: &hbone::Error) -> ConnectionFlag {
    match e {
        hbone::Error::Tls { .. } => ConnectionFlag::TlsFailure,
        hbone::Error::Http2 { .. } => ConnectionFlag::Http2HandshakeFailure,
        _ => ConnectionFlag::ConnectFailure,
    }
}

/// The service an inbound connection to `port` reached: the first of the
/// workload's services with that target port (ztunnel's guess).
fn inbound_service(snap: &WorkloadSnapshot, w: Option<&Workload>, port: u16) -> Option<Arc<Service>> {
    let w = w?;
    let (key, _) = w.services.iter().find(|(_, ports)| {
        ports.iter().any(|p| if p.target_port == 0 { p.service_port == port } else { p.target_port == port })
    })?;
    snap.services.get(key).cloned()
}

/// 15001: a connection from the pod's app.
pub async fn outbound(ctx: Arc<NodeContext>, pod: Arc<Pod>, mut app: TcpStream) {
    let (Ok(dst), Ok(src)) = (original_dst(&app), app.peer_addr()) else {
        tracing::debug!("outbound: no original destination");
        return;
    };
    let snap = ctx.state.snapshot();
    let source = snap.workloads.get(&*pod.uid).cloned();
    let dest = match route(&snap, dst) {
        Ok(d) => d,
        // A failed connection is logged as a warning, as ztunnel's access
        // log does: the app only sees its connection closed.
        Err(e) => {
            tracing::warn!(%dst, error = %e, "outbound: no route");
            return;
        }
    };
    let hbone = matches!(dest.route, Route::Hbone { .. });
    // Over HBONE the pod's certificate proves who it is; in plain TCP nothing does.
    let record = Labels {
        reporter: Reporter::Source,
        source: source.as_deref(),
        source_principal: hbone.then_some(&pod.identity),
        destination: dest.workload.as_deref(),
        service: dest.service.as_deref(),
        security: if hbone { SecurityPolicy::MutualTls } else { SecurityPolicy::Unknown },
    }
    .record();
    match dest.route {
        Route::Hbone { peer, authority, identity } => {
            let req = ConnectRequest {
                source: pod.identity.clone(),
                destination_identity: identity.into(),
                peer,
                authority,
                source_address: src,
                socket: pod.clone(),
                source_pod: pod.uid.clone(),
            };
            match ctx.pool.connect(req).await {
                Ok(mut upstream) => copy(&ctx.telemetry, &record, &mut app, &mut upstream).await,
                Err(e) => {
                    tracing::warn!(%dst, %peer, error = %e, "outbound: HBONE connect failed");
                    failed(&ctx.telemetry, &record, hbone_flag(&e));
                }
            }
        }
        Route::Direct(target) => match connect_in(&pod, target).await {
            Ok(mut upstream) => copy(&ctx.telemetry, &record, &mut app, &mut upstream).await,
            Err(e) => {
                tracing::warn!(%target, error = %e, "outbound: connect failed");
                failed(&ctx.telemetry, &record, ConnectionFlag::ConnectFailure);
            }
        },
    }
}

/// A connection from inside the pod's namespace, with the mark.
async fn connect_in(pod: &Pod, target: SocketAddr) -> std::io::Result<TcpStream> {
    let s = pod.netns.tcp_socket(target.is_ipv4())?;
    let tcp = s.connect(target).await?;
    let _ = tcp.set_nodelay(true);
    Ok(tcp)
}

/// Copies both ways with half-close and reports the connection.
async fn copy<A, B>(telemetry: &Telemetry, record: &TcpRecord, downstream: &mut A, upstream: &mut B)
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    telemetry.tcp_opened(record);
    let (received, sent) = match tokio::io::copy_bidirectional(downstream, upstream).await {
        Ok(counts) => counts,
        Err(e) => {
            tracing::debug!(error = %e, "connection ended with an error");
            (0, 0)
        }
    };
    telemetry.tcp_closed(record, sent, received);
}

/// A connection that failed after it was counted as opened (as ztunnel
/// counts it: opened, then closed and failed with the reason's flag).
fn failed(telemetry: &Telemetry, record: &TcpRecord, flag: ConnectionFlag) {
    telemetry.tcp_opened(record);
    closed_with(telemetry, record, flag);
}

fn closed_with(telemetry: &Telemetry, record: &TcpRecord, flag: ConnectionFlag) {
    let mut closed = record.clone();
    if let Some(z) = &mut closed.ztunnel {
        z.flag = flag;
    }
    telemetry.tcp_closed(&closed, 0, 0);
}

/// The pod's own workload from discovery, and whether `ip` is one of its addresses.
fn pod_workload(ctx: &NodeContext, pod: &Pod) -> Option<Arc<Workload>> {
    ctx.state.snapshot().workloads.get(&*pod.uid).cloned()
}

fn authorize(ctx: &NodeContext, w: Option<&Workload>, conn: &Connection<'_>) -> Result<(), rbac::Denied> {
    let snap = ctx.state.snapshot();
    match w {
        Some(w) => rbac::authorize(snap.policies_for(w), conn),
        // A pod workload discovery does not know yet: only global policies.
        None => rbac::authorize(snap.policies.values().map(|p| &**p).filter(|p| p.scope == rbac::Scope::Global), conn),
    }
}

/// 15006: plaintext to the pod (PERMISSIVE); STRICT's policy closes it.
pub async fn inbound_plaintext(ctx: Arc<NodeContext>, pod: Arc<Pod>, mut client: TcpStream) {
    let (Ok(dst), Ok(src)) = (original_dst(&client), client.peer_addr()) else { return };
    let w = pod_workload(&ctx, &pod);
    let conn = Connection { source_identity: None, source: src, destination: dst };
    let snap = ctx.state.snapshot();
    let service = inbound_service(&snap, w.as_deref(), dst.port());
    // Counted before policy is checked, as ztunnel does; no identity in plain text.
    let record = Labels {
        reporter: Reporter::Destination,
        source: snap.workload_by_address(src.ip()).map(|s| &**s),
        source_principal: None,
        destination: w.as_deref(),
        service: service.as_deref(),
        security: SecurityPolicy::Unknown,
    }
    .record();
    if let Err(denied) = authorize(&ctx, w.as_deref(), &conn) {
        tracing::debug!(%src, %dst, %denied, "plaintext inbound refused");
        return failed(&ctx.telemetry, &record, ConnectionFlag::Denied);
    }
    match connect_in(&pod, dst).await {
        Ok(mut app) => copy(&ctx.telemetry, &record, &mut client, &mut app).await,
        Err(e) => {
            tracing::debug!(%dst, error = %e, "plaintext inbound: the app did not answer");
            failed(&ctx.telemetry, &record, ConnectionFlag::ConnectFailure);
        }
    }
}

/// 15008's handler for one pod.
pub fn hbone_handler(ctx: Arc<NodeContext>, pod: Arc<Pod>) -> Arc<dyn InboundHandler> {
    Arc::new(PodInbound { ctx, pod })
}

struct PodInbound {
    ctx: Arc<NodeContext>,
    pod: Arc<Pod>,
}

impl PodInbound {
    fn record(&self, req: &InboundRequest) -> TcpRecord {
        let snap = self.ctx.state.snapshot();
        let source_ip: Option<IpAddr> = req.forwarded_for.map(|a| a.ip());
        let source =
            source_ip.and_then(|ip| snap.workload_by_address(ip)).filter(|w| w.identity() == req.peer_identity);
        let w = snap.workloads.get(&*self.pod.uid).cloned();
        let service = inbound_service(&snap, w.as_deref(), req.authority.port());
        Labels {
            reporter: Reporter::Destination,
            source: source.map(|w| &**w),
            source_principal: Some(&req.peer_identity),
            destination: w.as_deref(),
            service: service.as_deref(),
            security: SecurityPolicy::MutualTls,
        }
        .record()
    }

    async fn decide(&self, req: &InboundRequest) -> InboundDecision {
        let w = pod_workload(&self.ctx, &self.pod);
        // The authority must be this pod: the address the connection came
        // in on, or one workload discovery gives the pod.
        let ours = req.authority.ip() == req.local_address.ip()
            || w.as_ref().is_some_and(|w| w.addresses.contains(&req.authority.ip()));
        if !ours {
            tracing::debug!(authority = %req.authority, pod = %self.pod.uid, "HBONE: authority is not this pod");
            return InboundDecision::Refuse(Refusal::BadRequest);
        }
        let source = req.forwarded_for.unwrap_or(req.peer_address);
        let conn = Connection { source_identity: Some(&req.peer_identity), source, destination: req.authority };
        // Counted as opened before policy is checked, as ztunnel does.
        let record = self.record(req);
        let telemetry = &self.ctx.telemetry;
        if let Err(denied) = authorize(&self.ctx, w.as_deref(), &conn) {
            tracing::debug!(peer = %req.peer_identity, authority = %req.authority, %denied, "HBONE: denied");
            failed(telemetry, &record, ConnectionFlag::Denied);
            return InboundDecision::Refuse(Refusal::Denied);
        }
        match connect_in(&self.pod, req.authority).await {
            Ok(app) => {
                telemetry.tcp_opened(&record);
                InboundDecision::Forward(Box::new(app))
            }
            Err(e) => {
                tracing::debug!(authority = %req.authority, error = %e, "HBONE: the app did not answer");
                failed(telemetry, &record, ConnectionFlag::ConnectFailure);
                InboundDecision::Refuse(Refusal::UpstreamUnavailable)
            }
        }
    }
}

impl InboundHandler for PodInbound {
    fn handle(&self, request: &InboundRequest) -> std::pin::Pin<Box<dyn Future<Output = InboundDecision> + Send + '_>> {
        let request = request.clone();
        Box::pin(async move { self.decide(&request).await })
    }

    fn finished(&self, request: &InboundRequest, outcome: StreamOutcome) {
        // Sent: to the HBONE client (the response direction).
        self.ctx.telemetry.tcp_closed(&self.record(request), outcome.sent, outcome.received);
    }
}
