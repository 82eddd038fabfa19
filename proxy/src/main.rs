//! meshperf-proxy: parses the configuration, then runs the xDS client and the
//! admin endpoint on a current-thread control runtime, beside `--concurrency`
//! traffic worker threads that each run a current-thread runtime of their own
//! (see `proxy::workers`), until SIGTERM, SIGINT or `POST /quitquitquit`; then
//! drains for up to `--drain-duration` and exits 0. A sidecar or waypoint
//! given `--ca-address` also keeps its own certificate from the CA, and is
//! ready once it has both its config and that certificate.
#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use clap::error::ErrorKind;
use meshperf_proxy::admin::{Admin, AdminServer, ClusterStats};
use meshperf_proxy::config::{Cli, Config, OwnCaConfig};
use meshperf_proxy::identity::{CaClientConfig, DEFAULT_CERTIFICATE_TTL, Identity, SecretManager};
use meshperf_proxy::logging;
use meshperf_proxy::proxy::{Proxy, Workers, drain};
use meshperf_proxy::state::{ROOT_SECRET, Secret, State, WORKLOAD_SECRET};
use meshperf_proxy::telemetry::{
    AccessLogOptions, AccessLogSink, AllocationCollector, CountingAllocator, Observer, Peer, Telemetry, XdsCollector,
};
use meshperf_proxy::xds::{Readiness, XdsClient, XdsConfig};
use tokio::sync::watch;

// jemalloc, each allocation counted for meshperf_proxy_allocations_total.
#[global_allocator]
static ALLOCATOR: CountingAllocator<tikv_jemallocator::Jemalloc> = CountingAllocator(tikv_jemallocator::Jemalloc);

fn main() -> ExitCode {
    let parsed = match Cli::try_parse() {
        Ok(cli) => cli.into_config(),
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        // clap's message is several lines; the first says what was wrong.
        Err(e) => Err(e.to_string().lines().next().unwrap_or_default().trim_start_matches("error: ").to_string()),
    };
    let config = match parsed {
        Ok(c) => c,
        Err(msg) => {
            eprintln!("meshperf-proxy: {msg} (see --help)");
            return ExitCode::from(2);
        }
    };
    match run(config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("meshperf-proxy: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(config: Config) -> anyhow::Result<()> {
    let log = logging::init(&config.log_level)?;
    tracing::info!(config = %config, "meshperf-proxy starting");
    if let Some(node) = config.node_proxy.clone() {
        let (quit, _) = watch::channel(false);
        let signals = quit.clone();
        std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
                if let Ok(rt) = rt {
                    rt.block_on(wait_for_signal(signals.clone()));
                    signals.send_replace(true);
                }
            })
            .context("signal thread")?;
        meshperf_proxy::node::app::run(Arc::new(config), &node, log, quit)?;
        tracing::info!("meshperf-proxy stopped");
        return Ok(());
    }
    // Admin, xDS and metrics share one thread so that they never take time
    // from the traffic workers.
    let control = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .thread_name("control")
        .build()
        .context("control runtime")?;

    let config = Arc::new(config);
    // With a CA, `default` and `ROOTCA` are the proxy's own, not SDS's.
    let state = Arc::new(match &config.own_ca {
        Some(_) => State::with_local_secrets([WORKLOAD_SECRET, ROOT_SECRET]),
        None => State::new(),
    });
    let (quit, _) = watch::channel(false);
    let (drain, drain_watch) = drain::channel();
    let xds_config = XdsConfig {
        address: config.xds_address.clone(),
        node: config.node.clone(),
        delta: config.delta,
        tls: None,
        auth_token: config.xds_auth_token.clone(),
    };
    let bound_listeners = config.listen.iter().map(|b| b.listener.clone()).collect();
    let (client, xds_ready) = XdsClient::new(xds_config, state.clone(), bound_listeners);
    let (ready, own_certificate) = match &config.own_ca {
        Some(ca) => {
            // The CA's gRPC channel starts its connection task on the
            // runtime it is made in: the control runtime.
            let _control = control.enter();
            let (ready, certificate) = own_certificate(ca, state.clone(), xds_ready)?;
            (ready, Some(certificate))
        }
        None => (xds_ready, None),
    };
    let mut telemetry =
        Telemetry::new(AccessLogOptions { enabled: false, sink: AccessLogSink::Stdout, capacity: 1024 })?;
    telemetry.register_collector(Box::new(XdsCollector(client.metrics())));
    // ALLOCATOR above counts every allocation of the process.
    telemetry.register_collector(Box::new(AllocationCollector));
    let telemetry = Arc::new(telemetry);
    let observer = Observer::new(telemetry.clone(), Peer::local(&config));
    let proxy = Proxy::new(config.clone(), state.clone(), Some(Arc::new(observer)));
    // Listeners are bound before anything runs, so a bad or busy address fails
    // the start instead of a background task.
    let workers = Workers::bind(&proxy, usize::from(config.concurrency))?;
    let cluster_stats: ClusterStats = {
        let proxy = proxy.clone();
        Arc::new(move || proxy.cluster_stats())
    };
    let workers = workers.start(&drain_watch, Some(ready.clone()))?;
    let admin = Admin {
        config: config.clone(),
        state,
        ready,
        xds_metrics: client.metrics(),
        telemetry: Some(telemetry),
        log: Some(log),
        cluster_stats: Some(cluster_stats),
        quit: quit.clone(),
        drain: drain_watch,
        workloads: None,
    };

    control.block_on(async {
        let server = AdminServer::bind(config.admin_address, admin).await?;
        tracing::info!(address = %config.admin_address, "admin endpoint listening");
        // xDS and admin run on through the drain: config keeps applying and
        // readiness says DRAINING.
        let (stop, stopped) = watch::channel(false);
        let xds = tokio::spawn(client.run(stopped.clone()));
        let own_certificate = own_certificate.map(tokio::spawn);
        let admin = tokio::spawn(server.run(stopped));
        wait_for_signal(quit).await;
        drain.drain(config.drain_duration).await;
        stop.send_replace(true);
        if let Some(task) = own_certificate {
            task.abort();
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), async {
            let _ = xds.await;
            let _ = admin.await;
        })
        .await;
        anyhow::Ok(())
    })?;
    workers.join();
    tracing::info!("meshperf-proxy stopped");
    Ok(())
}

