//! The pods this node proxy serves and their listeners: for each pod the CNI
//! hands over, 15001 (outbound), 15006 (plaintext inbound) and 15008 (HBONE)
//! are bound inside the pod's network namespace, with the socket mark, and
//! served on the traffic runtime until the pod is removed.
//!
//! Both ends of a pod's life drain as the sidecar does (`proxy::drain`): on
//! SIGTERM the node's drain closes every pod's listeners, and a pod's `Del`
//! starts that pod's own drain, closing its listeners only. Either way the
//! open connections run on (an inbound HBONE connection after a GOAWAY, so
//! its client opens no new stream on it) until they end or the drain period
//! is over, and are then closed.

use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::watch;
use tracing::Instrument;

use super::inpod::{Netns, PodRegistry, SOCKET_MARK};
use super::traffic::{self, NodeContext};
use crate::hbone::{Server, SocketFactory};
use crate::identity::Identity;
use crate::proto::zds;
use crate::proxy::drain::{self, Drain, DrainWatch, ListenersOpen, OpenConnection};

/// The in-pod ports (ztunnel's); tests bind 0.
#[derive(Debug, Clone, Copy)]
pub struct InPodPorts {
    pub outbound: u16,
    pub inbound_plaintext: u16,
    pub hbone: u16,
}

impl Default for InPodPorts {
    fn default() -> Self {
        InPodPorts { outbound: 15001, inbound_plaintext: 15006, hbone: crate::hbone::HBONE_PORT }
    }
}

/// One served pod.
pub struct Pod {
    pub uid: Arc<str>,
    pub identity: Identity,
    pub netns: Netns,
    /// Where its listeners ended up (the ports asked for, or the kernel's
    /// choice for port 0).
    pub outbound: SocketAddr,
    pub inbound_plaintext: SocketAddr,
    pub hbone: SocketAddr,
}

impl SocketFactory for Pod {
    fn tcp_socket(&self, peer: SocketAddr) -> io::Result<TcpSocket> {
        self.netns.tcp_socket(peer.is_ipv4())
    }
}

struct Served {
    pod: Arc<Pod>,
    /// The pod's own drain, started by its removal; dropped unstarted, it
    /// closes the pod's listeners and connections at once.
    drain: Drain,
}

/// How the pods' listeners and connections end.
#[derive(Clone)]
pub struct PodDraining {
    /// The node's drain (SIGTERM): every pod answers to it.
    pub node: DrainWatch,
    /// How long a removed pod's connections may run on.
    pub period: Duration,
}

/// The registry the ZDS session drives.
pub struct Pods {
    ctx: Arc<NodeContext>,
    ports: InPodPorts,
    draining: PodDraining,
    served: Mutex<HashMap<String, Served>>,
    synced: watch::Sender<bool>,
}

impl Pods {
    pub fn new(ctx: Arc<NodeContext>, ports: InPodPorts, draining: PodDraining) -> (Arc<Pods>, watch::Receiver<bool>) {
        let (synced, rx) = watch::channel(false);
        (Arc::new(Pods { ctx, ports, draining, served: Mutex::default(), synced }), rx)
    }

    pub fn get(&self, uid: &str) -> Option<Arc<Pod>> {
        self.served.lock().unwrap_or_else(PoisonError::into_inner).get(uid).map(|s| s.pod.clone())
    }

    /// The pod's identity: from the CNI's WorkloadInfo, else from workload
    /// discovery.
    fn identity(&self, uid: &str, info: Option<&zds::WorkloadInfo>) -> Result<Identity, String> {
        let td = &self.ctx.trust_domain;
        if let Some(i) = info.filter(|i| !i.namespace.is_empty() && !i.service_account.is_empty()) {
            return Ok(Identity::new(td.as_str(), i.namespace.as_str(), i.service_account.as_str()));
        }
        match self.ctx.state.snapshot().workloads.get(uid) {
            Some(w) => Ok(w.identity()),
            None => Err("no workload info and no such workload in workload discovery".into()),
        }
    }

