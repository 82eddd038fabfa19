//! Start-up configuration: flags with environment fallbacks (Istio's variable
//! names where Istio has one) parsed into one [`Config`] that `main` logs and the
//! admin endpoint shows. Bad values are reported by clap as one line and exit 2.
//!
//! `--proxy-type ztunnel` selects the node proxy role, configured as ztunnel is
//! off Kubernetes: by its environment variables (XDS_ADDRESS, CA_ADDRESS,
//! XDS_ROOT_CA, INPOD_UDS, ...), each also a flag of the same meaning.
//!
//! A sidecar or waypoint given `--ca-address` gets its own certificate from
//! the CA, as Istio's agent does, authenticated by the token in `--auth-token`
//! (the pilot serves no SDS secrets to a proxy that has not proven its
//! identity: the CA is the source). Every proxy given `--auth-token` also
//! sends it on its ADS stream, as istio-agent and ztunnel do, which binds the
//! stream to the token's identity.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Parser, ValueEnum};
use serde::Serialize;

/// What `--version` prints after the name: the crate's version and the git
/// commit it was built from ("-dirty" when the sources had uncommitted
/// changes, "unknown" outside a checkout), which results record as the data
/// plane's version.
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("MESHPERF_PROXY_COMMIT"), ")");

/// The command line as clap sees it; [`Cli::into_config`] validates and
/// assembles it into a [`Config`].
#[derive(Parser, Debug)]
#[command(name = "meshperf-proxy", version = VERSION, about = "meshperf's sidecar proxy, configured over xDS")]
pub struct Cli {
    /// Address of the control plane's ADS: HOST:PORT (plain-text gRPC) for a
    /// sidecar; https://HOST:PORT (TLS) for the node proxy, as ztunnel's.
    #[arg(long, env = "XDS_ADDRESS", default_value = "127.0.0.1:15010")]
    pub xds_address: String,
    /// Node proxy: PEM root that signed the control plane's serving certificate.
    #[arg(long, env = "XDS_ROOT_CA")]
    pub xds_root_ca: Option<PathBuf>,
    /// The certificate service, https://HOST:PORT (node proxy default:
    /// XDS_ADDRESS). A sidecar or waypoint given it gets its own certificate
    /// (`default` and `ROOTCA`) from there instead of from SDS.
    #[arg(long, env = "CA_ADDRESS")]
    pub ca_address: Option<String>,
    /// PEM root of the certificate service's serving certificate (node proxy
    /// default: XDS_ROOT_CA; required for a sidecar's or waypoint's --ca-address).
    #[arg(long, env = "CA_ROOT_CA")]
    pub ca_root_ca: Option<PathBuf>,
    /// A file holding the token to authenticate with, sent as
    /// `authorization: Bearer TOKEN` to the CA (re-read for every request)
    /// and on the ADS stream (re-read for every stream): the pod's projected
    /// istio-token (/var/run/secrets/tokens/istio-token on Kubernetes), or
    /// one from `meshperf pilot token`; none: no token is sent.
    #[arg(long, env = "AUTH_TOKEN")]
    pub auth_token: Option<PathBuf>,
    /// The name the control plane's and CA's certificates are verified
    /// against (default: the host of XDS_ADDRESS, or of CA_ADDRESS).
    #[arg(long, env = "ALT_XDS_HOSTNAME")]
    pub alt_xds_hostname: Option<String>,
    /// Node proxy: the CNI's socket handing over pods' network namespaces (ZDS).
    #[arg(long, env = "INPOD_UDS", default_value = DEFAULT_INPOD_UDS)]
    pub inpod_uds: PathBuf,
    /// The mesh's trust domain (the node proxy's, a sidecar's certificate's).
    #[arg(long, env = "TRUST_DOMAIN", default_value = "cluster.local")]
    pub trust_domain: String,
    /// Node proxy: the cluster this node belongs to (`source_cluster` and `destination_cluster`).
    #[arg(long, env = "CLUSTER_ID", default_value = "Kubernetes")]
    pub cluster_id: String,
    /// Node proxy: the node's name (NODE_NAME metadata).
    #[arg(long, env = "NODE_NAME", default_value = "")]
    pub node_name: String,
    /// Node proxy: traffic worker threads (ztunnel's default, 2).
    #[arg(long, env = "ZTUNNEL_WORKER_THREADS", default_value_t = 2,
          value_parser = clap::value_parser!(u16).range(1..=256))]
    pub worker_threads: u16,
    /// Node proxy: readiness (`/healthz/ready`), ztunnel's 15021.
    #[arg(long, env = "MESHPERF_READINESS_ADDRESS", default_value = "0.0.0.0:15021")]
    pub readiness_address: SocketAddr,
    /// Node proxy: metrics (`/stats/prometheus`), ztunnel's 15020.
    #[arg(long, env = "MESHPERF_STATS_ADDRESS", default_value = "0.0.0.0:15020")]
    pub stats_address: SocketAddr,
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
    /// Names, comma-separated, that the admin endpoint (and the node proxy's
    /// readiness and stats ports) answer to in the Host header besides IP
    /// addresses and localhost, which are always accepted; any other name is
    /// refused as DNS rebinding. `*` accepts every name (behind a proxy that
    /// rewrites Host), and gives that protection up.
    #[arg(long, env = "MESHPERF_ADMIN_ALLOWED_HOSTS", value_delimiter = ',', value_parser = parse_allowed_host)]
    pub admin_allowed_hosts: Vec<String>,
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
    /// The ambient node proxy (ztunnel's role).
    Ztunnel,
    /// An ambient waypoint: HBONE in on 15008, L7, HBONE out (see proxy/README.md).
    Waypoint,
}

