//! Runs the node proxy: workload discovery and the admin endpoints on the
//! current-thread control runtime, the pods' listeners and traffic on a
//! multi-threaded runtime of ZTUNNEL_WORKER_THREADS threads (pods come and
//! go, so their listeners are tasks any worker may run, as in ztunnel).
//! On SIGTERM, SIGINT or /quitquitquit it drains as the sidecar does
//! (`--drain-duration`): every pod's listeners close, open connections run
//! on until they end or the period is over; then it exits.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::sync::watch;

use super::inpod::{self, PodRegistry};
use super::pods::{InPodPorts, PodDraining, Pods};
use super::traffic::NodeContext;
use super::{WorkloadState, WorkloadStore};
use crate::admin::{Admin, AdminServer};
use crate::config::{Config, NodeProxyConfig};
use crate::hbone::{HboneConfig, Pool};
use crate::identity::{CaClientConfig, DEFAULT_CERTIFICATE_TTL, SecretManager};
use crate::logging::LogControl;
use crate::proxy::drain;
use crate::state::State;
use crate::telemetry::{AccessLogOptions, AccessLogSink, Telemetry, XdsCollector};
use crate::xds::{Readiness, XdsClient, XdsConfig};

/// Runs until `quit` turns true (SIGTERM, SIGINT, /quitquitquit).
pub fn run(
    config: Arc<Config>,
    node: &NodeProxyConfig,
    log: LogControl,
    quit: watch::Sender<bool>,
) -> anyhow::Result<()> {
    let control = tokio::runtime::Builder::new_current_thread().enable_all().thread_name("control").build()?;
    let traffic = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(usize::from(node.worker_threads))
        .enable_all()
        .thread_name("worker")
        .build()
        .context("traffic runtime")?;

    let state = Arc::new(WorkloadState::new());
    let (store, received) = WorkloadStore::new(state.clone());
    let xds = XdsClient::with_store(
        XdsConfig {
            address: config.xds_address.clone(),
            node: config.node.clone(),
            delta: true,
            tls: Some(node.xds_tls.clone()),
            auth_token: config.xds_auth_token.clone(),
        },
        Box::new(store),
    );
    let mut telemetry =
        Telemetry::new(AccessLogOptions { enabled: false, sink: AccessLogSink::Stdout, capacity: 1024 })?;
    telemetry.register_collector(Box::new(XdsCollector(xds.metrics())));
    let telemetry = Arc::new(telemetry);
    // The CA's gRPC channel starts its connection task on the runtime it is
    // made in: the control runtime, which runs for the proxy's whole life.
    let _control = control.enter();
    let secrets = Arc::new(SecretManager::new(CaClientConfig {
        address: node.ca_address.clone(),
        root_ca: node.ca_tls.root_ca.clone(),
        alt_hostname: Some(node.ca_tls.server_name.clone()),
        ttl: DEFAULT_CERTIFICATE_TTL,
        token: node.auth_token.clone(),
        impersonate: true,
    })?);
    let hbone = HboneConfig::default();
    let ctx = Arc::new(NodeContext {
        state: state.clone(),
        pool: Pool::new(secrets.clone(), hbone.clone()),
        secrets,
        hbone,
        telemetry: telemetry.clone(),
        trust_domain: node.trust_domain.clone(),
    });
    let (drain, drain_watch) = drain::channel();
    let draining = PodDraining { node: drain_watch.clone(), period: config.drain_duration };
    let (pods, synced) = Pods::new(ctx, InPodPorts::default(), draining);
    let (ready_tx, ready_rx) = watch::channel(false);
    let admin = Admin {
        config: config.clone(),
        state: Arc::new(State::new()),
        ready: Readiness::new(ready_rx),
        xds_metrics: xds.metrics(),
        telemetry: Some(telemetry),
        log: Some(log),
        cluster_stats: None,
        quit: quit.clone(),
        drain: drain_watch,
        workloads: Some(state),
    };
    let (stop, stopped) = watch::channel(false);
    let zds = traffic.spawn(inpod::run(node.inpod_uds.clone(), pods.clone() as Arc<dyn PodRegistry>, stopped.clone()));

    control.block_on(async {
        let servers = [
            AdminServer::bind(config.admin_address, admin.clone()).await?,
            AdminServer::bind_only(node.readiness_address, admin.clone(), &["/healthz/ready"]).await?,
            AdminServer::bind_only(node.stats_address, admin, &["/stats/prometheus"]).await?,
        ];
        tracing::info!(admin = %config.admin_address, readiness = %node.readiness_address, stats = %node.stats_address, "node proxy endpoints listening");
        for s in servers {
            tokio::spawn(s.run(stopped.clone()));
        }
        tokio::spawn(readiness(received, synced, ready_tx));
        let xds = tokio::spawn(xds.run(stopped));
        let _ = quit.subscribe().wait_for(|q| *q).await;
        // Workload discovery, the CNI's socket and the admin endpoints carry
        // on through the drain (readiness says it is draining).
        drain.drain(config.drain_duration).await;
        stop.send_replace(true);
        let _ = tokio::time::timeout(Duration::from_secs(5), xds).await;
        anyhow::Ok(())
    })?;
    let _ = traffic.block_on(async { tokio::time::timeout(Duration::from_secs(1), zds).await });
    traffic.shutdown_timeout(Duration::from_secs(1));
    Ok(())
}

/// Ready once both workload-discovery types were received and the CNI's
/// snapshot of pods has been handed over (each pod's listeners are open
/// before its Add is acknowledged); stays ready.
async fn readiness(mut received: watch::Receiver<bool>, mut synced: watch::Receiver<bool>, ready: watch::Sender<bool>) {
    if received.wait_for(|r| *r).await.is_ok() && synced.wait_for(|s| *s).await.is_ok() {
        tracing::info!("node proxy ready");
        ready.send_replace(true);
    }
}
