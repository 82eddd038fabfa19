//! What the client has applied: converts a response's resources into the
//! internal model (all of them, or none: a response either applies whole or is
//! NACKed), publishes the new snapshot, and derives what to ask for next and
//! whether the config is complete.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use envoy_types::pb::google::protobuf::Any;
use tokio::sync::watch;

use super::ResourceType;
use crate::state::{Cluster, ClusterEndpoints, DiscoveryType, Listener, RouteConfig, Secret, Snapshot, State};

/// One response's worth of changes for one type.
#[derive(Debug, Default)]
pub struct Update {
    /// Version of the whole type (SotW `version_info`, delta `system_version_info`).
    pub version: String,
    /// The resources, with the delta resource version when there is one.
    pub resources: Vec<(Any, Option<String>)>,
    /// Names the server removed (delta).
    pub removed: Vec<String>,
    /// SotW CDS/LDS: the response is the whole set, anything missing is gone.
    pub full_state: bool,
}

/// Readiness: true once the first complete config has been applied; stays true.
#[derive(Debug, Clone)]
pub struct Readiness(watch::Receiver<bool>);

impl Readiness {
    /// Readiness that follows `ready` (the node proxy's, which also waits for
    /// its pods' listeners).
    pub fn new(ready: watch::Receiver<bool>) -> Readiness {
        Readiness(ready)
    }
    pub fn is_ready(&self) -> bool {
        *self.0.borrow()
    }
    /// Waits until ready; returns false if the client went away first.
    pub async fn wait(&mut self) -> bool {
        self.0.wait_for(|r| *r).await.is_ok()
    }
}

enum Converted {
    Cluster(Cluster),
    Endpoints(ClusterEndpoints),
    Listener(Listener),
    Route(RouteConfig),
    Secret(String, Secret),
}

pub(crate) struct ResourceStore {
    state: Arc<State>,
    snap: Snapshot,
    /// Delta resource versions, for `initial_resource_versions` on reconnect.
    resource_versions: BTreeMap<ResourceType, BTreeMap<String, String>>,
    /// Named resources the server said do not exist (delta `removed_resources`).
    absent: BTreeMap<ResourceType, BTreeSet<String>>,
    /// Types with at least one applied response.
    applied: BTreeSet<ResourceType>,
    /// Listeners the proxy's explicit bindings serve (`--listen`): their
    /// sockets accept before any config, so the config is not complete
    /// without them (a first LDS NACKed, then a delta that carried only the
    /// listeners that changed, would otherwise read as ready).
    bound_listeners: BTreeSet<String>,
    ready: watch::Sender<bool>,
}

impl ResourceStore {
    pub fn new(state: Arc<State>, bound_listeners: BTreeSet<String>) -> (ResourceStore, Readiness) {
        let (ready, rx) = watch::channel(false);
        let mut snap = (*state.snapshot()).clone();
        snap.secrets.retain(|name, _| !state.is_local_secret(name));
        let store = ResourceStore {
            state,
            snap,
            resource_versions: BTreeMap::new(),
            absent: BTreeMap::new(),
            applied: BTreeSet::new(),
            bound_listeners,
            ready,
        };
        (store, Readiness(rx))
    }

    /// Applies one response, or returns the NACK detail and changes nothing.
    fn apply_update(&mut self, t: ResourceType, update: Update) -> Result<(), String> {
        let mut converted = Vec::with_capacity(update.resources.len());
        let mut errors = Vec::new();
        for (any, version) in &update.resources {
            match convert(t, any) {
                Ok(c) => converted.push((c, version.clone())),
                Err(e) => errors.push(e.to_string()),
            }
        }
        if !errors.is_empty() {
            return Err(errors.join("; "));
        }
        let mut next = self.snap.clone();
        let mut seen = BTreeSet::new();
        let versions = self.resource_versions.entry(t).or_default();
        let absent = self.absent.entry(t).or_default();
        for (c, version) in converted {
            let name = insert(&mut next, c);
            if let Some(v) = version {
                versions.insert(name.clone(), v);
            }
            absent.remove(&name);
            seen.insert(name);
        }
        for name in &update.removed {
            remove(&mut next, t, name);
            versions.remove(name);
            absent.insert(name.clone());
        }
        if update.full_state {
            let stale: Vec<String> = names(&next, t).filter(|n| !seen.contains(*n)).map(str::to_string).collect();
            for name in stale {
                remove(&mut next, t, &name);
                versions.remove(&name);
            }
        }
        next.versions.insert(t.short(), update.version);
        self.applied.insert(t);
        self.snap = next;
        self.drop_unwanted();
        self.state.publish(self.snap.clone());
        if !*self.ready.borrow() && self.complete() {
            tracing::info!("first complete config applied: ready");
            self.ready.send_replace(true);
        }
        Ok(())
    }

    /// Named resources no cluster or listener references any more: the client
    /// unsubscribes from them and drops them, as Envoy does.
    fn drop_unwanted(&mut self) {
        for t in super::ResourceType::NAMED {
            let wanted = self.wanted_names(t);
            let stale: Vec<String> =
                names(&self.snap, t).filter(|n| !wanted.contains(*n)).map(str::to_string).collect();
            for name in stale {
                remove(&mut self.snap, t, &name);
                if let Some(v) = self.resource_versions.get_mut(&t) {
                    v.remove(&name);
                }
            }
            if let Some(a) = self.absent.get_mut(&t) {
                a.retain(|n| wanted.contains(n));
            }
        }
    }

