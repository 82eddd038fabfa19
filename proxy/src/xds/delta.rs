//! One delta (incremental) ADS stream. The store's wildcard types (CDS and
//! LDS; or Address and Authorization) are subscribed at the start; the named
//! ones (EDS, RDS and SDS) follow what the applied clusters and listeners
//! reference, as changes. On reconnect the client
//! lists what it has (`initial_resource_versions`) so only changes are resent.

use std::collections::{BTreeMap, BTreeSet};

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DeltaDiscoveryResponse};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::AsciiMetadataValue;
use tonic::transport::Channel;

use super::store::Update;
use super::{ResourceType, XdsError, XdsMetrics, XdsStore, nack_status};

/// Runs the stream until it fails. `on_response` is called after the first
/// response so the caller can reset its backoff.
pub(crate) async fn run(
    channel: Channel,
    auth: Option<AsciiMetadataValue>,
    node: Node,
    store: &mut dyn XdsStore,
    metrics: &XdsMetrics,
    mut on_response: impl FnMut(),
) -> Result<(), XdsError> {
    let (tx, rx) = mpsc::channel::<DeltaDiscoveryRequest>(32);
    let mut subscribed: BTreeMap<ResourceType, BTreeSet<String>> = BTreeMap::new();
    let mut node = Some(node);
    // Wildcard types first, then any named subscriptions we already hold
    // (a reconnect), each with the versions we have.
    for &t in store.wildcard_types() {
        let req = DeltaDiscoveryRequest {
            node: node.take(),
            type_url: t.type_url().to_string(),
            initial_resource_versions: store.resource_versions(t),
            ..Default::default()
        };
        tx.send(req).await.map_err(|_| XdsError::RequestQueueClosed)?;
    }
    let mut ads = AggregatedDiscoveryServiceClient::new(channel).max_decoding_message_size(super::MAX_RESPONSE_BYTES);
    resubscribe(&tx, store, &mut subscribed, true).await?;
    let mut responses =
        ads.delta_aggregated_resources(super::stream_request(ReceiverStream::new(rx), auth)).await?.into_inner();
    metrics.set_connected(true);
    while let Some(resp) = responses.message().await? {
        on_response();
        handle(&tx, store, metrics, resp).await?;
        resubscribe(&tx, store, &mut subscribed, false).await?;
    }
    Ok(())
}

async fn handle(
    tx: &mpsc::Sender<DeltaDiscoveryRequest>,
    store: &mut dyn XdsStore,
    metrics: &XdsMetrics,
    resp: DeltaDiscoveryResponse,
) -> Result<(), XdsError> {
    let mut reply = DeltaDiscoveryRequest {
        type_url: resp.type_url.clone(),
        response_nonce: resp.nonce.clone(),
        ..Default::default()
    };
    let Some(t) = ResourceType::from_type_url(&resp.type_url) else {
        tracing::warn!(type_url = %resp.type_url, "xds: NACK of an unknown type");
        reply.error_detail = Some(nack_status(&format!("unsupported type {}", resp.type_url)));
        return tx.send(reply).await.map_err(|_| XdsError::RequestQueueClosed);
    };
    let mut resources = Vec::with_capacity(resp.resources.len());
    let mut missing = Vec::new();
    for r in resp.resources {
        match r.resource {
            Some(any) => resources.push((any, Some(r.version))),
            None => missing.push(r.name),
        }
    }
    let result = if missing.is_empty() {
        let update =
            Update { version: resp.system_version_info, resources, removed: resp.removed_resources, full_state: false };
        store.apply(t, update)
    } else {
        Err(format!("{t}: resources without a body: {}", missing.join(", ")))
    };
    match result {
        Ok(()) => {
            metrics.ack(t);
            tracing::debug!(%t, nonce = %resp.nonce, "xds: ACK");
        }
        Err(detail) => {
            metrics.nack(t);
            tracing::warn!(%t, nonce = %resp.nonce, error = %detail, "xds: NACK, keeping the last good config");
            reply.error_detail = Some(nack_status(&detail));
        }
    }
    tx.send(reply).await.map_err(|_| XdsError::RequestQueueClosed)
}

/// Sends subscription changes for the named types. `initial` sends the whole
/// current set with the versions held (the stream is new).
async fn resubscribe(
    tx: &mpsc::Sender<DeltaDiscoveryRequest>,
    store: &dyn XdsStore,
    subscribed: &mut BTreeMap<ResourceType, BTreeSet<String>>,
    initial: bool,
) -> Result<(), XdsError> {
    for &t in store.named_types() {
        let want = store.wanted(t);
        let have = subscribed.entry(t).or_default();
        let add: Vec<String> = want.difference(have).cloned().collect();
        let drop: Vec<String> = have.difference(&want).cloned().collect();
        if add.is_empty() && drop.is_empty() {
            continue;
        }
        let req = DeltaDiscoveryRequest {
            type_url: t.type_url().to_string(),
            resource_names_subscribe: add,
            resource_names_unsubscribe: drop,
            initial_resource_versions: if initial { store.resource_versions(t) } else { Default::default() },
            ..Default::default()
        };
        tracing::debug!(%t, subscribe = ?req.resource_names_subscribe, unsubscribe = ?req.resource_names_unsubscribe, "xds: subscriptions");
        *have = want;
        tx.send(req).await.map_err(|_| XdsError::RequestQueueClosed)?;
    }
    Ok(())
}
