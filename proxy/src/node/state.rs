//! The node proxy's view of the mesh, from workload discovery: workloads by
//! uid and by address, services by `namespace/hostname` and by VIP, each
//! service's endpoints, and the L4 policies. Converted from the protos on
//! receipt into a [`WorkloadSnapshot`] that the data path reads without locks
//! (published through `ArcSwap`, as the sidecar's `state::State`).

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use arc_swap::ArcSwap;
use serde::Serialize;

use super::rbac::{Policy, Scope, ip_from_bytes};
use crate::identity::Identity;
use crate::proto::workload as pb;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WorkloadError {
    #[error("{kind} {name:?}: {detail}")]
    Invalid { kind: &'static str, name: String, detail: String },
}

/// How traffic to a workload travels: plain, or HBONE to its node proxy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tunnel {
    None,
    Hbone,
}

/// A waypoint, as a workload or service names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Waypoint {
    /// The waypoint's address and its HBONE port.
    Address(SocketAddr),
    /// A service `namespace/hostname`, its HBONE port.
    Service { service: String, port: u16 },
}

/// A service port and where it lands on the workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Port {
    pub service_port: u16,
    /// 0: the same as the service port.
    pub target_port: u16,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Workload {
    pub uid: String,
    pub name: String,
    pub namespace: String,
    pub addresses: Vec<IpAddr>,
    pub trust_domain: String,
    pub service_account: String,
    pub tunnel: Tunnel,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waypoint: Option<Waypoint>,
    pub node: String,
    pub canonical_name: String,
    pub canonical_revision: String,
    pub workload_name: String,
    pub cluster_id: String,
    /// Services (`namespace/hostname`) this workload backs, with their ports.
    pub services: BTreeMap<String, Vec<Port>>,
    /// Policies (`namespace/name`) selecting this workload.
    pub authorization_policies: Vec<String>,
    pub healthy: bool,
}

impl Workload {
    /// The workload's SPIFFE identity (Istio's default trust domain when
    /// the control plane sent none).
    pub fn identity(&self) -> Identity {
        let td = if self.trust_domain.is_empty() { crate::telemetry::DEFAULT_TRUST_DOMAIN } else { &self.trust_domain };
        Identity::new(td, &self.namespace, &self.service_account)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Service {
    pub name: String,
    pub namespace: String,
    pub hostname: String,
    pub vips: Vec<IpAddr>,
    pub ports: Vec<Port>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waypoint: Option<Waypoint>,
}

impl Service {
    /// The resource name, `namespace/hostname`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.hostname)
    }
}

/// One endpoint of a service: a workload and the port a service port maps to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Endpoint {
    pub workload_uid: String,
    pub ports: Vec<Port>,
}

/// Everything the node proxy knows, with the indexes the data path looks up.
#[derive(Clone, Debug, Default, Serialize)]
pub struct WorkloadSnapshot {
    pub workloads: BTreeMap<String, Arc<Workload>>,
    pub services: BTreeMap<String, Arc<Service>>,
    pub policies: BTreeMap<String, Arc<Policy>>,
    /// Derived by [`WorkloadSnapshot::reindex`].
    pub endpoints: BTreeMap<String, Vec<Endpoint>>,
    #[serde(skip)]
    by_address: HashMap<IpAddr, Arc<Workload>>,
    #[serde(skip)]
    by_vip: HashMap<IpAddr, Arc<Service>>,
}

impl WorkloadSnapshot {
    pub fn workload_by_address(&self, ip: IpAddr) -> Option<&Arc<Workload>> {
        self.by_address.get(&ip)
    }

    pub fn service_by_vip(&self, ip: IpAddr) -> Option<&Arc<Service>> {
        self.by_vip.get(&ip)
    }

    /// The healthy endpoints of a service for one of its ports: the
    /// workload and the port to connect to on it.
    pub fn endpoints_for(&self, service: &Service, service_port: u16) -> Vec<(Arc<Workload>, u16)> {
        let Some(eps) = self.endpoints.get(&service.key()) else { return Vec::new() };
        eps.iter()
            .filter_map(|ep| {
                let w = self.workloads.get(&ep.workload_uid).filter(|w| w.healthy)?;
                let port = ep.ports.iter().find(|p| p.service_port == service_port)?;
                let target = if port.target_port == 0 { service_port } else { port.target_port };
                Some((w.clone(), target))
            })
            .collect()
    }

    /// The policies governing a workload: its own (by name), its
    /// namespace's and the global ones. Unknown names are skipped: the
    /// control plane may not have sent them yet.
    pub fn policies_for<'a>(&'a self, w: &'a Workload) -> impl Iterator<Item = &'a Policy> + 'a {
        let scoped = self.policies.values().filter(move |p| match p.scope {
            Scope::Global => true,
            Scope::Namespace => p.namespace == w.namespace,
            Scope::WorkloadSelector => false,
        });
        let named = w.authorization_policies.iter().filter_map(|k| self.policies.get(k));
        scoped.chain(named).map(|p| &**p)
    }

    pub fn insert_workload(&mut self, w: Workload) {
        self.workloads.insert(w.uid.clone(), Arc::new(w));
    }

    pub fn insert_service(&mut self, s: Service) {
        self.services.insert(s.key(), Arc::new(s));
    }

    pub fn insert_policy(&mut self, p: Policy) {
        self.policies.insert(p.key(), Arc::new(p));
    }

    /// Removes what a delta removal names: a workload uid or a service name
    /// (the Address type carries both).
    pub fn remove_address(&mut self, name: &str) {
        self.workloads.remove(name);
        self.services.remove(name);
    }

    /// Rebuilds the derived indexes after changes.
    pub fn reindex(&mut self) {
        self.by_address.clear();
        self.by_vip.clear();
        self.endpoints.clear();
        for w in self.workloads.values() {
            for ip in &w.addresses {
                self.by_address.insert(*ip, w.clone());
            }
            for (svc, ports) in &w.services {
                let ep = Endpoint { workload_uid: w.uid.clone(), ports: ports.clone() };
                self.endpoints.entry(svc.clone()).or_default().push(ep);
            }
        }
        for s in self.services.values() {
            for ip in &s.vips {
                self.by_vip.insert(*ip, s.clone());
            }
        }
    }
}