    /// The names of a named type that the current clusters and listeners need.
    fn wanted_names(&self, t: ResourceType) -> BTreeSet<String> {
        let s = &self.snap;
        match t {
            ResourceType::Endpoint => s
                .clusters
                .values()
                .filter(|c| c.discovery == DiscoveryType::Eds)
                .filter_map(|c| c.eds_service_name.clone())
                .collect(),
            ResourceType::Route => {
                s.listeners.values().flat_map(|l| l.route_names().map(str::to_string).collect::<Vec<_>>()).collect()
            }
            // Not the secrets the proxy gets itself: SDS would only send
            // what the proxy has from a better source.
            ResourceType::Secret => s
                .clusters
                .values()
                .flat_map(|c| c.secret_names().map(str::to_string).collect::<Vec<_>>())
                .chain(s.listeners.values().flat_map(|l| l.secret_names().map(str::to_string).collect::<Vec<_>>()))
                .filter(|name| !self.state.is_local_secret(name))
                .collect(),
            ResourceType::Cluster | ResourceType::Listener | ResourceType::Address | ResourceType::Authorization => {
                BTreeSet::new()
            }
        }
    }

    /// First complete config: clusters and listeners, every bound listener
    /// among them, and every endpoint set, route config and secret they
    /// reference received (or known not to exist).
    fn complete(&self) -> bool {
        if !self.applied.contains(&ResourceType::Cluster) || !self.applied.contains(&ResourceType::Listener) {
            return false;
        }
        if !self.bound_listeners.iter().all(|l| self.snap.listeners.contains_key(l)) {
            return false;
        }
        super::ResourceType::NAMED.into_iter().all(|t| {
            let have: BTreeSet<&str> = names(&self.snap, t).collect();
            let absent = self.absent.get(&t);
            self.wanted_names(t).iter().all(|n| have.contains(n.as_str()) || absent.is_some_and(|a| a.contains(n)))
        })
    }
}

impl super::XdsStore for ResourceStore {
    fn wildcard_types(&self) -> &'static [ResourceType] {
        &[ResourceType::Cluster, ResourceType::Listener]
    }

    fn named_types(&self) -> &'static [ResourceType] {
        &ResourceType::NAMED
    }

    fn wanted(&self, t: ResourceType) -> BTreeSet<String> {
        self.wanted_names(t)
    }

    fn resource_versions(&self, t: ResourceType) -> std::collections::HashMap<String, String> {
        versions_of(&self.resource_versions, t)
    }

    fn version(&self, t: ResourceType) -> String {
        self.snap.versions.get(t.short()).cloned().unwrap_or_default()
    }

    fn apply(&mut self, t: ResourceType, update: Update) -> Result<(), String> {
        self.apply_update(t, update)
    }
}

/// A type's delta resource versions as `initial_resource_versions` wants them.
pub fn versions_of(
    all: &BTreeMap<ResourceType, BTreeMap<String, String>>,
    t: ResourceType,
) -> std::collections::HashMap<String, String> {
    all.get(&t).map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()).unwrap_or_default()
}

fn convert(t: ResourceType, any: &Any) -> Result<Converted, crate::state::ConvertError> {
    Ok(match t {
        ResourceType::Cluster => Converted::Cluster(Cluster::from_any(any)?),
        ResourceType::Endpoint => Converted::Endpoints(ClusterEndpoints::from_any(any)?),
        ResourceType::Listener => Converted::Listener(Listener::from_any(any)?),
        ResourceType::Route => Converted::Route(RouteConfig::from_any(any)?),
        ResourceType::Secret => {
            let (name, s) = Secret::from_any(any)?;
            Converted::Secret(name, s)
        }
        ResourceType::Address | ResourceType::Authorization => {
            return Err(crate::state::ConvertError::WrongType {
                kind: "sidecar config",
                got: t.type_url().to_string(),
            });
        }
    })
}

fn insert(s: &mut Snapshot, c: Converted) -> String {
    match c {
        Converted::Cluster(c) => {
            let name = c.name.clone();
            s.clusters.insert(name.clone(), Arc::new(c));
            name
        }
        Converted::Endpoints(e) => {
            let name = e.cluster_name.clone();
            s.endpoints.insert(name.clone(), Arc::new(e));
            name
        }
        Converted::Listener(l) => {
            let name = l.name.clone();
            s.listeners.insert(name.clone(), Arc::new(l));
            name
        }
        Converted::Route(r) => {
            let name = r.name.clone();
            s.routes.insert(name.clone(), Arc::new(r));
            name
        }
        Converted::Secret(name, secret) => {
            s.secrets.insert(name.clone(), Arc::new(secret));
            name
        }
    }
}

fn remove(s: &mut Snapshot, t: ResourceType, name: &str) {
    match t {
        ResourceType::Cluster => drop(s.clusters.remove(name)),
        ResourceType::Endpoint => drop(s.endpoints.remove(name)),
        ResourceType::Listener => drop(s.listeners.remove(name)),
        ResourceType::Route => drop(s.routes.remove(name)),
        ResourceType::Secret => drop(s.secrets.remove(name)),
        ResourceType::Address | ResourceType::Authorization => {}
    }
}

fn names(s: &Snapshot, t: ResourceType) -> Box<dyn Iterator<Item = &str> + '_> {
    match t {
        ResourceType::Cluster => Box::new(s.clusters.keys().map(String::as_str)),
        ResourceType::Endpoint => Box::new(s.endpoints.keys().map(String::as_str)),
        ResourceType::Listener => Box::new(s.listeners.keys().map(String::as_str)),
        ResourceType::Route => Box::new(s.routes.keys().map(String::as_str)),
        ResourceType::Secret => Box::new(s.secrets.keys().map(String::as_str)),
        ResourceType::Address | ResourceType::Authorization => Box::new(std::iter::empty()),
    }
}
