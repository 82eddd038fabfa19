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
use crate::telemetry::{Peer, Reporter, ResponseFlags, SecurityPolicy, ServiceName, TcpRecord, Telemetry};

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
            let eps = snap.endpoints_for(svc, dst.port());
            if eps.is_empty() {
                return Err(format!("service {} has no healthy endpoint for port {}", svc.key(), dst.port()));
            }
            let (w, port) = eps[fastrand::usize(..eps.len())].clone();
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
            let peer = waypoint_address(snap, &wp)?;
            let identity = snap
                .workload_by_address(peer.ip())
                .map(|wl| wl.identity())
                .ok_or_else(|| format!("waypoint {peer} is not a known workload"))?;
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

fn waypoint_address(snap: &WorkloadSnapshot, wp: &Waypoint) -> Result<SocketAddr, String> {
    match wp {
        Waypoint::Address(a) => Ok(*a),
        Waypoint::Service { service, port } => snap
            .services
            .get(service)
            .and_then(|s| s.vips.first())
            .map(|ip| SocketAddr::new(*ip, *port))
            .ok_or_else(|| format!("waypoint service {service} has no address")),
    }
}

fn peer_of(w: Option<&Workload>, identity: Option<&Identity>) -> Peer {
    match (w, identity) {
        (Some(w), _) => {
            let name = if w.workload_name.is_empty() { &w.name } else { &w.workload_name };
            Peer::new(name, &w.namespace, &w.identity().to_string())
        }
        (None, Some(id)) => Peer::from_principal(&id.to_string()),
        (None, None) => Peer::unknown(),
    }
}

fn service_name(s: Option<&Service>) -> ServiceName {
    s.map_or_else(ServiceName::unknown, |s| ServiceName::from_host(&s.hostname))
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
        Err(e) => {
            tracing::debug!(%dst, error = %e, "outbound: no route");
            return;
        }
    };
    let hbone = matches!(dest.route, Route::Hbone { .. });
    let mut record = TcpRecord {
        reporter: Reporter::Source,
        source: peer_of(source.as_deref(), Some(&pod.identity)),
        destination: peer_of(dest.workload.as_deref(), None),
        destination_service: service_name(dest.service.as_deref()),
        response_flags: ResponseFlags::NONE,
        security: if hbone { SecurityPolicy::MutualTls } else { SecurityPolicy::Unknown },
    };
    match dest.route {
        Route::Hbone { peer, authority, identity } => {
            let req = ConnectRequest {
                source: pod.identity.clone(),
                destination_identity: hbone::ExpectedPeer::Exactly(identity),
                peer,
                authority,
                source_address: src,
                socket: pod.clone(),
                source_pod: pod.uid.clone(),
            };
            match ctx.pool.connect(req).await {
                Ok(mut upstream) => copy(&ctx.telemetry, &record, &mut app, &mut upstream).await,
                Err(e) => {
                    tracing::debug!(%dst, %peer, error = %e, "outbound: HBONE connect failed");
                    record.response_flags = ResponseFlags::UPSTREAM_CONNECTION_FAILURE;
                    failed(&ctx.telemetry, &record);
                }
            }
        }
        Route::Direct(target) => match connect_in(&pod, target).await {
            Ok(mut upstream) => copy(&ctx.telemetry, &record, &mut app, &mut upstream).await,
            Err(e) => {
                tracing::debug!(%target, error = %e, "outbound: connect failed");
                record.response_flags = ResponseFlags::UPSTREAM_CONNECTION_FAILURE;
                failed(&ctx.telemetry, &record);
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

fn failed(telemetry: &Telemetry, record: &TcpRecord) {
    telemetry.tcp_opened(record);
    telemetry.tcp_closed(record, 0, 0);
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
    let record = TcpRecord {
        reporter: Reporter::Destination,
        source: snap.workload_by_address(src.ip()).map_or_else(Peer::unknown, |s| peer_of(Some(s), None)),
        destination: peer_of(w.as_deref(), Some(&pod.identity)),
        destination_service: ServiceName::unknown(),
        response_flags: ResponseFlags::NONE,
        security: SecurityPolicy::None,
    };
    if let Err(denied) = authorize(&ctx, w.as_deref(), &conn) {
        tracing::debug!(%src, %dst, %denied, "plaintext inbound refused");
        return;
    }
    match connect_in(&pod, dst).await {
        Ok(mut app) => copy(&ctx.telemetry, &record, &mut client, &mut app).await,
        Err(e) => tracing::debug!(%dst, error = %e, "plaintext inbound: the app did not answer"),
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
        let service =
            snap.services.values().find(|s| w.as_ref().is_some_and(|w| w.services.contains_key(&s.key()))).cloned();
        TcpRecord {
            reporter: Reporter::Destination,
            source: peer_of(source.map(|w| &**w), Some(&req.peer_identity)),
            destination: peer_of(w.as_deref(), Some(&self.pod.identity)),
            destination_service: service_name(service.as_deref()),
            response_flags: ResponseFlags::NONE,
            security: SecurityPolicy::MutualTls,
        }
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
        if let Err(denied) = authorize(&self.ctx, w.as_deref(), &conn) {
            tracing::debug!(peer = %req.peer_identity, authority = %req.authority, %denied, "HBONE: denied");
            return InboundDecision::Refuse(Refusal::Denied);
        }
        match connect_in(&self.pod, req.authority).await {
            Ok(app) => {
                self.ctx.telemetry.tcp_opened(&self.record(req));
                InboundDecision::Forward(Box::new(app))
            }
            Err(e) => {
                tracing::debug!(authority = %req.authority, error = %e, "HBONE: the app did not answer");
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
