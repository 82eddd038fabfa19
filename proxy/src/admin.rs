//! The admin endpoint, on loopback and on the control-plane runtime (never on
//! the traffic workers): readiness and liveness for the kubelet, the active
//! config as JSON, the proxy's Prometheus metrics, a graceful exit and the log
//! level. Mutating endpoints answer POST only, as Envoy's do. It keeps
//! answering while the proxy drains, and says it is not ready then. Every
//! request first passes `guard`, which refuses what a web page in a browser
//! on the same machine could send.

mod guard;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::config::Config;
use crate::logging::LogControl;
use crate::proxy::{ClusterStat, DrainWatch};
use crate::state::State;
use crate::xds::{Readiness, XdsMetrics};
pub use guard::{AllowedHosts, normalize_host_name};

#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("cannot bind the admin endpoint to {addr}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// The data path's per-cluster counters and gauges, by Envoy's names.
pub type ClusterStats = Arc<dyn Fn() -> Vec<ClusterStat> + Send + Sync>;

/// What the admin endpoint reads and controls.
#[derive(Clone)]
pub struct Admin {
    pub config: Arc<Config>,
    pub state: Arc<State>,
    pub ready: Readiness,
    pub xds_metrics: Arc<XdsMetrics>,
    /// Istio's metrics and the access log; when absent, /stats shows only the
    /// xDS client's counters.
    pub telemetry: Option<Arc<crate::telemetry::Telemetry>>,
    pub log: Option<LogControl>,
    /// The data path's per-cluster counters in Envoy's names (circuit
    /// breaker overflows, outlier ejections); read off the worker threads.
    pub cluster_stats: Option<ClusterStats>,
    /// Set to true by /quitquitquit; main then drains the proxy and exits.
    pub quit: watch::Sender<bool>,
    /// Readiness turns false when the drain starts.
    pub drain: DrainWatch,
    /// The node proxy's workload-discovery state, shown in /config_dump.
    pub workloads: Option<Arc<crate::node::WorkloadState>>,
}

/// A bound admin endpoint.
pub struct AdminServer {
    listener: TcpListener,
    admin: Admin,
    hosts: AllowedHosts,
    /// When set, the only paths served (the node proxy's 15020 and 15021,
    /// which are not on loopback, serve only metrics or readiness).
    only: Option<&'static [&'static str]>,
}

impl AdminServer {
    /// Binds `addr`; failure is reported before anything else starts.
    pub async fn bind(addr: SocketAddr, admin: Admin) -> Result<AdminServer, AdminError> {
        if !addr.ip().is_loopback() {
            // The admin has no token: off loopback, the network decides who
            // can stop the proxy.
            tracing::warn!(
                "admin endpoint is off loopback and has no token: whoever reaches {addr} can read its config and stop the proxy (POST /quitquitquit); keep it on loopback, or on an address only trusted hosts reach"
            );
        }
        AdminServer::listen(addr, admin, None).await
    }

    /// Binds `addr` serving only `paths` (404 for the rest): readiness or
    /// metrics, which change nothing, so that no warning is due off loopback.
    pub async fn bind_only(
        addr: SocketAddr,
        admin: Admin,
        paths: &'static [&'static str],
    ) -> Result<AdminServer, AdminError> {
        AdminServer::listen(addr, admin, Some(paths)).await
    }

    async fn listen(
        addr: SocketAddr,
        admin: Admin,
        only: Option<&'static [&'static str]>,
    ) -> Result<AdminServer, AdminError> {
        let listener = TcpListener::bind(addr).await.map_err(|source| AdminError::Bind { addr, source })?;
        let hosts = AllowedHosts::new(&admin.config.admin_allowed_hosts);
        Ok(AdminServer { listener, admin, hosts, only })
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Serves until `stop` turns true (or its sender is dropped): main stops
    /// it once the drain is over, so it answers throughout the drain.
    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        loop {
            let (stream, _) = tokio::select! {
                accepted = self.listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!(error = %e, "admin: accept failed");
                        continue;
                    }
                },
                _ = stop.wait_for(|s| *s) => return,
            };
            let admin = self.admin.clone();
            let (hosts, only) = (self.hosts.clone(), self.only);
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let response = if let Err(refused) = guard::check(&req, &hosts) {
                        tracing::debug!(method = %req.method(), path = req.uri().path(), reason = %refused, "admin: request refused");
                        text(refused.status(), format!("{refused}\n"))
                    } else if only.is_none_or(|paths| paths.contains(&req.uri().path())) {
                        admin.handle(req)
                    } else {
                        text(StatusCode::NOT_FOUND, "not found\n")
                    };
                    std::future::ready(Ok::<_, Infallible>(response))
                });
                if let Err(e) =
                    hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), svc).await
                {
                    tracing::debug!(error = %e, "admin: connection error");
                }
            });
        }
    }
}

fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"));
    r
}

fn json(body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    r.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("application/json"));
    r
}

fn query_param<'a>(query: Option<&'a str>, key: &str) -> Option<&'a str> {
    query?.split('&').find_map(|kv| kv.split_once('=').filter(|(k, _)| *k == key).map(|(_, v)| v))
}

