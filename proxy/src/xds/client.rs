//! Keeps one ADS stream up: connects, runs the delta or SotW protocol, and on
//! any failure waits (exponential backoff with jitter, reset once a stream has
//! delivered a response) and reconnects. The snapshot in [`State`] is never
//! cleared here, so traffic keeps flowing on the last good config while the
//! control plane is away.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind};
use tokio::sync::watch;
use tonic::transport::{Channel, Endpoint};

use super::store::{Readiness, ResourceStore};
use super::{XdsError, XdsMetrics, XdsStore};
use crate::config::{NodeIdentity, TlsServerName};
use crate::state::State;

const INITIAL_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(15);

#[derive(Debug, Clone)]
pub struct XdsConfig {
    /// The control plane's ADS: HOST:PORT or http://HOST:PORT (plain-text
    /// gRPC), https://HOST:PORT with `tls`.
    pub address: String,
    pub node: NodeIdentity,
    pub delta: bool,
    /// TLS to the control plane (the node proxy's only transport, as ztunnel's).
    pub tls: Option<TlsServerName>,
    /// A file holding the token sent on every stream as `authorization:
    /// Bearer TOKEN`, as istio-agent and ztunnel send it: it proves the
    /// identity the node metadata claims, which the control plane then
    /// holds the proxy to. Re-read per stream, as the kubelet rotates it.
    pub auth_token: Option<PathBuf>,
}

pub struct XdsClient {
    config: XdsConfig,
    store: Box<dyn XdsStore>,
    metrics: Arc<XdsMetrics>,
}

impl XdsClient {
    /// A sidecar's or waypoint's client that fills `state`; the returned
    /// [`Readiness`] turns true on the first complete config, which includes
    /// `bound_listeners`, the listeners the proxy's explicit bindings serve.
    pub fn new(config: XdsConfig, state: Arc<State>, bound_listeners: BTreeSet<String>) -> (XdsClient, Readiness) {
        let (store, ready) = ResourceStore::new(state, bound_listeners);
        (XdsClient::with_store(config, Box::new(store)), ready)
    }

    /// A client that fills any store (the node proxy's workload discovery).
    pub fn with_store(config: XdsConfig, store: Box<dyn XdsStore>) -> XdsClient {
        let types: Vec<_> = store.wildcard_types().iter().chain(store.named_types()).copied().collect();
        let metrics = if types.iter().all(|t| super::ResourceType::ENVOY.contains(t)) {
            XdsMetrics::default()
        } else {
            XdsMetrics::for_types(&super::ResourceType::WORKLOAD)
        };
        XdsClient { config, store, metrics: Arc::new(metrics) }
    }

    pub fn metrics(&self) -> Arc<XdsMetrics> {
        self.metrics.clone()
    }

    /// Runs until `shutdown` turns true.
    pub async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
        let endpoint = match endpoint(&self.config.address) {
            Ok(e) => e,
            Err(e) => {
                tracing::error!(error = %e, "xds client not started");
                return;
            }
        };
        let mut backoff = INITIAL_BACKOFF;
        loop {
            let mut got_response = false;
            let stream = self.stream_once(&endpoint, &mut got_response);
            let result = tokio::select! {
                r = stream => r,
                _ = shutdown.wait_for(|s| *s) => return,
            };
            self.metrics.set_connected(false);
            if got_response {
                backoff = INITIAL_BACKOFF;
            }
            let delay = jittered(backoff);
            match result {
                Ok(()) => tracing::warn!(retry_in = ?delay, "xds: control plane closed the stream"),
                Err(e) => tracing::warn!(error = %e, retry_in = ?delay, "xds: stream failed"),
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = shutdown.wait_for(|s| *s) => return,
            }
            self.metrics.reconnect();
        }
    }

    async fn stream_once(&mut self, endpoint: &Endpoint, got_response: &mut bool) -> Result<(), XdsError> {
        let channel: Channel = match &self.config.tls {
            // Lazy: a control plane that is not up fails the stream below.
            Some(tls) => crate::tls::control_plane_channel(&self.config.address, &tls.root_ca, Some(&tls.server_name))?,
            None => endpoint.connect().await?,
        };
        let auth = self.config.auth_token.as_deref().map(crate::identity::bearer).transpose()?;
        tracing::info!(address = %self.config.address, delta = self.config.delta, token = auth.is_some(), "xds: connected");
        let node = node(&self.config.node);
        let on_response = || *got_response = true;
        if self.config.delta {
            super::delta::run(channel, auth, node, self.store.as_mut(), &self.metrics, on_response).await
        } else {
            super::sotw::run(channel, auth, node, self.store.as_mut(), &self.metrics, on_response).await
        }
    }
}