/// The published snapshot, swapped whole on each applied response.
#[derive(Debug, Default)]
pub struct WorkloadState(ArcSwap<WorkloadSnapshot>);

impl WorkloadState {
    pub fn new() -> WorkloadState {
        WorkloadState::default()
    }
    pub fn snapshot(&self) -> Arc<WorkloadSnapshot> {
        self.0.load_full()
    }
    pub fn publish(&self, s: WorkloadSnapshot) {
        self.0.store(Arc::new(s));
    }
}

/// What one `Address` resource is.
pub enum AddressResource {
    Workload(Workload),
    Service(Service),
}

impl AddressResource {
    pub fn from_proto(a: pb::Address) -> Result<AddressResource, WorkloadError> {
        match a.r#type {
            Some(pb::address::Type::Workload(w)) => Ok(AddressResource::Workload(convert_workload(w)?)),
            Some(pb::address::Type::Service(s)) => Ok(AddressResource::Service(convert_service(s)?)),
            None => Err(WorkloadError::Invalid {
                kind: "address",
                name: String::new(),
                detail: "neither a workload nor a service".into(),
            }),
        }
    }
}

fn port(p: &pb::Port) -> Result<Port, String> {
    let service_port =
        u16::try_from(p.service_port).map_err(|_| format!("service_port {} out of range", p.service_port))?;
    let target_port =
        u16::try_from(p.target_port).map_err(|_| format!("target_port {} out of range", p.target_port))?;
    Ok(Port { service_port, target_port })
}

fn waypoint(g: Option<pb::GatewayAddress>) -> Result<Option<Waypoint>, String> {
    let Some(g) = g else { return Ok(None) };
    let hbone = if g.hbone_mtls_port == 0 { 15008 } else { g.hbone_mtls_port };
    let port = u16::try_from(hbone).map_err(|_| format!("waypoint hbone_mtls_port {hbone} out of range"))?;
    match g.destination {
        Some(pb::gateway_address::Destination::Address(a)) => {
            let ip = ip_from_bytes(&a.address).map_err(|e| format!("waypoint: {e}"))?;
            Ok(Some(Waypoint::Address(SocketAddr::new(ip, port))))
        }
        Some(pb::gateway_address::Destination::Hostname(h)) => {
            Ok(Some(Waypoint::Service { service: format!("{}/{}", h.namespace, h.hostname), port }))
        }
        None => Err("waypoint without an address or hostname".into()),
    }
}

fn convert_workload(w: pb::Workload) -> Result<Workload, WorkloadError> {
    let bad = |detail: String| WorkloadError::Invalid { kind: "workload", name: w.uid.clone(), detail };
    if w.uid.is_empty() {
        return Err(bad("no uid".into()));
    }
    let addresses: Result<Vec<IpAddr>, String> = w.addresses.iter().map(|a| ip_from_bytes(a)).collect();
    let addresses = addresses.map_err(|e| bad(format!("addresses: {e}")))?;
    let tunnel = match pb::TunnelProtocol::try_from(w.tunnel_protocol) {
        Ok(pb::TunnelProtocol::None) => Tunnel::None,
        Ok(pb::TunnelProtocol::Hbone) => Tunnel::Hbone,
        _ => return Err(bad(format!("tunnel_protocol {} is not supported (NONE or HBONE)", w.tunnel_protocol))),
    };
    let waypoint = waypoint(w.waypoint.clone()).map_err(bad)?;
    let mut services = BTreeMap::new();
    for (name, list) in &w.services {
        let ports: Result<Vec<Port>, String> = list.ports.iter().map(port).collect();
        services.insert(name.clone(), ports.map_err(|e| bad(format!("services[{name}]: {e}")))?);
    }
    Ok(Workload {
        healthy: w.status != pb::WorkloadStatus::Unhealthy as i32,
        uid: w.uid,
        name: w.name,
        namespace: w.namespace,
        addresses,
        trust_domain: w.trust_domain,
        service_account: w.service_account,
        tunnel,
        waypoint,
        node: w.node,
        canonical_name: w.canonical_name,
        canonical_revision: w.canonical_revision,
        workload_name: w.workload_name,
        cluster_id: w.cluster_id,
        services,
        authorization_policies: w.authorization_policies,
    })
}

fn convert_service(s: pb::Service) -> Result<Service, WorkloadError> {
    let key = format!("{}/{}", s.namespace, s.hostname);
    let bad = |detail: String| WorkloadError::Invalid { kind: "service", name: key.clone(), detail };
    if s.hostname.is_empty() || s.namespace.is_empty() {
        return Err(bad("no namespace or hostname".into()));
    }
    let vips: Result<Vec<IpAddr>, String> = s.addresses.iter().map(|a| ip_from_bytes(&a.address)).collect();
    let ports: Result<Vec<Port>, String> = s.ports.iter().map(port).collect();
    Ok(Service {
        vips: vips.map_err(|e| bad(format!("addresses: {e}")))?,
        ports: ports.map_err(|e| bad(format!("ports: {e}")))?,
        waypoint: waypoint(s.waypoint).map_err(bad)?,
        name: s.name,
        namespace: s.namespace,
        hostname: s.hostname,
    })
}