/// ztunnel's default ZDS socket path.
pub const DEFAULT_INPOD_UDS: &str = "/var/run/ztunnel/ztunnel.sock";

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
    /// Further metadata, sent as strings: ztunnel's NAME, NODE_NAME,
    /// CLUSTER_ID and the ISTIO_META_* variables for the node proxy.
    #[serde(skip_serializing_if = "Labels::is_empty")]
    pub metadata: Labels,
}

/// The node proxy's settings (`--proxy-type ztunnel`), ztunnel's variables.
#[derive(Clone, Debug, Serialize)]
pub struct NodeProxyConfig {
    /// TLS to the control plane's ADS.
    pub xds_tls: TlsServerName,
    /// The certificate service and how its serving certificate is verified.
    pub ca_address: String,
    pub ca_tls: TlsServerName,
    /// The token file sent to the CA (on Kubernetes the DaemonSet's
    /// projected istio-ca token, which the CA checks before it signs for
    /// the node's pods), if any.
    pub auth_token: Option<PathBuf>,
    pub inpod_uds: PathBuf,
    pub trust_domain: String,
    pub cluster_id: String,
    pub node_name: String,
    pub worker_threads: u16,
    pub readiness_address: SocketAddr,
    pub stats_address: SocketAddr,
}

/// A sidecar's or waypoint's own certificate from the CA (`--ca-address`),
/// Istio's agent's way.
#[derive(Clone, Debug, Serialize)]
pub struct OwnCaConfig {
    pub ca_address: String,
    pub ca_tls: TlsServerName,
    /// The token file sent to the CA, if any.
    pub auth_token: Option<PathBuf>,
    /// The SPIFFE id asked for: the pod's service account's.
    pub identity: String,
}

/// How a TLS server (the control plane, the CA) is verified: the root that
/// signed its certificate and the name that certificate must carry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TlsServerName {
    pub root_ca: PathBuf,
    pub server_name: String,
}

/// Everything the proxy was started with.
#[derive(Clone, Debug, Serialize)]
pub struct Config {
    pub xds_address: String,
    pub node: NodeIdentity,
    pub delta: bool,
    pub admin_address: SocketAddr,
    pub admin_allowed_hosts: Vec<String>,
    pub concurrency: u16,
    pub capture_mode: CaptureMode,
    pub listen: Vec<ExplicitBinding>,
    #[serde(serialize_with = "crate::state::ser_duration")]
    pub drain_duration: Duration,
    pub log_level: String,
    /// Set for `--proxy-type ztunnel`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_proxy: Option<NodeProxyConfig>,
    /// Set for a sidecar or waypoint given `--ca-address`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub own_ca: Option<OwnCaConfig>,
    /// The token file sent on the ADS stream (`--auth-token`), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xds_auth_token: Option<PathBuf>,
}

