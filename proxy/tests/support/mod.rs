//! A scripted ADS server for the proxy's own tests: each stream the client
//! opens is handed to the test, which reads the client's requests and sends
//! responses by hand, and can end the stream by dropping it.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::{
    AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use envoy_types::pb::google::protobuf::Any;
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::{Request, Response, Status, Streaming};

pub const WAIT: Duration = Duration::from_secs(10);

/// One ADS stream as the test sees it.
pub struct AdsStream<Req, Resp> {
    pub requests: mpsc::Receiver<Req>,
    pub responses: mpsc::Sender<Result<Resp, Status>>,
}

impl<Req: std::fmt::Debug, Resp> AdsStream<Req, Resp> {
    pub async fn recv(&mut self) -> Req {
        tokio::time::timeout(WAIT, self.requests.recv())
            .await
            .expect("timed out waiting for a request")
            .expect("stream closed")
    }
    pub async fn send(&self, resp: Resp) {
        self.responses.send(Ok(resp)).await.expect("client gone");
    }
}

pub type DeltaStream = AdsStream<DeltaDiscoveryRequest, DeltaDiscoveryResponse>;
pub type SotwStream = AdsStream<DiscoveryRequest, DiscoveryResponse>;

struct Ads {
    delta: mpsc::Sender<DeltaStream>,
    sotw: mpsc::Sender<SotwStream>,
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

fn pump<T: Send + 'static>(mut incoming: Streaming<T>) -> mpsc::Receiver<T> {
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(async move {
        while let Ok(Some(m)) = incoming.message().await {
            if tx.send(m).await.is_err() {
                break;
            }
        }
    });
    rx
}

#[tonic::async_trait]
impl AggregatedDiscoveryService for Ads {
    type StreamAggregatedResourcesStream = BoxStream<DiscoveryResponse>;
    type DeltaAggregatedResourcesStream = BoxStream<DeltaDiscoveryResponse>;

