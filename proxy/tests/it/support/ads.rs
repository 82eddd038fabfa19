//! A scripted ADS server for the proxy's own tests: each stream the client
//! opens is handed to the test, which reads the client's requests and sends
//! responses by hand (or has [`sync`] answer the first subscriptions), and
//! can end the stream by dropping it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::pin::Pin;

use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::{
    AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse, Resource,
};
use envoy_types::pb::google::protobuf::Any;
use meshperf_proxy::xds::ResourceType;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::{Request, Response, Status, Streaming};

use super::{WAIT, envoy};

/// One ADS stream as the test sees it.
pub struct AdsStream<Req, Resp> {
    pub requests: mpsc::Receiver<Req>,
    pub responses: mpsc::Sender<Result<Resp, Status>>,
    /// The stream's `authorization` header, as the client sent it.
    pub authorization: Option<String>,
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

/// Hands a new stream to the test; the responses it sends go back to the client.
async fn open<Req: Send + 'static, Resp: Send + 'static>(
    to_test: &mpsc::Sender<AdsStream<Req, Resp>>,
    request: Request<Streaming<Req>>,
) -> Result<Response<BoxStream<Resp>>, Status> {
    let (tx, rx) = mpsc::channel(64);
    let authorization = request.metadata().get("authorization").and_then(|v| v.to_str().ok()).map(str::to_string);
    let stream = AdsStream { requests: pump(request.into_inner()), responses: tx, authorization };
    to_test.send(stream).await.map_err(|_| Status::unavailable("test gone"))?;
    Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
}

#[tonic::async_trait]
impl AggregatedDiscoveryService for Ads {
    type StreamAggregatedResourcesStream = BoxStream<DiscoveryResponse>;
    type DeltaAggregatedResourcesStream = BoxStream<DeltaDiscoveryResponse>;

    async fn stream_aggregated_resources(
        &self,
        request: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<Self::StreamAggregatedResourcesStream>, Status> {
        open(&self.sotw, request).await
    }

    async fn delta_aggregated_resources(
        &self,
        request: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<Self::DeltaAggregatedResourcesStream>, Status> {
        open(&self.delta, request).await
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
        AdsServer::start_on(TcpListener::bind("127.0.0.1:0").await.unwrap())
    }

    /// Serves on a listener the test has bound.
    pub fn start_on(listener: TcpListener) -> AdsServer {
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

/// A delta response of type `t` with `nonce`; each resource's version is
/// `NAME-NONCE`, the type's `v-NONCE`.
pub fn delta_response(t: ResourceType, nonce: &str, resources: Vec<(&str, Any)>) -> DeltaDiscoveryResponse {
    DeltaDiscoveryResponse {
        type_url: t.type_url().into(),
        nonce: nonce.into(),
        system_version_info: format!("v-{nonce}"),
        resources: resources
            .into_iter()
            .map(|(name, any)| Resource {
                name: name.into(),
                version: format!("{name}-{nonce}"),
                resource: Some(any),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// What the control plane has for each type, by resource name.
pub type Resources = BTreeMap<ResourceType, Vec<(String, Any)>>;

/// The `web` mesh of [`envoy`]: cluster, listener, endpoints and routes.
pub fn web_mesh() -> Resources {
    BTreeMap::from([
        (ResourceType::Cluster, vec![("web".into(), envoy::cluster())]),
        (ResourceType::Listener, vec![("0.0.0.0_80".into(), envoy::listener())]),
        (ResourceType::Endpoint, vec![("web".into(), envoy::endpoints("10.1.0.1"))]),
        (ResourceType::Route, vec![("80".into(), envoy::routes("/", false))]),
    ])
}

/// Plays the control plane's side of a first delta sync: answers the first
/// request of each type in `resources` with all of that type's resources
/// (nonces `sync-N`), and returns once every answer has been ACKed. A NACK
/// fails the test.
pub async fn sync(s: &mut DeltaStream, mut resources: Resources) {
    let mut unacked = Vec::new();
    let mut nonce = 0;
    while !resources.is_empty() || !unacked.is_empty() {
        let req = s.recv().await;
        if let Some(i) = unacked.iter().position(|n| *n == req.response_nonce) {
            assert!(req.error_detail.is_none(), "NACK in the first sync: {:?}", req.error_detail);
            unacked.swap_remove(i);
        }
        let t = ResourceType::from_type_url(&req.type_url).expect("a known type");
        if let Some(res) = resources.remove(&t) {
            nonce += 1;
            let n = format!("sync-{nonce}");
            s.send(delta_response(t, &n, res.iter().map(|(name, any)| (name.as_str(), any.clone())).collect())).await;
            unacked.push(n);
        }
    }
}

/// Answers the first subscriptions of the next delta stream with
/// `resources`, then keeps the stream open and takes whatever the client
/// sends, until the server is dropped with the task.
pub async fn serve(mut server: AdsServer, resources: Resources) -> tokio::task::JoinHandle<()> {
    let mut stream = server.next_delta().await;
    tokio::spawn(async move {
        let _server = server; // keeps the ADS server's channels open
        sync(&mut stream, resources).await;
        while stream.requests.recv().await.is_some() {}
    })
}