impl Cli {
    /// Assembles the config. Errors are one line, for the user.
    pub fn into_config(self) -> Result<Config, String> {
        self.into_config_with_env(std::env::vars())
    }

    /// As [`Cli::into_config`], with the environment given (the node proxy
    /// sends the ISTIO_META_* variables as node metadata, as ztunnel does).
    pub fn into_config_with_env(self, env: impl Iterator<Item = (String, String)>) -> Result<Config, String> {
        let ns = &self.pod_namespace;
        if ns.is_empty() || ns.contains(['~', '.']) {
            return Err(format!("invalid --pod-namespace {ns:?}: must be non-empty, without '~' or '.'"));
        }
        if self.pod_name.is_empty() || self.pod_name.contains('~') {
            return Err(format!("invalid --pod-name {:?}: must be non-empty, without '~'", self.pod_name));
        }
        if let Some(token) = &self.auth_token {
            // Only that it is there: its content is read (and checked) per
            // request and per stream, as the kubelet rewrites it.
            std::fs::metadata(token).map_err(|e| format!("--auth-token {}: {e}", token.display()))?;
        }
        let node_proxy = match self.proxy_type {
            ProxyType::Ztunnel => Some(self.node_proxy_config()?),
            ProxyType::Sidecar | ProxyType::Router | ProxyType::Waypoint => None,
        };
        let own_ca = match (self.proxy_type, &self.ca_address) {
            (ProxyType::Sidecar | ProxyType::Waypoint, Some(address)) => Some(self.own_ca_config(address)?),
            (ProxyType::Router, Some(_)) => {
                return Err("--ca-address is for --proxy-type sidecar, waypoint or ztunnel; a router takes its certificates from SDS".into());
            }
            _ => None,
        };
        let kind = match self.proxy_type {
            ProxyType::Sidecar => "sidecar",
            ProxyType::Router => "router",
            ProxyType::Ztunnel => "ztunnel",
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
        let mut metadata = Labels::new();
        if let Some(np) = &node_proxy {
            metadata.insert("NAME".into(), self.pod_name.clone());
            metadata.insert("NODE_NAME".into(), np.node_name.clone());
            metadata.insert("CLUSTER_ID".into(), np.cluster_id.clone());
            for (k, v) in env {
                if let Some(key) = k.strip_prefix("ISTIO_META_").filter(|k| !k.is_empty()) {
                    metadata.insert(key.to_string(), v);
                }
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
                metadata,
            },
            delta: self.delta && !self.sotw,
            admin_address: self.admin_address,
            admin_allowed_hosts: self.admin_allowed_hosts,
            concurrency: self.concurrency,
            capture_mode,
            listen,
            drain_duration: self.drain_duration,
            log_level: self.log_level,
            node_proxy,
            own_ca,
            xds_auth_token: self.auth_token,
        })
    }

    /// A sidecar's or waypoint's CA: over TLS only, verified by a root that
    /// can be read now, for the identity of its pod's service account.
    fn own_ca_config(&self, address: &str) -> Result<OwnCaConfig, String> {
        let host =
            https_host(address).ok_or_else(|| format!("invalid --ca-address {address:?}: want https://HOST:PORT"))?;
        let root = self.ca_root_ca.clone().ok_or("--ca-root-ca (CA_ROOT_CA) is required with --ca-address")?;
        std::fs::metadata(&root).map_err(|e| format!("--ca-root-ca {}: {e}", root.display()))?;
        let identity = format!("spiffe://{}/ns/{}/sa/{}", self.trust_domain, self.pod_namespace, self.service_account);
        identity
            .parse::<crate::identity::Identity>()
            .map_err(|e| format!("invalid --trust-domain or --service-account: {e}"))?;
        Ok(OwnCaConfig {
            ca_address: address.to_string(),
            ca_tls: TlsServerName {
                root_ca: root,
                server_name: self.alt_xds_hostname.clone().unwrap_or_else(|| host.to_string()),
            },
            auth_token: self.auth_token.clone(),
            identity,
        })
    }

