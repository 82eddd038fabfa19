//! TCP proxying: a filter chain's tcp_proxy connects to an endpoint of its
//! cluster within the cluster's connect timeout (with mesh mTLS where the
//! cluster wants it) and copies both ways, passing a half-close on to the
//! other side, until the connection has been idle for its `idle_timeout`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite};

use super::connector::{UpstreamIo, tls_tcp};
use super::idle::Tracked;
use super::lb::UpstreamAddr;
use super::route::pick_cluster;
use super::upstream::connect_tcp;
use super::{Reporter, SecurityPolicy, Shared, TcpInfo};
use crate::state::{Cluster, ClusterTarget};

pub(crate) struct TcpConn {
    pub shared: Arc<Shared>,
    pub reporter: Reporter,
    pub listener: String,
    pub peer: SocketAddr,
    pub original_dst: SocketAddr,
    pub security: SecurityPolicy,
    pub peer_principal: Option<String>,
}

/// Proxies the connection until either side closes it, or no byte has moved
/// for `idle_timeout`.
pub(crate) async fn proxy<IO>(conn: TcpConn, target: &ClusterTarget, downstream: IO, idle_timeout: Option<Duration>)
where
    IO: AsyncRead + AsyncWrite + Unpin,
{
    let start = Instant::now();
    // Counted here, so the totals are right however the copy ends.
    let (mut downstream, traffic) = Tracked::new(downstream);
    let cluster_name = pick_cluster(target).to_string();
    let mut info = TcpInfo {
        reporter: conn.reporter,
        listener: conn.listener,
        destination_service: super::destination_service(&cluster_name).map(str::to_string),
        cluster: cluster_name,
        upstream: None,
        downstream_peer: conn.peer,
        original_dst: conn.original_dst,
        received_bytes: 0,
        sent_bytes: 0,
        duration: std::time::Duration::ZERO,
        response_flags: String::new(),
        security_policy: conn.security,
        peer_principal: conn.peer_principal,
        upstream_principal: None,
    };
    let shared = conn.shared;
    let picked = {
        let snap = shared.state.snapshot();
        snap.clusters.get(&info.cluster).map(|c| {
            // The slot is held for the whole connection: max_connections counts it.
            let slot = shared.circuits.tcp_connection(c);
            (c.clone(), slot, shared.lb.pick(&snap, c, info.original_dst, None))
        })
    };
    let result = match picked {
        None => Err("NC"),
        Some((_, None, _)) => Err("UO"),
        // BlackHoleCluster has no endpoints: the connection is closed here.
        Some((_, _, None)) => Err("UH"),
        Some((cluster, Some(_slot), Some(pick))) => match connect(&shared, &cluster, &pick.address).await {
            Err(e) => {
                pick.report(cluster.outlier_detection.as_ref(), true);
                tracing::debug!(error = %e, "tcp upstream connect failed");
                Err("UF")
            }
            Ok((upstream, identity)) => {
                pick.report(cluster.outlier_detection.as_ref(), false);
                info.upstream = pick.address.socket();
                match info.reporter {
                    Reporter::Source => info.peer_principal = identity,
                    Reporter::Waypoint => info.upstream_principal = identity,
                    Reporter::Destination => {}
                }
                if let Some(o) = &shared.observer {
                    o.on_tcp_open(info.reporter, &info.cluster);
                }
                let copy = async {
                    match upstream {
                        UpstreamIo::Plain(mut s) => tokio::io::copy_bidirectional(&mut downstream, &mut s).await,
                        UpstreamIo::Tls(mut s) => tokio::io::copy_bidirectional(&mut downstream, &mut *s).await,
                        UpstreamIo::Hbone(mut s) => tokio::io::copy_bidirectional(&mut downstream, &mut *s).await,
                    }
                };
                tokio::select! {
                    copied = copy => if let Err(e) = copied {
                        tracing::debug!(error = %e, "tcp proxy ended with an error");
                    },
                    _ = traffic.idle(idle_timeout) => tracing::debug!("tcp connection closed: idle timeout"),
                }
                info.received_bytes = traffic.read();
                info.sent_bytes = traffic.written();
                Ok(())
            }
        },
    };
    if let Err(flag) = result {
        info.response_flags = flag.to_string();
        tracing::debug!(cluster = %info.cluster, flag, "tcp connection closed without an upstream");
    }
    info.duration = start.elapsed();
    if let Some(o) = &shared.observer {
        o.on_tcp_close(info);
    }
}

/// Connects to the endpoint, with mesh mTLS when the cluster wants it there;
/// an internal endpoint is an HBONE stream (see `waypoint`).
async fn connect(
    shared: &Shared,
    cluster: &Cluster,
    addr: &UpstreamAddr,
) -> Result<(UpstreamIo, Option<String>), Box<dyn std::error::Error + Send + Sync>> {
    if let UpstreamAddr::Internal { listener, destination, endpoint_id } = addr {
        let destination = destination.ok_or_else(|| format!("internal endpoint {endpoint_id} has no destination"))?;
        let stream = shared.waypoint.originate(listener, destination).await?;
        let identity = stream.peer_identity().to_string();
        return Ok((UpstreamIo::Hbone(Box::new(stream)), Some(identity)));
    }
    let stream = connect_tcp(&cluster.name, addr, cluster.connect_timeout).await?;
    tls_tcp(&shared.state, &shared.tls, cluster, stream).await
}
