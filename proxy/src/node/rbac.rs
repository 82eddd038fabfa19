//! L4 authorization for the node proxy: Istio's `Authorization` resources
//! (AuthorizationPolicy as the control plane converts it for node proxies)
//! and the decision for one connection to one workload.
//!
//! A workload is governed by the policies it names (workload-selector
//! scope), those of its namespace (namespace scope) and the global ones. As
//! Istio documents for AuthorizationPolicy: any matching DENY denies; then, if
//! there is any ALLOW, one must match; otherwise the connection is allowed.
//! Dry-run policies are logged, never enforced.
//!
//! A policy matches when any of its groups does; a group when all of its
//! rules do; a rule when any of its matches does (an empty rule matches);
//! a match when every field it sets matches: any of the positive values and
//! none of the `not_` ones.

use std::net::{IpAddr, SocketAddr};

use serde::Serialize;

use crate::identity::Identity;
use crate::proto::security as pb;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PolicyError {
    #[error("authorization {name:?}: {detail}")]
    Invalid { name: String, detail: String },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    Global,
    Namespace,
    WorkloadSelector,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Allow,
    Deny,
}

/// One converted `Authorization`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Policy {
    pub name: String,
    pub namespace: String,
    pub scope: Scope,
    pub action: Action,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// Groups (any) of rules (all) of matches (any).
    pub groups: Vec<Vec<Vec<Match>>>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Match {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<StringMatch>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_namespaces: Vec<StringMatch>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub service_accounts: Vec<(String, String)>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_service_accounts: Vec<(String, String)>,
    /// Matched against the SPIFFE id without `spiffe://`, as Istio writes
    /// principals (`cluster.local/ns/a/sa/b`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub principals: Vec<StringMatch>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_principals: Vec<StringMatch>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub source_ips: Vec<IpBlock>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_source_ips: Vec<IpBlock>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub destination_ips: Vec<IpBlock>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_destination_ips: Vec<IpBlock>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub destination_ports: Vec<u16>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_destination_ports: Vec<u16>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StringMatch {
    Exact(String),
    Prefix(String),
    Suffix(String),
    Presence,
}

/// An address block, `10.0.0.0/8`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct IpBlock {
    pub address: IpAddr,
    pub length: u8,
}

/// What a decision looks at: the connection's peer and where it was going.
#[derive(Clone, Copy, Debug)]
pub struct Connection<'a> {
    /// The peer's verified identity, None for plain text.
    pub source_identity: Option<&'a Identity>,
    pub source: SocketAddr,
    pub destination: SocketAddr,
}

/// Why a connection was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    #[error("denied by policy {0}")]
    ExplicitlyDenied(String),
    #[error("no ALLOW policy matched")]
    NotAllowed,
}

impl Policy {
    /// The resource name, `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    pub fn from_proto(p: pb::Authorization) -> Result<Policy, PolicyError> {
        let name = format!("{}/{}", p.namespace, p.name);
        let bad = |detail: String| PolicyError::Invalid { name: name.clone(), detail };
        if p.name.is_empty() {
            return Err(bad("no name".into()));
        }
        let scope = match pb::Scope::try_from(p.scope) {
            Ok(pb::Scope::Global) => Scope::Global,
            Ok(pb::Scope::Namespace) => Scope::Namespace,
            Ok(pb::Scope::WorkloadSelector) => Scope::WorkloadSelector,
            Err(_) => return Err(bad(format!("scope: unknown value {}", p.scope))),
        };
        let action = match pb::Action::try_from(p.action) {
            Ok(pb::Action::Allow) => Action::Allow,
            Ok(pb::Action::Deny) => Action::Deny,
            Err(_) => return Err(bad(format!("action: unknown value {}", p.action))),
        };
        let mut groups = Vec::with_capacity(p.groups.len());
        for (g, group) in p.groups.into_iter().enumerate() {
            let mut rules = Vec::with_capacity(group.rules.len());
            for (r, rule) in group.rules.into_iter().enumerate() {
                let matches: Result<Vec<Match>, String> = rule.matches.into_iter().map(convert_match).collect();
                rules.push(matches.map_err(|e| bad(format!("groups[{g}].rules[{r}]: {e}")))?);
            }
            groups.push(rules);
        }
        Ok(Policy { name: p.name, namespace: p.namespace, scope, action, dry_run: p.dry_run, groups })
    }

    pub fn matches(&self, conn: &Connection<'_>) -> bool {
        let principal =
            conn.source_identity.map(|id| format!("{}/ns/{}/sa/{}", id.trust_domain, id.namespace, id.service_account));
        let principal = principal.as_deref().unwrap_or("");
        self.groups
            .iter()
            .any(|rules| rules.iter().all(|rule| rule.is_empty() || rule.iter().any(|m| m.matches(conn, principal))))
    }
}

impl Match {
    /// `principal` is the peer's SPIFFE id without `spiffe://`, as Istio
    /// writes principals in policies; empty for plain text.
    fn matches(&self, conn: &Connection<'_>, principal: &str) -> bool {
        let peer = conn.source_identity;
        let namespace = peer.map_or("", |id| id.namespace.as_str());
        let sa_matches =
            |(ns, sa): &(String, String)| peer.is_some_and(|id| &id.namespace == ns && &id.service_account == sa);
        either(&self.namespaces, &self.not_namespaces, |m| m.matches(namespace))
            && either(&self.service_accounts, &self.not_service_accounts, sa_matches)
            && either(&self.principals, &self.not_principals, |m| m.matches(principal))
            && either(&self.source_ips, &self.not_source_ips, |b| b.contains(conn.source.ip()))
            && either(&self.destination_ips, &self.not_destination_ips, |b| b.contains(conn.destination.ip()))
            && either(&self.destination_ports, &self.not_destination_ports, |p| *p == conn.destination.port())
    }
}