    /// The node proxy's part: the control plane and the CA only over TLS
    /// (ztunnel refuses plain gRPC), with roots that can be read now.
    fn node_proxy_config(&self) -> Result<NodeProxyConfig, String> {
        let xds_host = https_host(&self.xds_address).ok_or_else(|| {
            format!("invalid --xds-address {:?}: the node proxy wants https://HOST:PORT", self.xds_address)
        })?;
        let ca_address = self.ca_address.clone().unwrap_or_else(|| self.xds_address.clone());
        let ca_host = https_host(&ca_address)
            .ok_or_else(|| format!("invalid --ca-address {ca_address:?}: want https://HOST:PORT"))?;
        let xds_root =
            self.xds_root_ca.clone().ok_or("--xds-root-ca (XDS_ROOT_CA) is required with --proxy-type ztunnel")?;
        let ca_root = self.ca_root_ca.clone().unwrap_or_else(|| xds_root.clone());
        for (flag, path) in [("--xds-root-ca", &xds_root), ("--ca-root-ca", &ca_root)] {
            std::fs::metadata(path).map_err(|e| format!("{flag} {}: {e}", path.display()))?;
        }
        if self.trust_domain.is_empty() || self.trust_domain.contains('/') {
            return Err(format!("invalid --trust-domain {:?}: want a name like cluster.local", self.trust_domain));
        }
        let name = |host: &str| self.alt_xds_hostname.clone().unwrap_or_else(|| host.to_string());
        Ok(NodeProxyConfig {
            xds_tls: TlsServerName { root_ca: xds_root, server_name: name(xds_host) },
            ca_tls: TlsServerName { root_ca: ca_root, server_name: name(ca_host) },
            ca_address,
            auth_token: self.auth_token.clone(),
            inpod_uds: self.inpod_uds.clone(),
            trust_domain: self.trust_domain.clone(),
            cluster_id: self.cluster_id.clone(),
            node_name: self.node_name.clone(),
            worker_threads: self.worker_threads,
            readiness_address: self.readiness_address,
            stats_address: self.stats_address,
        })
    }
}

