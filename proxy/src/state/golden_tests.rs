//! Conversion of the control plane's own goldens
//! (`internal/pilot/snapshot/testdata/golden/*.json`, proto-JSON of everything
//! pilot sends one sidecar). The JSON is turned into real protobuf bytes with
//! descriptors compiled (protox) from the Envoy protos that envoy-types ships,
//! so these tests see exactly the messages the proxy receives on the wire.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use envoy_types::pb::google::protobuf::Any;
use prost_reflect::{DescriptorPool, DynamicMessage};

use super::*;

/// The envoy-types crate's proto directory, wherever cargo put it.
fn envoy_proto_dir() -> PathBuf {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version=1"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata");
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("cargo metadata JSON");
    let pkg = meta["packages"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == "envoy-types"))
        .expect("envoy-types in cargo metadata");
    let manifest = PathBuf::from(pkg["manifest_path"].as_str().expect("manifest_path"));
    manifest.parent().expect("crate dir").join("proto")
}

fn pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| {
        let root = envoy_proto_dir();
        let includes = [
            "data-plane-api",
            "xds",
            "protoc-gen-validate",
            "googleapis",
            "cel-spec/proto",
            "client_model",
            "opentelemetry-proto",
        ]
        .map(|d| root.join(d));
        let files = [
            "envoy/config/cluster/v3/cluster.proto",
            "envoy/config/endpoint/v3/endpoint.proto",
            "envoy/config/listener/v3/listener.proto",
            "envoy/config/route/v3/route.proto",
            "envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.proto",
            "envoy/extensions/filters/network/tcp_proxy/v3/tcp_proxy.proto",
            "envoy/extensions/filters/http/fault/v3/fault.proto",
            "envoy/extensions/filters/http/router/v3/router.proto",
            "envoy/extensions/filters/listener/tls_inspector/v3/tls_inspector.proto",
            "envoy/extensions/transport_sockets/tls/v3/tls.proto",
            "envoy/extensions/transport_sockets/tls/v3/secret.proto",
            "envoy/extensions/transport_sockets/raw_buffer/v3/raw_buffer.proto",
            "envoy/extensions/upstreams/http/v3/http_protocol_options.proto",
        ];
        let mut c = protox::Compiler::new(includes).expect("protox includes");
        c.include_imports(true);
        c.open_files(files).expect("compile envoy protos");
        c.descriptor_pool()
    })
}

/// Reads a golden file (concatenated proto-JSON objects) into Anys.
fn golden(name: &str) -> Vec<Any> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../internal/pilot/snapshot/testdata/golden").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::Deserializer::from_str(&text)
        .into_iter::<serde_json::Value>()
        .map(|v| {
            let mut v = v.expect("golden JSON");
            let type_url = v["@type"].as_str().expect("@type").to_string();
            v.as_object_mut().expect("object").remove("@type");
            let full_name = type_url.rsplit('/').next().unwrap_or_default();
            let desc = pool().get_message_by_name(full_name).unwrap_or_else(|| panic!("no descriptor for {full_name}"));
            let msg = DynamicMessage::deserialize(desc, v).unwrap_or_else(|e| panic!("{type_url}: {e}"));
            Any { type_url, value: prost::Message::encode_to_vec(&msg) }
        })
        .collect()
}

fn convert_all(anys: &[Any]) -> Snapshot {
    let mut s = Snapshot::default();
    for any in anys {
        let kind = any.type_url.rsplit('.').next().unwrap_or_default();
        match kind {
            "Cluster" => drop(s.clusters.insert(String::new(), Arc::new(Cluster::from_any(any).unwrap())).map(|_| ())),
            "ClusterLoadAssignment" => {
                let e = ClusterEndpoints::from_any(any).unwrap();
                s.endpoints.insert(e.cluster_name.clone(), Arc::new(e));
            }
            "Listener" => {
                let l = Listener::from_any(any).unwrap();
                s.listeners.insert(l.name.clone(), Arc::new(l));
            }
            "RouteConfiguration" => {
                let r = RouteConfig::from_any(any).unwrap();
                s.routes.insert(r.name.clone(), Arc::new(r));
            }
            other => panic!("unexpected type {other}"),
        }
        if kind == "Cluster" {
            let c = s.clusters.remove("").unwrap();
            s.clusters.insert(c.name.clone(), c);
        }
    }
    s
}