    async fn stream_aggregated_resources(
        &self,
        request: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<Self::StreamAggregatedResourcesStream>, Status> {
        let (tx, rx) = mpsc::channel(64);
        let stream = AdsStream { requests: pump(request.into_inner()), responses: tx };
        self.sotw.send(stream).await.map_err(|_| Status::unavailable("test gone"))?;
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn delta_aggregated_resources(
        &self,
        request: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<Self::DeltaAggregatedResourcesStream>, Status> {
        let (tx, rx) = mpsc::channel(64);
        let stream = AdsStream { requests: pump(request.into_inner()), responses: tx };
        self.delta.send(stream).await.map_err(|_| Status::unavailable("test gone"))?;
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

pub struct AdsServer {
    pub addr: SocketAddr,
    pub delta: mpsc::Receiver<DeltaStream>,
    pub sotw: mpsc::Receiver<SotwStream>,
}

impl AdsServer {
    /// Serves on 127.0.0.1, port 0.
    pub async fn start() -> AdsServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (delta_tx, delta) = mpsc::channel(8);
        let (sotw_tx, sotw) = mpsc::channel(8);
        let svc = AggregatedDiscoveryServiceServer::new(Ads { delta: delta_tx, sotw: sotw_tx });
        tokio::spawn(
            tonic::transport::Server::builder().add_service(svc).serve_with_incoming(TcpListenerStream::new(listener)),
        );
        AdsServer { addr, delta, sotw }
    }

    pub async fn next_delta(&mut self) -> DeltaStream {
        tokio::time::timeout(WAIT, self.delta.recv()).await.expect("no delta stream").expect("server gone")
    }

    pub async fn next_sotw(&mut self) -> SotwStream {
        tokio::time::timeout(WAIT, self.sotw.recv()).await.expect("no sotw stream").expect("server gone")
    }
}

pub fn any<M: prost::Message + prost::Name>(m: &M) -> Any {
    Any { type_url: M::type_url(), value: m.encode_to_vec() }
}

/// A minimal consistent config: one EDS cluster `web`, one outbound HTTP
/// listener on port 80 using RDS `80`, which routes `path` to `web`.
pub mod config {
    use envoy_types::pb::envoy::config::cluster::v3 as cv3;
    use envoy_types::pb::envoy::config::core::v3 as core;
    use envoy_types::pb::envoy::config::endpoint::v3 as ev3;
    use envoy_types::pb::envoy::config::listener::v3 as lv3;
    use envoy_types::pb::envoy::config::route::v3 as rv3;
    use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3 as hcm;
    use envoy_types::pb::envoy::r#type::matcher::v3 as matcher;
    use envoy_types::pb::google::protobuf::Any;

    use super::any;

    fn socket(ip: &str, port: u32) -> Option<core::Address> {
        Some(core::Address {
            address: Some(core::address::Address::SocketAddress(core::SocketAddress {
                address: ip.into(),
                port_specifier: Some(core::socket_address::PortSpecifier::PortValue(port)),
                ..Default::default()
            })),
        })
    }

    pub fn cluster() -> Any {
        any(&cv3::Cluster {
            name: "web".into(),
            cluster_discovery_type: Some(cv3::cluster::ClusterDiscoveryType::Type(
                cv3::cluster::DiscoveryType::Eds as i32,
            )),
            eds_cluster_config: Some(cv3::cluster::EdsClusterConfig {
                service_name: "web".into(),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    pub fn endpoints(ip: &str) -> Any {
        any(&ev3::ClusterLoadAssignment {
            cluster_name: "web".into(),
            endpoints: vec![ev3::LocalityLbEndpoints {
                lb_endpoints: vec![ev3::LbEndpoint {
                    host_identifier: Some(ev3::lb_endpoint::HostIdentifier::Endpoint(ev3::Endpoint {
                        address: socket(ip, 8080),
                        ..Default::default()
                    })),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        })
    }

    pub fn listener() -> Any {
        let manager = hcm::HttpConnectionManager {
            stat_prefix: "outbound_0.0.0.0_80".into(),
            route_specifier: Some(hcm::http_connection_manager::RouteSpecifier::Rds(hcm::Rds {
                route_config_name: "80".into(),
                ..Default::default()
            })),
            http_filters: vec![hcm::HttpFilter { name: "envoy.filters.http.router".into(), ..Default::default() }],
            ..Default::default()
        };
        any(&lv3::Listener {
            name: "0.0.0.0_80".into(),
            address: socket("0.0.0.0", 80),
            filter_chains: vec![lv3::FilterChain {
                filters: vec![lv3::Filter {
                    name: "envoy.filters.network.http_connection_manager".into(),
                    config_type: Some(lv3::filter::ConfigType::TypedConfig(any(&manager))),
                }],
                ..Default::default()
            }],
            ..Default::default()
        })
    }

    /// Route config `80`; `regex` true routes by a safe_regex of `path`.
    pub fn routes(path: &str, regex: bool) -> Any {
        let spec = if regex {
            rv3::route_match::PathSpecifier::SafeRegex(matcher::RegexMatcher {
                regex: path.into(),
                ..Default::default()
            })
        } else {
            rv3::route_match::PathSpecifier::Prefix(path.into())
        };
        any(&rv3::RouteConfiguration {
            name: "80".into(),
            virtual_hosts: vec![rv3::VirtualHost {
                name: "web".into(),
                domains: vec!["*".into()],
                routes: vec![rv3::Route {
                    r#match: Some(rv3::RouteMatch { path_specifier: Some(spec), ..Default::default() }),
                    action: Some(rv3::route::Action::Route(rv3::RouteAction {
                        cluster_specifier: Some(rv3::route_action::ClusterSpecifier::Cluster("web".into())),
                        ..Default::default()
                    })),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        })
    }
}

/// Plays the control plane's side of a first delta sync of [`config`]: the
/// client ends up ready with one cluster, listener, route and endpoint set.
pub async fn serve_minimal_config(s: &mut DeltaStream) {
    use envoy_types::pb::envoy::service::discovery::v3::Resource;
    let resp = |type_url: &str, nonce: &str, name: &str, any: Any| DeltaDiscoveryResponse {
        type_url: type_url.into(),
        nonce: nonce.into(),
        resources: vec![Resource { name: name.into(), version: "1".into(), resource: Some(any), ..Default::default() }],
        ..Default::default()
    };
    const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
    const EDS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
    const LDS: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
    const RDS: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
    s.recv().await; // CDS
    s.recv().await; // LDS
    s.send(resp(CDS, "1", "web", config::cluster())).await;
    s.recv().await; // ACK
    s.recv().await; // EDS subscribe
    s.send(resp(LDS, "2", "0.0.0.0_80", config::listener())).await;
    s.recv().await; // ACK
    s.recv().await; // RDS subscribe
    s.send(resp(EDS, "3", "web", config::endpoints("10.1.0.1"))).await;
    s.recv().await;
    s.send(resp(RDS, "4", "80", config::routes("/", false))).await;
    s.recv().await;
}

/// A minimal HTTP/1.1 client: returns (status, body).
pub async fn http(addr: SocketAddr, method: &str, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut conn = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let req = format!("{method} {path} HTTP/1.1\r\nHost: admin\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    conn.write_all(req.as_bytes()).await.expect("write");
    let mut raw = Vec::new();
    tokio::time::timeout(WAIT, conn.read_to_end(&mut raw)).await.expect("response in time").expect("read");
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let status = raw.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = raw.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}