/// A sidecar's or waypoint's own certificate from the CA: the task that gets it, renews it
/// and installs it as `default` and `ROOTCA`, and the readiness that waits
/// for it as well as for xDS (Istio's agent does not answer SDS until it has
/// the certificate, so Envoy is not ready before).
fn own_certificate(
    ca: &OwnCaConfig,
    state: Arc<State>,
    xds_ready: Readiness,
) -> anyhow::Result<(Readiness, impl std::future::Future<Output = ()> + Send + 'static)> {
    let id: Identity = ca.identity.parse()?;
    let secrets = SecretManager::new(CaClientConfig {
        address: ca.ca_address.clone(),
        root_ca: ca.ca_tls.root_ca.clone(),
        alt_hostname: Some(ca.ca_tls.server_name.clone()),
        ttl: DEFAULT_CERTIFICATE_TTL,
        token: ca.auth_token.clone(),
        impersonate: false,
    })?;
    let (has_certificate, mut certificate_ready) = watch::channel(false);
    let (ready, readiness) = watch::channel(false);
    let task = async move {
        let both = async move {
            let mut xds_ready = xds_ready;
            if xds_ready.wait().await && certificate_ready.wait_for(|c| *c).await.is_ok() {
                tracing::info!("config and own certificate in place: ready");
                ready.send_replace(true);
            }
        };
        let keep = async move {
            secrets
                .follow(&id, |cert| {
                    let (certificate, roots) = cert.to_secrets();
                    state.set_local_secrets([
                        (WORKLOAD_SECRET.to_string(), Secret::Certificate(certificate)),
                        (ROOT_SECRET.to_string(), Secret::Validation(roots)),
                    ]);
                    has_certificate.send_replace(true);
                })
                .await
        };
        tokio::join!(both, keep);
    };
    Ok((Readiness::new(readiness), task))
}

/// Returns on SIGTERM, SIGINT or /quitquitquit (which sets `quit`).
async fn wait_for_signal(quit: watch::Sender<bool>) {
    use tokio::signal::unix::{SignalKind, signal};
    let mut quit = quit.subscribe();
    let (mut term, mut int) = match (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) {
        (Ok(t), Ok(i)) => (t, i),
        _ => {
            tracing::warn!("cannot install signal handlers; stop with POST /quitquitquit");
            let _ = quit.wait_for(|q| *q).await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: draining, then exiting"),
        _ = int.recv() => tracing::info!("SIGINT: draining, then exiting"),
        _ = quit.wait_for(|q| *q) => {}
    }
}