/// A field pair: any positive value matches (or none is set) and no negative one does.
fn either<T>(positive: &[T], negative: &[T], mut pred: impl FnMut(&T) -> bool) -> bool {
    (positive.is_empty() || positive.iter().any(&mut pred)) && !negative.iter().any(pred)
}

impl StringMatch {
    fn matches(&self, s: &str) -> bool {
        match self {
            StringMatch::Exact(v) => s == v,
            StringMatch::Prefix(v) => s.starts_with(v.as_str()),
            StringMatch::Suffix(v) => s.ends_with(v.as_str()),
            StringMatch::Presence => !s.is_empty(),
        }
    }
}

impl IpBlock {
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.address, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => prefix_eq(&net.octets(), &ip.octets(), self.length),
            (IpAddr::V6(net), IpAddr::V6(ip)) => prefix_eq(&net.octets(), &ip.octets(), self.length),
            _ => false,
        }
    }
}

fn prefix_eq(a: &[u8], b: &[u8], bits: u8) -> bool {
    let (whole, rest) = (usize::from(bits / 8), bits % 8);
    if a[..whole] != b[..whole] {
        return false;
    }
    rest == 0 || (a[whole] ^ b[whole]) >> (8 - rest) == 0
}

fn convert_match(m: pb::Match) -> Result<Match, String> {
    let strings = |v: Vec<pb::StringMatch>, field: &str| -> Result<Vec<StringMatch>, String> {
        v.into_iter()
            .map(|s| match s.match_type {
                Some(pb::string_match::MatchType::Exact(v)) => Ok(StringMatch::Exact(v)),
                Some(pb::string_match::MatchType::Prefix(v)) => Ok(StringMatch::Prefix(v)),
                Some(pb::string_match::MatchType::Suffix(v)) => Ok(StringMatch::Suffix(v)),
                Some(pb::string_match::MatchType::Presence(_)) => Ok(StringMatch::Presence),
                None => Err(format!("{field}: a string match without a value")),
            })
            .collect()
    };
    let blocks = |v: Vec<pb::Address>, field: &str| -> Result<Vec<IpBlock>, String> {
        v.into_iter().map(|a| ip_block(&a.address, a.length).map_err(|e| format!("{field}: {e}"))).collect()
    };
    let ports = |v: Vec<u32>, field: &str| -> Result<Vec<u16>, String> {
        v.into_iter().map(|p| u16::try_from(p).map_err(|_| format!("{field}: port {p} out of range"))).collect()
    };
    let accounts = |v: Vec<pb::ServiceAccountMatch>| v.into_iter().map(|s| (s.namespace, s.service_account)).collect();
    if !m.extensions.is_empty() {
        return Err("extensions are not supported".into());
    }
    Ok(Match {
        namespaces: strings(m.namespaces, "namespaces")?,
        not_namespaces: strings(m.not_namespaces, "not_namespaces")?,
        service_accounts: accounts(m.service_accounts),
        not_service_accounts: accounts(m.not_service_accounts),
        principals: strings(m.principals, "principals")?,
        not_principals: strings(m.not_principals, "not_principals")?,
        source_ips: blocks(m.source_ips, "source_ips")?,
        not_source_ips: blocks(m.not_source_ips, "not_source_ips")?,
        destination_ips: blocks(m.destination_ips, "destination_ips")?,
        not_destination_ips: blocks(m.not_destination_ips, "not_destination_ips")?,
        destination_ports: ports(m.destination_ports, "destination_ports")?,
        not_destination_ports: ports(m.not_destination_ports, "not_destination_ports")?,
    })
}

/// An IP from WDS bytes (4 or 16 of them).
pub fn ip_from_bytes(b: &[u8]) -> Result<IpAddr, String> {
    match b.len() {
        4 => Ok(IpAddr::from(<[u8; 4]>::try_from(b).expect("length checked"))),
        16 => Ok(IpAddr::from(<[u8; 16]>::try_from(b).expect("length checked"))),
        n => Err(format!("an address of {n} bytes (want 4 or 16)")),
    }
}

fn ip_block(address: &[u8], length: u32) -> Result<IpBlock, String> {
    let address = ip_from_bytes(address)?;
    let max = if address.is_ipv4() { 32 } else { 128 };
    match u8::try_from(length) {
        Ok(length) if u32::from(length) <= max => Ok(IpBlock { address, length }),
        _ => Err(format!("prefix length {length} for {address}")),
    }
}

/// Decides one connection to a workload, given the policies that govern it
/// (see [`crate::node::state::WorkloadSnapshot::policies_for`]).
pub fn authorize<'a>(policies: impl IntoIterator<Item = &'a Policy>, conn: &Connection<'_>) -> Result<(), Denied> {
    let mut any_allow = false;
    let mut allowed = false;
    for p in policies {
        let matched = p.matches(conn);
        if p.dry_run {
            if matched {
                tracing::info!(policy = %p.key(), action = ?p.action, "dry-run authorization policy matched");
            }
            continue;
        }
        match p.action {
            Action::Deny if matched => return Err(Denied::ExplicitlyDenied(p.key())),
            Action::Deny => {}
            Action::Allow => {
                any_allow = true;
                allowed |= matched;
            }
        }
    }
    if any_allow && !allowed { Err(Denied::NotAllowed) } else { Ok(()) }
}

#[cfg(test)]
#[path = "rbac_tests.rs"]
mod tests;