#[test]
fn shop_cart_proxy_golden_converts() {
    let s = convert_all(&golden("shop-cart-proxy.json"));
    assert_eq!(s.clusters.len(), 8);
    assert_eq!(s.listeners.len(), 4);
    assert_eq!(s.routes.len(), 2);

    let passthrough = &s.clusters["PassthroughCluster"];
    assert_eq!((passthrough.discovery, passthrough.lb_policy), (DiscoveryType::OriginalDst, LbPolicy::ClusterProvided));
    let cart = &s.clusters["outbound|80||cart.shop.svc.cluster.local"];
    assert_eq!(cart.discovery, DiscoveryType::Eds);
    assert_eq!(cart.eds_service_name.as_deref(), Some("outbound|80||cart.shop.svc.cluster.local"));
    assert_eq!(cart.connect_timeout, Duration::from_secs(10));
    let UpstreamTransport::Auto(tls) = &cart.transport else { panic!("cart transport: {:?}", cart.transport) };
    assert_eq!(tls.sni.as_deref(), Some("outbound_.80_._.cart.shop.svc.cluster.local"));
    assert_eq!(
        (tls.certificate_secret.as_deref(), tls.validation_secret.as_deref()),
        (Some("default"), Some("ROOTCA"))
    );
    assert_eq!(tls.alpn, ["istio-peer-exchange", "istio"]);
    // Upstream HTTP versions as pilot chose them: HTTP/2 for the gRPC port,
    // the client's own through the passthrough, the default elsewhere.
    assert_eq!(s.clusters["outbound|9000||payments.shop.svc.cluster.local"].protocol, UpstreamProtocol::Http2);
    assert_eq!(passthrough.protocol, UpstreamProtocol::UseDownstream);
    assert_eq!(cart.protocol, UpstreamProtocol::Http1);
    let inbound = &s.clusters["inbound|8080||"];
    let la = inbound.load_assignment.as_ref().expect("static endpoints");
    assert_eq!(la.endpoints[0].address, EndpointAddress::Socket("127.0.0.1:8080".parse().unwrap()));

    let eps = &s.endpoints["outbound|80|v1|cart.shop.svc.cluster.local"];
    assert_eq!(eps.endpoints.len(), 1);
    assert_eq!(eps.endpoints[0].tls_mode, TlsMode::Istio);
    assert!(s.endpoints["outbound|80||ledger.finance.svc.cluster.local"].endpoints.is_empty());

    let vo = &s.listeners["virtualOutbound"];
    assert_eq!((vo.kind, vo.address.port()), (ListenerKind::VirtualOutbound, 15001));
    let fallback = vo
        .select_chain(SocketAddr::from(([10, 0, 0, 9], 12345)), None, TransportProtocol::RawBuffer, &[])
        .expect("catch-all");
    let Handler::Tcp(t) = &fallback.handler else { panic!("catch-all is not TCP") };
    assert_eq!(t.target.names().collect::<Vec<_>>(), ["PassthroughCluster"]);

    let out80 = &s.listeners["0.0.0.0_80"];
    assert_eq!((out80.kind, out80.bind_to_port), (ListenerKind::Outbound, false));
    assert_eq!(out80.route_names().collect::<Vec<_>>(), ["80"]);

    let vi = &s.listeners["virtualInbound"];
    assert_eq!(vi.kind, ListenerKind::VirtualInbound);
    let mtls = vi
        .select_chain(SocketAddr::from(([10, 0, 0, 9], 8080)), None, TransportProtocol::Tls, &["h2"])
        .expect("8080 tls chain");
    let dtls = mtls.tls.as_ref().expect("8080 terminates TLS");
    assert!(dtls.require_client_certificate);
    assert_eq!(dtls.certificate_secret, "default");
    let Handler::Http(h) = &mtls.handler else { panic!("8080 is not HTTP") };
    let RouteSource::Inline(rc) = &h.routes else { panic!("inbound routes are inline") };
    assert_eq!(rc.cluster_names().collect::<Vec<_>>(), ["inbound|8080||"]);
    // STRICT: plain text to 8080 matches no chain and, as in Envoy, does not
    // fall back to the catch-all of a less specific port: it is closed.
    assert!(
        vi.select_chain(SocketAddr::from(([10, 0, 0, 9], 8080)), None, TransportProtocol::RawBuffer, &[]).is_none()
    );
    let other =
        vi.select_chain(SocketAddr::from(([10, 0, 0, 9], 9999)), None, TransportProtocol::RawBuffer, &[]).unwrap();
    assert_eq!(other.name, "virtualInbound-catchall");
    assert_eq!(vi.secret_names().collect::<Vec<_>>(), ["default", "ROOTCA"]);

    let r80 = &s.routes["80"];
    let cart_vh = r80.virtual_hosts.iter().find(|v| v.name == "cart.shop.svc.cluster.local:80").unwrap();
    assert!(cart_vh.domains.contains(&"cart:80".to_string()));
    let RouteAction::Forward(f) = &cart_vh.routes[0].action else { panic!("not forwarded") };
    assert_eq!(f.timeout, None, "0s means no timeout");
    let retry = f.retry.as_ref().expect("Istio's default retries");
    assert_eq!(retry.num_retries, 2);
    assert_eq!(retry.retriable_status_codes, [503]);
    assert!(
        retry.retry_on.contains(&RetryOn::ConnectFailure) && retry.retry_on.contains(&RetryOn::RetriableStatusCodes)
    );
    assert!(matches!(&cart_vh.routes[0].matcher.path, PathMatch::Prefix(p) if p == "/"));
}