fn endpoint(address: &str) -> Result<Endpoint, XdsError> {
    let uri = if address.contains("://") { address.to_string() } else { format!("http://{address}") };
    let e = Endpoint::from_shared(uri).map_err(|_| XdsError::Address(address.to_string()))?;
    Ok(e.connect_timeout(Duration::from_secs(5))
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(30))
        .keep_alive_timeout(Duration::from_secs(10)))
}

/// Half to all of `d`, so that many proxies do not reconnect in step.
fn jittered(d: Duration) -> Duration {
    d.mul_f64(0.5 + fastrand::f64() * 0.5)
}

fn string(s: impl Into<String>) -> Value {
    Value { kind: Some(Kind::StringValue(s.into())) }
}

/// The Envoy node: Istio's id and the metadata the control plane registers
/// the workload from.
pub(crate) fn node(n: &NodeIdentity) -> Node {
    let labels = Struct { fields: n.labels.iter().map(|(k, v)| (k.clone(), string(v.clone()))).collect() };
    let ips: Vec<String> = n.instance_ips.iter().map(|ip| ip.to_string()).collect();
    let mut fields = std::collections::HashMap::new();
    fields.insert("NAMESPACE".to_string(), string(n.namespace.clone()));
    fields.insert("LABELS".to_string(), Value { kind: Some(Kind::StructValue(labels)) });
    fields.insert("SERVICE_ACCOUNT".to_string(), string(n.service_account.clone()));
    fields.insert("INSTANCE_IPS".to_string(), string(ips.join(",")));
    fields.insert("WORKLOAD_NAME".to_string(), string(n.workload_name.clone()));
    for (k, v) in &n.metadata {
        fields.insert(k.clone(), string(v.clone()));
    }
    Node {
        id: n.id.clone(),
        cluster: format!("{}.{}", n.workload_name, n.namespace),
        metadata: Some(Struct { fields }),
        user_agent_name: "meshperf-proxy".to_string(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_jitter_stays_within_half_to_full() {
        for _ in 0..100 {
            let d = jittered(Duration::from_secs(2));
            assert!(d >= Duration::from_secs(1) && d <= Duration::from_secs(2), "{d:?}");
        }
    }

    #[test]
    fn node_carries_istio_metadata() {
        let id = NodeIdentity {
            id: "sidecar~10.0.0.1~a.ns~ns.svc.cluster.local".into(),
            namespace: "ns".into(),
            labels: [("app".to_string(), "a".to_string())].into(),
            service_account: "sa".into(),
            instance_ips: vec!["10.0.0.1".parse().unwrap()],
            workload_name: "a".into(),
            metadata: [("NODE_NAME".to_string(), "node-a".to_string())].into(),
        };
        let n = node(&id);
        let f = &n.metadata.unwrap().fields;
        assert_eq!(f["INSTANCE_IPS"].kind, Some(Kind::StringValue("10.0.0.1".into())));
        let Some(Kind::StructValue(labels)) = &f["LABELS"].kind else { panic!("LABELS not a struct") };
        assert_eq!(labels.fields["app"].kind, Some(Kind::StringValue("a".into())));
        assert_eq!(f["NODE_NAME"].kind, Some(Kind::StringValue("node-a".into())));
    }
}
