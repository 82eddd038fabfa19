//! Start-up configuration: flags with environment fallbacks (Istio's variable
//! names where Istio has one) parsed into one [`Config`] that `main` logs and the
//! admin endpoint shows. Bad values are reported by clap as one line and exit 2.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use clap::{ArgAction, Parser, ValueEnum};
use serde::Serialize;

/// The command line as clap sees it; [`Cli::into_config`] validates and
/// assembles it into a [`Config`].
#[derive(Parser, Debug)]
#[command(name = "meshperf-proxy", version, about = "meshperf's sidecar proxy, configured over xDS")]
pub struct Cli {
    /// Address of the control plane's ADS (gRPC, plain text).
    #[arg(long, env = "XDS_ADDRESS", default_value = "127.0.0.1:15010")]
    pub xds_address: String,
    /// Full node id; when set it is used as is and the pieces below only feed metadata.
    #[arg(long, env = "NODE_ID")]
    pub node_id: Option<String>,
    /// Proxy type, the first field of the node id.
    #[arg(long, env = "PROXY_TYPE", value_enum, default_value_t = ProxyType::Sidecar)]
    pub proxy_type: ProxyType,
    #[arg(long, env = "POD_NAME", default_value = "meshperf-proxy")]
    pub pod_name: String,
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    pub pod_namespace: String,
    #[arg(long, env = "INSTANCE_IP", default_value = "127.0.0.1")]
    pub instance_ip: IpAddr,
    #[arg(long, env = "SERVICE_ACCOUNT", default_value = "default")]
    pub service_account: String,
    /// Workload labels as k=v,k=v.
    #[arg(long, env = "LABELS", default_value = "", value_parser = parse_labels)]
    pub labels: Labels,
    /// Workload name (the Deployment's); defaults to the pod name.
    #[arg(long, env = "WORKLOAD_NAME")]
    pub workload_name: Option<String>,
    /// Use delta (incremental) ADS; `--delta=false` or `--sotw` selects state of the world.
    #[arg(long, env = "MESHPERF_XDS_DELTA", default_value_t = true, action = ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true")]
    pub delta: bool,
    /// Use state-of-the-world ADS (same as `--delta=false`).
    #[arg(long, conflicts_with = "delta")]
    pub sotw: bool,
    /// Admin endpoint; keep it on loopback.
    #[arg(long, env = "MESHPERF_ADMIN_ADDRESS", default_value = "127.0.0.1:15000")]
    pub admin_address: SocketAddr,
    /// Traffic worker threads (Istio's benchmarks use 2).
    #[arg(long, env = "ISTIO_META_CONCURRENCY", default_value_t = 2,
          value_parser = clap::value_parser!(u16).range(1..=256))]
    pub concurrency: u16,
    /// How traffic reaches the proxy: iptables redirects to 15001/15006, or none
    /// (explicit `--listen` bindings, no root needed).
    #[arg(long, env = "MESHPERF_CAPTURE_MODE", value_enum, default_value_t = CaptureMode::Iptables)]
    pub capture_mode: CaptureMode,
    /// Explicit bindings for capture mode none, repeatable or comma-separated:
    /// LOCAL_ADDR=LISTENER[:DEST_PORT]. The proxy binds LOCAL_ADDR and serves it
    /// with the xDS listener LISTENER as if iptables had redirected a connection
    /// whose original destination port was DEST_PORT (default: the listener's
    /// port). Examples: `127.0.0.1:18080=virtualInbound:8080` (inbound to app
    /// port 8080), `127.0.0.1:19000=0.0.0.0_9000` (outbound to port 9000).
    #[arg(long = "listen", env = "MESHPERF_LISTEN", value_delimiter = ',', value_parser = parse_binding)]
    pub listen: Vec<ExplicitBinding>,
    /// How long to drain on SIGTERM, SIGINT or /quitquitquit before exiting
    /// (Envoy's --drain-time-s, Istio's terminationDrainDuration): listeners
    /// close at once, open connections get this long to finish. `5s`,
    /// `500ms`, `1m` or whole seconds; 0 exits at once.
    #[arg(long, env = "TERMINATION_DRAIN_DURATION_SECONDS", default_value = "5s", value_parser = parse_duration)]
    pub drain_duration: Duration,
    /// Log filter (tracing EnvFilter syntax: `info`, `meshperf_proxy::xds=debug`);
    /// changeable at run time with /logging?level=.
    #[arg(long, env = "MESHPERF_LOG_LEVEL", default_value = "info")]
    pub log_level: String,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProxyType {
    Sidecar,
    Router,
    /// An ambient waypoint: HBONE in on 15008, L7, HBONE out (see proxy/README.md).
    Waypoint,
}