/// The host of an `https://HOST:PORT` URI; None for anything else.
fn https_host(uri: &str) -> Option<&str> {
    let rest = uri.strip_prefix("https://")?.trim_end_matches('/');
    let (host, port) = rest.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    (!host.is_empty() && !host.contains('/') && port.parse::<u16>().is_ok()).then_some(host)
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

/// Parses one of `--admin-allowed-hosts`: a host name, compared as the
/// admin compares them (lowercased, no trailing dot), or `*`.
pub fn parse_allowed_host(s: &str) -> Result<String, String> {
    let name = s.trim();
    let valid = name == "*"
        || (!name.is_empty()
            && name.len() <= 254
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_')));
    if !valid {
        return Err(format!(
            "{s:?} is not a host name: give names only, without scheme or port, or * for any (IP addresses and localhost are always accepted)"
        ));
    }
    Ok(crate::admin::normalize_host_name(name))
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
    fn version_names_the_commit_built_from() {
        let err = Cli::try_parse_from(["meshperf-proxy", "--version"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::DisplayVersion);
        let printed = err.to_string();
        let commit = printed
            .trim()
            .strip_prefix(concat!("meshperf-proxy ", env!("CARGO_PKG_VERSION"), " (commit "))
            .and_then(|rest| rest.strip_suffix(')'))
            .unwrap_or_else(|| panic!("--version printed {printed:?}"));
        // Built in the project's checkout: a full commit, not "unknown".
        let hex = commit.strip_suffix("-dirty").unwrap_or(commit);
        assert!(hex.len() == 40 && hex.bytes().all(|b| b.is_ascii_hexdigit()), "commit {commit:?}");
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
    fn an_auth_token_is_sent_on_ads_by_every_proxy_type() {
        let token = std::env::temp_dir().join(format!("meshperf-proxy-config-token-{}", std::process::id()));
        std::fs::write(&token, "not read here").unwrap();
        let token_arg = format!("--auth-token={}", token.display());
        for kind in ["sidecar", "router", "waypoint"] {
            let c = parse(&[&format!("--proxy-type={kind}"), &token_arg]).unwrap();
            assert_eq!(c.xds_auth_token.as_deref(), Some(token.as_path()), "{kind}: without --ca-address too");
            assert!(c.own_ca.is_none(), "{kind}: the token alone asks no CA");
        }
        assert_eq!(parse(&[]).unwrap().xds_auth_token, None, "no token, none sent");
        let err = parse(&["--auth-token=/nonexistent/token"]).unwrap_err();
        assert!(err.contains("--auth-token /nonexistent/token"), "{err}");
    }

    #[test]
    fn a_sidecar_or_waypoint_with_a_ca_address_asks_for_its_pods_identity() {
        let root = std::env::temp_dir().join(format!("meshperf-proxy-config-root-{}", std::process::id()));
        std::fs::write(&root, "not read here").unwrap();
        let root_arg = format!("--ca-root-ca={}", root.display());
        let c = parse(&[
            "--pod-namespace=shop",
            "--service-account=cart",
            "--ca-address=https://meshperf-pilot.meshperf-system.svc:15012",
            &root_arg,
            "--alt-xds-hostname=istiod.istio-system.svc",
        ])
        .unwrap();
        let ca = c.own_ca.expect("a sidecar CA");
        assert_eq!(ca.identity, "spiffe://cluster.local/ns/shop/sa/cart");
        assert_eq!(ca.ca_tls.server_name, "istiod.istio-system.svc");
        assert_eq!(ca.auth_token, None);
        assert!(parse(&[]).unwrap().own_ca.is_none(), "without --ca-address: SDS, as before");
        // A waypoint on Kubernetes: the pilot serves it no SDS secrets, so it
        // asks the CA for its pod's identity as a sidecar does.
        let c = parse(&[
            "--proxy-type=waypoint",
            "--pod-namespace=shop",
            "--service-account=waypoint",
            "--ca-address=https://meshperf-pilot.meshperf-system.svc:15012",
            &root_arg,
        ])
        .unwrap();
        let ca = c.own_ca.expect("a waypoint CA");
        assert_eq!(ca.identity, "spiffe://cluster.local/ns/shop/sa/waypoint");
        assert_eq!(ca.ca_tls.server_name, "meshperf-pilot.meshperf-system.svc");
        assert!(parse(&["--proxy-type=waypoint"]).unwrap().own_ca.is_none(), "without --ca-address: SDS");

        for (args, want) in [
            (vec!["--ca-address=https://ca:15012"], "--ca-root-ca (CA_ROOT_CA) is required"),
            (vec!["--ca-address=ca:15012", &root_arg], "want https://HOST:PORT"),
            (vec!["--ca-address=https://ca:15012", "--ca-root-ca=/nonexistent/root.pem"], "--ca-root-ca /nonexistent"),
            (
                vec!["--ca-address=https://ca:15012", &root_arg, "--auth-token=/nonexistent/token"],
                "--auth-token /nonexistent",
            ),
            (
                vec!["--ca-address=https://ca:15012", &root_arg, "--service-account=a/b"],
                "invalid --trust-domain or --service-account",
            ),
            (
                vec!["--ca-address=https://ca:15012", &root_arg, "--proxy-type=router"],
                "a router takes its certificates from SDS",
            ),
        ] {
            let err = parse(&args).unwrap_err();
            assert!(err.contains(want), "{args:?}: {err}");
        }
        let _ = std::fs::remove_file(&root);
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
    fn admin_allowed_hosts_are_names_compared_as_the_admin_compares_them() {
        assert!(parse(&[]).unwrap().admin_allowed_hosts.is_empty(), "IP addresses and localhost only, by default");
        let c = parse(&["--admin-allowed-hosts=Proxy.Example.,admin.internal", "--admin-allowed-hosts=*"]).unwrap();
        assert_eq!(c.admin_allowed_hosts, ["proxy.example", "admin.internal", "*"]);
        assert!(c.to_string().contains(r#""admin_allowed_hosts":["proxy.example","admin.internal","*"]"#), "{c}");
        for bad in ["admin.example:15000", "http://admin.example", "two words", "", "[::1]"] {
            let err = parse(&[&format!("--admin-allowed-hosts={bad}")]).unwrap_err();
            assert!(err.contains("is not a host name"), "{bad:?}: {err}");
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

    fn ztunnel(args: &[&str], env: &[(&str, &str)]) -> Result<Config, String> {
        let mut argv = vec!["meshperf-proxy", "--proxy-type=ztunnel"];
        argv.extend_from_slice(args);
        let env = env.iter().map(|(k, v)| (k.to_string(), v.to_string()));
        Cli::try_parse_from(argv).map_err(|e| e.to_string())?.into_config_with_env(env)
    }

    #[test]
    fn ztunnel_role_builds_its_node_id_metadata_and_tls() {
        let root = env!("CARGO_MANIFEST_DIR").to_string() + "/Cargo.toml"; // any readable file
        let c = ztunnel(
            &[
                "--xds-address=https://10.0.0.1:15012",
                &format!("--xds-root-ca={root}"),
                "--alt-xds-hostname=istiod.istio-system.svc",
                "--instance-ip=10.0.0.9",
                "--pod-name=ztunnel-a",
                "--pod-namespace=istio-system",
                "--node-name=node-a",
            ],
            &[("ISTIO_META_DNS_CAPTURE", "false"), ("PATH", "/bin")],
        )
        .unwrap();
        assert_eq!(c.node.id, "ztunnel~10.0.0.9~ztunnel-a.istio-system~istio-system.svc.cluster.local");
        let m = &c.node.metadata;
        assert_eq!(m["NAME"], "ztunnel-a");
        assert_eq!(m["NODE_NAME"], "node-a");
        assert_eq!(m["CLUSTER_ID"], "Kubernetes");
        assert_eq!(m["DNS_CAPTURE"], "false");
        assert!(!m.contains_key("PATH"));
        let np = c.node_proxy.unwrap();
        assert_eq!(np.xds_tls.server_name, "istiod.istio-system.svc");
        assert_eq!(np.ca_address, "https://10.0.0.1:15012", "CA_ADDRESS defaults to XDS_ADDRESS");
        assert_eq!(np.ca_tls.root_ca, np.xds_tls.root_ca);
        assert_eq!(np.worker_threads, 2, "ztunnel's default");
        assert_eq!(np.trust_domain, "cluster.local");
        assert_eq!(np.inpod_uds, PathBuf::from(DEFAULT_INPOD_UDS));
        assert_eq!(np.auth_token, None, "none given, none sent");
    }

    #[test]
    fn ztunnel_role_sends_its_auth_token_to_the_ca() {
        let file = env!("CARGO_MANIFEST_DIR").to_string() + "/Cargo.toml"; // any readable file
        let root = format!("--xds-root-ca={file}");
        let token = format!("--auth-token={file}");
        let c = ztunnel(&["--xds-address=https://h:1", &root, &token], &[]).unwrap();
        assert_eq!(c.node_proxy.unwrap().auth_token, Some(PathBuf::from(&file)), "AUTH_TOKEN, as a sidecar's");
        let err = ztunnel(&["--xds-address=https://h:1", &root, "--auth-token=/nonexistent/token"], &[]).unwrap_err();
        assert!(err.contains("--auth-token /nonexistent/token"), "{err}");
    }

    #[test]
    fn ztunnel_role_bad_values_are_one_line_errors() {
        let root = format!("--xds-root-ca={}/Cargo.toml", env!("CARGO_MANIFEST_DIR"));
        for (args, want) in [
            (vec!["--xds-address=https://10.0.0.1:15012"], "--xds-root-ca"),
            (vec!["--xds-address=10.0.0.1:15012", &root], "https://HOST:PORT"),
            (vec!["--xds-address=https://10.0.0.1", &root], "https://HOST:PORT"),
            (vec!["--xds-address=https://h:1", &root, "--ca-address=http://h:2"], "--ca-address"),
            (vec!["--xds-address=https://h:1", "--xds-root-ca=/nonexistent/root.pem"], "/nonexistent/root.pem"),
            (vec!["--xds-address=https://h:1", &root, "--worker-threads=0"], "worker-threads"),
            (vec!["--xds-address=https://h:1", &root, "--trust-domain="], "trust-domain"),
        ] {
            let err = ztunnel(&args, &[]).expect_err(&format!("{args:?} accepted"));
            assert!(err.contains(want), "{args:?}: {err}");
        }
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