impl Admin {
    fn handle(&self, req: Request<Incoming>) -> Response<Full<Bytes>> {
        let post = req.method() == Method::POST;
        match req.uri().path() {
            // Envoy's /ready, and the path Istio's readiness probe asks
            // pilot-agent (which asks Envoy's /ready).
            "/ready" | "/healthz/ready" => self.readiness(),
            "/healthz" => text(StatusCode::OK, "OK\n"),
            "/config_dump" => self.config_dump(),
            "/stats/prometheus" => text(StatusCode::OK, self.prometheus()),
            // Envoy's plain form first (`name: value`), then Istio's metrics.
            "/stats" => {
                let mut out = String::new();
                for s in self.cluster_stats.as_ref().map(|f| f()).unwrap_or_default() {
                    out.push_str(&format!("{}: {}\n", s.name(), s.value));
                }
                out.push_str(&self.prometheus());
                text(StatusCode::OK, out)
            }
            "/access_log" if post => match (&self.telemetry, query_param(req.uri().query(), "enabled")) {
                (Some(t), Some(v @ ("true" | "false"))) => {
                    t.access_log().set_enabled(v == "true");
                    text(StatusCode::OK, format!("access log enabled: {v}\n"))
                }
                _ => text(StatusCode::BAD_REQUEST, "want POST /access_log?enabled=true|false\n"),
            },
            "/quitquitquit" if post => {
                tracing::info!("admin: /quitquitquit: draining, then exiting");
                self.quit.send_replace(true);
                text(StatusCode::OK, "OK\n")
            }
            "/logging" if post => self.logging(query_param(req.uri().query(), "level")),
            "/logging" => match &self.log {
                Some(l) => text(
                    StatusCode::OK,
                    format!("active filter: {}\nPOST /logging?level=FILTER to change it\n", l.current()),
                ),
                None => text(StatusCode::NOT_FOUND, "logging is not controllable in this process\n"),
            },
            "/quitquitquit" => text(StatusCode::METHOD_NOT_ALLOWED, "use POST\n"),
            "/" => text(
                StatusCode::OK,
                "meshperf-proxy admin\n  /ready (or /healthz/ready)\n  /healthz\n  /config_dump\n  /stats/prometheus\n  POST /quitquitquit\n  POST /logging?level=FILTER\n  POST /access_log?enabled=true|false\nPOSTs need Content-Type: application/json\n",
            ),
            _ => text(StatusCode::NOT_FOUND, "not found; see /\n"),
        }
    }

    /// Envoy's states: LIVE once the first complete config is in, DRAINING
    /// from the start of the drain (so that no new traffic is sent here).
    fn readiness(&self) -> Response<Full<Bytes>> {
        if self.drain.is_draining() {
            text(StatusCode::SERVICE_UNAVAILABLE, "DRAINING\n")
        } else if self.ready.is_ready() {
            text(StatusCode::OK, "LIVE\n")
        } else {
            text(StatusCode::SERVICE_UNAVAILABLE, "PRE_INITIALIZING: waiting for the first complete config\n")
        }
    }

    /// Istio's metrics (with the xDS client's counters), then the cluster
    /// stats as Envoy's Prometheus exporter names them:
    /// `envoy_cluster_upstream_cx_overflow{cluster_name="..."}`.
    fn prometheus(&self) -> String {
        let mut out = String::new();
        match &self.telemetry {
            // Telemetry's registry carries the xDS counters too.
            Some(t) => t.encode(&mut out),
            None => self.xds_metrics.render(&mut out),
        }
        // The exposition format wants each family's samples together.
        let mut families: std::collections::BTreeMap<String, String> = Default::default();
        for s in self.cluster_stats.as_ref().map(|f| f()).unwrap_or_default() {
            let samples = families.entry(format!("envoy_cluster_{}", s.stat.replace('.', "_"))).or_default();
            let cluster = s.cluster.replace('\\', "\\\\").replace('"', "\\\"");
            samples.push_str(&format!("{{cluster_name=\"{cluster}\"}} {}\n", s.value));
        }
        for (metric, samples) in families {
            out.push_str(&format!("# TYPE {metric} gauge\n"));
            for sample in samples.lines() {
                out.push_str(&metric);
                out.push_str(sample);
                out.push('\n');
            }
        }
        out
    }

    fn config_dump(&self) -> Response<Full<Bytes>> {
        let snapshot = self.state.snapshot();
        let dump = serde_json::json!({
            "bootstrap": &*self.config,
            "versions": &snapshot.versions,
            "clusters": &snapshot.clusters,
            "endpoints": &snapshot.endpoints,
            "listeners": &snapshot.listeners,
            "routes": &snapshot.routes,
            "secrets": &snapshot.secrets,
        });
        let dump = match &self.workloads {
            Some(w) => serde_json::json!({ "bootstrap": &*self.config, "workloads": &*w.snapshot() }),
            None => dump,
        };
        match serde_json::to_string_pretty(&dump) {
            Ok(s) => json(s),
            Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("cannot render the config: {e}\n")),
        }
    }

    fn logging(&self, level: Option<&str>) -> Response<Full<Bytes>> {
        let (Some(log), Some(level)) = (&self.log, level) else {
            return text(
                StatusCode::BAD_REQUEST,
                "want POST /logging?level=FILTER (e.g. debug, info,meshperf_proxy::xds=debug)\n",
            );
        };
        let level = level.replace("%2C", ",").replace("%3D", "=").replace("%3A", ":");
        match log.set(&level) {
            Ok(()) => {
                tracing::info!(filter = %level, "admin: log level changed");
                text(StatusCode::OK, format!("active filter: {}\n", log.current()))
            }
            Err(e) => text(StatusCode::BAD_REQUEST, format!("{e}\n")),
        }
    }
}