/// Where a waypoint takes HBONE, and the listener Istio names for it.
const WAYPOINT_HBONE: &str = "0.0.0.0:15008=connect_terminate";

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CaptureMode {
    Iptables,
    None,
}

/// Workload labels, sorted so the node metadata is stable.
pub type Labels = BTreeMap<String, String>;

/// One explicit binding of capture mode none.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ExplicitBinding {
    pub local: SocketAddr,
    pub listener: String,
    pub dest_port: Option<u16>,
}

/// The proxy's identity as the control plane sees it: the node id and the
/// Istio metadata the registry reads to register the workload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NodeIdentity {
    pub id: String,
    pub namespace: String,
    pub labels: Labels,
    pub service_account: String,
    pub instance_ips: Vec<IpAddr>,
    pub workload_name: String,
}

/// Everything the proxy was started with.
#[derive(Clone, Debug, Serialize)]
pub struct Config {
    pub xds_address: String,
    pub node: NodeIdentity,
    pub delta: bool,
    pub admin_address: SocketAddr,
    pub concurrency: u16,
    pub capture_mode: CaptureMode,
    pub listen: Vec<ExplicitBinding>,
    #[serde(serialize_with = "crate::state::ser_duration")]
    pub drain_duration: Duration,
    pub log_level: String,
}

impl Cli {
    /// Assembles the config. Errors are one line, for the user.
    pub fn into_config(self) -> Result<Config, String> {
        let ns = &self.pod_namespace;
        if ns.is_empty() || ns.contains(['~', '.']) {
            return Err(format!("invalid --pod-namespace {ns:?}: must be non-empty, without '~' or '.'"));
        }
        if self.pod_name.is_empty() || self.pod_name.contains('~') {
            return Err(format!("invalid --pod-name {:?}: must be non-empty, without '~'", self.pod_name));
        }
        let kind = match self.proxy_type {
            ProxyType::Sidecar => "sidecar",
            ProxyType::Router => "router",
            ProxyType::Waypoint => "waypoint",
        };
        let id = match self.node_id {
            Some(id) if id.split('~').count() != 4 => {
                return Err(format!(
                    "invalid --node-id {id:?}: want TYPE~IP~POD.NAMESPACE~NAMESPACE.svc.cluster.local"
                ));
            }
            Some(id) => id,
            None => format!("{kind}~{}~{}.{ns}~{ns}.svc.cluster.local", self.instance_ip, self.pod_name),
        };
        if !self.xds_address.contains("://") {
            let ok = self
                .xds_address
                .rsplit_once(':')
                .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
            if !ok {
                return Err(format!("invalid --xds-address {:?}: want HOST:PORT", self.xds_address));
            }
        }
        // A waypoint captures nothing: it binds HBONE's port for its
        // connect_terminate listener (or what --listen says instead).
        let (capture_mode, listen) = match self.proxy_type {
            ProxyType::Waypoint if self.listen.is_empty() => {
                (CaptureMode::None, vec![parse_binding(WAYPOINT_HBONE).expect("a valid binding")])
            }
            ProxyType::Waypoint => (CaptureMode::None, self.listen),
            _ => (self.capture_mode, self.listen),
        };
        if capture_mode == CaptureMode::Iptables && !listen.is_empty() {
            return Err("--listen is for --capture-mode none; with iptables the proxy binds 15001/15006".into());
        }
        let workload_name = self.workload_name.unwrap_or_else(|| self.pod_name.clone());
        Ok(Config {
            xds_address: self.xds_address,
            node: NodeIdentity {
                id,
                namespace: self.pod_namespace,
                labels: self.labels,
                service_account: self.service_account,
                instance_ips: vec![self.instance_ip],
                workload_name,
            },
            delta: self.delta && !self.sotw,
            admin_address: self.admin_address,
            concurrency: self.concurrency,
            capture_mode,
            listen,
            drain_duration: self.drain_duration,
            log_level: self.log_level,
        })
    }
}

/// Parses `k=v,k=v` (empty: no labels).
pub fn parse_labels(s: &str) -> Result<Labels, String> {
    let mut out = Labels::new();
    for pair in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => {
                out.insert(k.trim().to_string(), v.trim().to_string());
            }
            _ => return Err(format!("label {pair:?} is not key=value")),
        }
    }
    Ok(out)
}

/// Parses a duration: a whole number with a unit (`ms`, `s`, `m`), or whole
/// seconds alone, the form of Envoy's --drain-time-s and Istio's
/// TERMINATION_DRAIN_DURATION_SECONDS.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("{s:?} is not a duration: want e.g. 5s, 500ms, 1m or whole seconds");
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let n: u64 = number.parse().map_err(|_| bad())?;
    match unit {
        "" | "s" => Ok(Duration::from_secs(n)),
        "ms" => Ok(Duration::from_millis(n)),
        "m" => n.checked_mul(60).map(Duration::from_secs).ok_or_else(bad),
        _ => Err(bad()),
    }
}

