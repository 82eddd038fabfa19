//! meshperf-proxy: parses the configuration, then runs the xDS client and the
//! admin endpoint on a current-thread control runtime, beside `--concurrency`
//! traffic worker threads that each run a current-thread runtime of their own
//! (see `proxy::workers`), until SIGTERM, SIGINT or `POST /quitquitquit`; then
//! drains for up to `--drain-duration` and exits 0.
#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use clap::error::ErrorKind;
use meshperf_proxy::admin::{Admin, AdminServer, ClusterStats};
use meshperf_proxy::config::{Cli, Config};
use meshperf_proxy::logging;
use meshperf_proxy::proxy::{Proxy, Workers, drain};
use meshperf_proxy::state::State;
use meshperf_proxy::telemetry::{
    AccessLogOptions, AccessLogSink, AllocationCollector, CountingAllocator, Observer, Peer, Telemetry, XdsCollector,
};
use meshperf_proxy::xds::{XdsClient, XdsConfig};
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
    let state = Arc::new(State::new());
    let (quit, _) = watch::channel(false);
    let (drain, drain_watch) = drain::channel();
    let xds_config =
        XdsConfig { address: config.xds_address.clone(), node: config.node.clone(), delta: config.delta, tls: None };
    let (client, ready) = XdsClient::new(xds_config, state.clone());
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
        let admin = tokio::spawn(server.run(stopped));
        wait_for_signal(quit).await;
        drain.drain(config.drain_duration).await;
        stop.send_replace(true);
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
