//! Workload discovery through the one ADS client: the node proxy's
//! [`XdsStore`], subscribing by wildcard to Address and Authorization.
//!
//! Unlike a sidecar's config, which applies whole or not at all, a WDS
//! response is applied resource by resource, as ztunnel does: one workload
//! the proxy cannot convert must not hold back every other change, so the
//! rest are applied and the response is NACKed naming the bad ones.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use prost::Message;
use tokio::sync::watch;

use super::rbac::Policy;
use super::state::{AddressResource, WorkloadState};
use crate::proto::{security, workload};
use crate::xds::{ResourceType, Update, XdsStore};

pub struct WorkloadStore {
    state: Arc<WorkloadState>,
    versions: BTreeMap<ResourceType, BTreeMap<String, String>>,
    applied: BTreeSet<ResourceType>,
    /// True once a response of each type was applied (or NACKed in part).
    received: watch::Sender<bool>,
}

impl WorkloadStore {
    /// A store publishing into `state`; the receiver turns true once both
    /// types have been received.
    pub fn new(state: Arc<WorkloadState>) -> (WorkloadStore, watch::Receiver<bool>) {
        let (received, rx) = watch::channel(false);
        (WorkloadStore { state, versions: BTreeMap::new(), applied: BTreeSet::new(), received }, rx)
    }
}

impl XdsStore for WorkloadStore {
    fn wildcard_types(&self) -> &'static [ResourceType] {
        &ResourceType::WORKLOAD
    }

    fn resource_versions(&self, t: ResourceType) -> HashMap<String, String> {
        crate::xds::versions_of(&self.versions, t)
    }

    fn version(&self, _t: ResourceType) -> String {
        String::new()
    }

    fn apply(&mut self, t: ResourceType, update: Update) -> Result<(), String> {
        let mut next = (*self.state.snapshot()).clone();
        let mut errors = Vec::new();
        let versions = self.versions.entry(t).or_default();
        let mut seen = BTreeSet::new();
        for (any, version) in update.resources {
            let name = match t {
                ResourceType::Address => workload::Address::decode(any.value.as_slice())
                    .map_err(|e| format!("address: cannot decode: {e}"))
                    .and_then(|a| AddressResource::from_proto(a).map_err(|e| e.to_string()))
                    .map(|r| match r {
                        AddressResource::Workload(w) => {
                            let uid = w.uid.clone();
                            next.insert_workload(w);
                            uid
                        }
                        AddressResource::Service(s) => {
                            let key = s.key();
                            next.insert_service(s);
                            key
                        }
                    }),
                ResourceType::Authorization => security::Authorization::decode(any.value.as_slice())
                    .map_err(|e| format!("authorization: cannot decode: {e}"))
                    .and_then(|p| Policy::from_proto(p).map_err(|e| e.to_string()))
                    .map(|p| {
                        let key = p.key();
                        next.insert_policy(p);
                        key
                    }),
                other => Err(format!("{other} is not a workload discovery type")),
            };
            match name {
                Ok(name) => {
                    if let Some(v) = version {
                        versions.insert(name.clone(), v);
                    }
                    seen.insert(name);
                }
                Err(e) => errors.push(e),
            }
        }
        for name in &update.removed {
            match t {
                ResourceType::Address => next.remove_address(name),
                _ => drop(next.policies.remove(name)),
            }
            versions.remove(name);
        }
        if update.full_state {
            // State of the world: whatever was not sent is gone.
            match t {
                ResourceType::Address => {
                    next.workloads.retain(|k, _| seen.contains(k));
                    next.services.retain(|k, _| seen.contains(k));
                }
                _ => next.policies.retain(|k, _| seen.contains(k)),
            }
        }
        next.reindex();
        self.state.publish(next);
        self.applied.insert(t);
        if !*self.received.borrow() && ResourceType::WORKLOAD.iter().all(|t| self.applied.contains(t)) {
            tracing::info!("workload discovery: both types received");
            self.received.send_replace(true);
        }
        if errors.is_empty() { Ok(()) } else { Err(errors.join("; ")) }
    }
}