/// Parses `LOCAL_ADDR=LISTENER[:DEST_PORT]`.
pub fn parse_binding(s: &str) -> Result<ExplicitBinding, String> {
    let (local, target) = s.split_once('=').ok_or_else(|| format!("{s:?} is not LOCAL_ADDR=LISTENER[:DEST_PORT]"))?;
    let local: SocketAddr = local.trim().parse().map_err(|_| format!("{local:?} is not an IP:PORT address"))?;
    let (listener, dest_port) = match target.rsplit_once(':') {
        Some((name, port)) => {
            let port = port.parse().map_err(|_| format!("{port:?} is not a port number"))?;
            (name, Some(port))
        }
        None => (target, None),
    };
    if listener.is_empty() {
        return Err(format!("{s:?} names no listener"));
    }
    Ok(ExplicitBinding { local, listener: listener.to_string(), dest_port })
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match serde_json::to_string(self) {
            Ok(s) => f.write_str(&s),
            Err(_) => write!(f, "{self:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Config, String> {
        let mut argv = vec!["meshperf-proxy"];
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv).map_err(|e| e.to_string())?.into_config()
    }

    #[test]
    fn builds_istio_node_id_and_metadata() {
        let c = parse(&[
            "--pod-name=cart-1",
            "--pod-namespace=shop",
            "--instance-ip=10.0.0.7",
            "--labels=app=cart, version=v1",
            "--service-account=cart",
        ])
        .unwrap();
        assert_eq!(c.node.id, "sidecar~10.0.0.7~cart-1.shop~shop.svc.cluster.local");
        assert_eq!(c.node.labels.get("version").map(String::as_str), Some("v1"));
        assert_eq!(c.node.workload_name, "cart-1");
        assert!(c.delta);
        assert_eq!(c.drain_duration, Duration::from_secs(5), "Istio's terminationDrainDuration default");
    }

    #[test]
    fn drain_duration_takes_units_or_whole_seconds() {
        for (arg, want) in [
            ("--drain-duration=0", Duration::ZERO),
            ("--drain-duration=7", Duration::from_secs(7)),
            ("--drain-duration=45s", Duration::from_secs(45)),
            ("--drain-duration=250ms", Duration::from_millis(250)),
            ("--drain-duration=2m", Duration::from_secs(120)),
        ] {
            assert_eq!(parse(&[arg]).unwrap().drain_duration, want, "{arg}");
        }
    }

    #[test]
    fn sotw_and_delta_false_select_state_of_the_world() {
        assert!(!parse(&["--sotw"]).unwrap().delta);
        assert!(!parse(&["--delta=false"]).unwrap().delta);
        assert!(parse(&["--delta"]).unwrap().delta);
    }

    #[test]
    fn explicit_bindings() {
        let c = parse(&[
            "--capture-mode=none",
            "--listen=127.0.0.1:18080=virtualInbound:8080,127.0.0.1:19000=0.0.0.0_9000",
        ])
        .unwrap();
        assert_eq!(c.listen.len(), 2);
        assert_eq!(c.listen[0].dest_port, Some(8080));
        assert_eq!(c.listen[1].listener, "0.0.0.0_9000");
        assert_eq!(c.listen[1].dest_port, None);
    }

    #[test]
    fn a_waypoint_binds_hbone_for_connect_terminate() {
        let c = parse(&["--proxy-type=waypoint", "--pod-name=wp-1", "--pod-namespace=shop"]).unwrap();
        assert_eq!(c.node.id, "waypoint~127.0.0.1~wp-1.shop~shop.svc.cluster.local");
        assert_eq!(c.capture_mode, CaptureMode::None);
        assert_eq!((c.listen[0].local.port(), c.listen[0].listener.as_str()), (15008, "connect_terminate"));
        let c = parse(&["--proxy-type=waypoint", "--listen=127.0.0.1:25008=connect_terminate"]).unwrap();
        assert_eq!(c.listen[0].local.port(), 25008);
    }

    #[test]
    fn bad_values_are_errors_not_panics() {
        for args in [
            &["--labels=novalue"][..],
            &["--instance-ip=nope"],
            &["--concurrency=0"],
            &["--capture-mode=tproxy"],
            &["--listen=127.0.0.1:1=x"], // listen needs capture mode none
            &["--capture-mode=none", "--listen=nowhere=x"],
            &["--node-id=a~b"],
            &["--pod-namespace=a.b"],
            &["--sotw", "--delta=true"],
            &["--xds-address=istiod"],
            &["--drain-duration=5h"],
            &["--drain-duration=-1s"],
            &["--drain-duration=1.5s"],
            &["--drain-duration="],
        ] {
            assert!(parse(args).is_err(), "{args:?} accepted");
        }
    }
}