    fn open(&self, uid: &str, info: Option<zds::WorkloadInfo>, netns: Netns) -> Result<(), String> {
        if self.draining.node.is_draining() {
            return Err("the node proxy is draining".into());
        }
        let identity = self.identity(uid, info.as_ref())?;
        let bind =
            |port: u16| listen(&netns, port).map_err(|e| format!("cannot listen on port {port} in the pod: {e}"));
        let (outbound, inbound, hbone) =
            (bind(self.ports.outbound)?, bind(self.ports.inbound_plaintext)?, bind(self.ports.hbone)?);
        let addr = |l: &TcpListener| l.local_addr().map_err(|e| e.to_string());
        let pod = Arc::new(Pod {
            uid: Arc::from(uid),
            outbound: addr(&outbound)?,
            inbound_plaintext: addr(&inbound)?,
            hbone: addr(&hbone)?,
            identity: identity.clone(),
            netns,
        });
        let (pod_drain, pod_watch) = drain::channel();
        let drains = PodDrains { node: self.draining.node.for_this_runtime(), pod: pod_watch.for_this_runtime() };
        let server = Arc::new(Server::new(self.ctx.secrets.clone(), identity.clone(), self.ctx.hbone.clone()));
        // Fetch the pod's certificate now, so the first connection does not wait for the CA.
        let secrets = self.ctx.secrets.clone();
        tokio::spawn(async move {
            if let Err(e) = secrets.fetch(&identity).await {
                tracing::warn!(%identity, error = %e, "cannot fetch the pod's certificate yet");
            }
        });
        let ctx = self.ctx.clone();
        spawn_accept(outbound, &drains, {
            let (ctx, pod) = (ctx.clone(), pod.clone());
            move |tcp| traffic::outbound(ctx.clone(), pod.clone(), tcp)
        });
        spawn_accept(inbound, &drains, {
            let (ctx, pod) = (ctx.clone(), pod.clone());
            move |tcp| traffic::inbound_plaintext(ctx.clone(), pod.clone(), tcp)
        });
        spawn_accept(hbone, &drains, {
            let handler = traffic::hbone_handler(ctx.clone(), pod.clone());
            let drains = drains.clone();
            move |tcp| {
                let (server, handler, drains) = (server.clone(), handler.clone(), drains.clone());
                async move {
                    if let Err(e) = server.serve(tcp, handler, drains.draining()).await {
                        tracing::debug!(error = %e, "HBONE connection ended");
                    }
                }
            }
        });
        tracing::info!(%uid, outbound = %pod.outbound, hbone = %pod.hbone, "pod added: listeners open in its network namespace");
        let old = self
            .served
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(uid.to_string(), Served { pod, drain: pod_drain });
        if let Some(old) = old {
            tracing::info!(uid = %old.pod.uid, "pod re-added: its old listeners drain");
            self.drain_removed(old);
        }
        Ok(())
    }

    /// Drains a pod no longer served: its listeners close now, its
    /// connections run on for up to the drain period.
    fn drain_removed(&self, removed: Served) {
        let span = tracing::info_span!("pod", uid = %removed.pod.uid);
        tokio::spawn(removed.drain.drain(self.draining.period).instrument(span));
    }
}

impl PodRegistry for Pods {
    fn add(&self, uid: &str, info: Option<zds::WorkloadInfo>, netns: Netns) -> Result<(), String> {
        if self.get(uid).is_some() {
            // A CNI reconnecting re-sends what we have: keep the listeners.
            return Ok(());
        }
        self.open(uid, info, netns)
    }

    fn remove(&self, uid: &str) {
        let removed = self.served.lock().unwrap_or_else(PoisonError::into_inner).remove(uid);
        if let Some(s) = removed {
            // The certificate is forgotten once no pod has the identity; the
            // connections that drain have done their handshakes.
            let still_used = self
                .served
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .values()
                .any(|o| o.pod.identity == s.pod.identity);
            if !still_used {
                self.ctx.secrets.forget(&s.pod.identity);
            }
            tracing::info!(%uid, "pod removed: draining its connections");
            self.drain_removed(s);
        }
    }

    fn uids(&self) -> Vec<String> {
        self.served.lock().unwrap_or_else(PoisonError::into_inner).keys().cloned().collect()
    }

    fn set_synced(&self, synced: bool) {
        self.synced.send_replace(synced);
    }
}

/// A listener on all of the pod's addresses, made inside its namespace.
fn listen(netns: &Netns, port: u16) -> io::Result<TcpListener> {
    netns.run(|| {
        let s = TcpSocket::new_v4()?;
        nix::sys::socket::setsockopt(&s, nix::sys::socket::sockopt::Mark, &SOCKET_MARK).map_err(io::Error::from)?;
        s.set_reuseaddr(true)?;
        s.bind(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)))?;
        s.listen(1024)
    })
}

/// The two drains a pod's listeners and connections answer to, the node's
/// and the pod's own: whichever starts first closes the listeners, whichever
/// ends first closes the connections. Both count them, so each drain waits
/// for exactly what it covers.
#[derive(Clone)]
struct PodDrains {
    node: DrainWatch,
    pod: DrainWatch,
}

impl PodDrains {
    async fn draining(&self) {
        tokio::select! {
            () = self.node.draining() => {}
            () = self.pod.draining() => {}
        }
    }

    async fn stopped(&self) {
        tokio::select! {
            () = self.node.stopped() => {}
            () = self.pod.stopped() => {}
        }
    }

    fn connection(&self) -> [OpenConnection; 2] {
        [self.node.connection(), self.pod.connection()]
    }

    fn listeners_open(&self) -> [ListenersOpen; 2] {
        [self.node.listeners_open(), self.pod.listeners_open()]
    }
}

/// Accepts until a drain starts, then closes the listener; each connection
/// is served until it ends or the drain period is over.
fn spawn_accept<F, Fut>(listener: TcpListener, drains: &PodDrains, serve: F)
where
    F: Fn(tokio::net::TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    // Counted before the task starts, so that a drain started meanwhile waits for it.
    let open = drains.listeners_open();
    let drains = drains.clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((tcp, peer)) => {
                        let _ = tcp.set_nodelay(true);
                        let counted = drains.connection();
                        let (drains, served) = (drains.clone(), serve(tcp));
                        tokio::spawn(async move {
                            tokio::select! {
                                () = served => {}
                                () = drains.stopped() => tracing::debug!(%peer, "connection closed: the drain period is over"),
                            }
                            drop(counted);
                        });
                    }
                    Err(e) => tracing::warn!(error = %e, "accept failed"),
                },
                () = drains.draining() => break,
            }
        }
        // The socket closes before the drain is told it has.
        drop(listener);
        drop(open);
    });
}