#[test]
fn locked_down_golden_converts_and_blackholes_unknown_destinations() {
    let s = convert_all(&golden("shop-cart-proxy-locked-down.json"));
    let vo = &s.listeners["virtualOutbound"];
    let chain = vo
        .select_chain(SocketAddr::from(([10, 0, 0, 9], 12345)), None, TransportProtocol::RawBuffer, &[])
        .expect("catch-all");
    let Handler::Tcp(t) = &chain.handler else { panic!("catch-all is not TCP") };
    assert_eq!(t.target.names().collect::<Vec<_>>(), ["BlackHoleCluster"]);
    // REGISTRY_ONLY: unknown hosts get a direct 502 instead of the passthrough.
    let blocked = s.routes.values().flat_map(|r| &r.virtual_hosts).find(|v| v.name == "block_all").expect("block_all");
    assert!(matches!(blocked.routes[0].action, RouteAction::DirectResponse { status: 502, .. }));
}

/// Bad input never panics: every golden resource with random bytes flipped,
/// truncated or extended is either converted or refused with an error.
#[test]
fn mutated_goldens_never_panic() {
    let anys = golden("shop-cart-proxy.json");
    let mut rng = fastrand::Rng::with_seed(4);
    for _ in 0..3000 {
        let mut any = anys[rng.usize(..anys.len())].clone();
        match rng.u8(..3) {
            0 if !any.value.is_empty() => {
                for _ in 0..rng.usize(1..4) {
                    let i = rng.usize(..any.value.len());
                    any.value[i] ^= 1 << rng.u8(..8);
                }
            }
            1 => any.value.truncate(rng.usize(..=any.value.len())),
            _ => any.value.extend((0..rng.usize(1..16)).map(|_| rng.u8(..))),
        }
        let _ = match any.type_url.rsplit('.').next().unwrap_or_default() {
            "Cluster" => Cluster::from_any(&any).map(drop),
            "ClusterLoadAssignment" => ClusterEndpoints::from_any(&any).map(drop),
            "Listener" => Listener::from_any(&any).map(drop),
            "RouteConfiguration" => RouteConfig::from_any(&any).map(drop),
            _ => Secret::from_any(&any).map(drop),
        };
    }
}
