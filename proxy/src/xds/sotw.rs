//! One state-of-the-world ADS stream. Each request names the full set wanted
//! for its type; an ACK repeats the response's version and nonce, a NACK the
//! last accepted version with the new nonce and an error_detail. A
//! subscription change carries the type's latest nonce, or the server would
//! take it for a stale request and ignore it.

use std::collections::{BTreeMap, BTreeSet};

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::AsciiMetadataValue;
use tonic::transport::Channel;

use super::store::Update;
use super::{ResourceType, XdsError, XdsMetrics, XdsStore, nack_status};

/// What this stream has asked for and been told, per type.
#[derive(Default)]
struct TypeState {
    nonce: String,
    names: BTreeSet<String>,
    requested: bool,
}

pub(crate) async fn run(
    channel: Channel,
    auth: Option<AsciiMetadataValue>,
    node: Node,
    store: &mut dyn XdsStore,
    metrics: &XdsMetrics,
    mut on_response: impl FnMut(),
) -> Result<(), XdsError> {
    let (tx, rx) = mpsc::channel::<DiscoveryRequest>(32);
    let mut types: BTreeMap<ResourceType, TypeState> = BTreeMap::new();
    let mut node = Some(node);
    for &t in store.wildcard_types() {
        let req = DiscoveryRequest {
            node: node.take(),
            type_url: t.type_url().to_string(),
            version_info: store.version(t),
            ..Default::default()
        };
        types.entry(t).or_default().requested = true;
        tx.send(req).await.map_err(|_| XdsError::RequestQueueClosed)?;
    }
    resubscribe(&tx, store, &mut types).await?;
    let mut ads = AggregatedDiscoveryServiceClient::new(channel).max_decoding_message_size(super::MAX_RESPONSE_BYTES);
    let mut responses =
        ads.stream_aggregated_resources(super::stream_request(ReceiverStream::new(rx), auth)).await?.into_inner();
    metrics.set_connected(true);
    while let Some(resp) = responses.message().await? {
        on_response();
        handle(&tx, store, metrics, &mut types, resp).await?;
        resubscribe(&tx, store, &mut types).await?;
    }
    Ok(())
}

async fn handle(
    tx: &mpsc::Sender<DiscoveryRequest>,
    store: &mut dyn XdsStore,
    metrics: &XdsMetrics,
    types: &mut BTreeMap<ResourceType, TypeState>,
    resp: DiscoveryResponse,
) -> Result<(), XdsError> {
    let Some(t) = ResourceType::from_type_url(&resp.type_url) else {
        tracing::warn!(type_url = %resp.type_url, "xds: NACK of an unknown type");
        let req = DiscoveryRequest {
            type_url: resp.type_url.clone(),
            response_nonce: resp.nonce,
            error_detail: Some(nack_status(&format!("unsupported type {}", resp.type_url))),
            ..Default::default()
        };
        return tx.send(req).await.map_err(|_| XdsError::RequestQueueClosed);
    };
    let st = types.entry(t).or_default();
    st.nonce = resp.nonce.clone();
    let update = Update {
        version: resp.version_info.clone(),
        resources: resp.resources.into_iter().map(|a| (a, None)).collect(),
        removed: Vec::new(),
        // Only CDS and LDS responses are the whole set; for the named types a
        // missing name is not a removal (it goes when nothing references it).
        full_state: t.is_wildcard(),
    };
    let mut req = DiscoveryRequest {
        type_url: resp.type_url,
        response_nonce: resp.nonce,
        resource_names: st.names.iter().cloned().collect(),
        ..Default::default()
    };
    match store.apply(t, update) {
        Ok(()) => {
            metrics.ack(t);
            tracing::debug!(%t, version = %resp.version_info, "xds: ACK");
            req.version_info = resp.version_info;
        }
        Err(detail) => {
            metrics.nack(t);
            tracing::warn!(%t, version = %resp.version_info, error = %detail, "xds: NACK, keeping the last good config");
            req.version_info = store.version(t);
            req.error_detail = Some(nack_status(&detail));
        }
    }
    tx.send(req).await.map_err(|_| XdsError::RequestQueueClosed)
}

/// Asks again for a named type whose wanted set changed, with its latest nonce.
async fn resubscribe(
    tx: &mpsc::Sender<DiscoveryRequest>,
    store: &dyn XdsStore,
    types: &mut BTreeMap<ResourceType, TypeState>,
) -> Result<(), XdsError> {
    for &t in store.named_types() {
        let want = store.wanted(t);
        let st = types.entry(t).or_default();
        if want == st.names && (st.requested || want.is_empty()) {
            continue;
        }
        st.names = want;
        st.requested = true;
        let req = DiscoveryRequest {
            type_url: t.type_url().to_string(),
            version_info: store.version(t),
            response_nonce: st.nonce.clone(),
            resource_names: st.names.iter().cloned().collect(),
            ..Default::default()
        };
        tracing::debug!(%t, names = ?req.resource_names, "xds: subscriptions");
        tx.send(req).await.map_err(|_| XdsError::RequestQueueClosed)?;
    }
    Ok(())
}
