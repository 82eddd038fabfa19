//! Route matching, as Envoy's router does it: the virtual host by the request's
//! authority, then the first route whose path and header matchers all match,
//! then, for weighted clusters, one cluster picked by weight.

use hyper::{HeaderMap, Method};

use crate::state::{ClusterTarget, HeaderMatch, HeaderValueMatch, PathMatch, Route, RouteConfig, VirtualHost};

/// What the router looks at in a request.
pub struct RequestHead<'a> {
    /// Authority or Host header, as sent (any case, maybe with a port).
    pub authority: &'a str,
    /// Path and query.
    pub path: &'a str,
    pub method: &'a Method,
    pub headers: &'a HeaderMap,
    pub scheme: &'a str,
}

/// The route for a request, or None (Envoy's 404 with flag NR).
pub fn select_route<'a>(rc: &'a RouteConfig, req: &RequestHead<'_>) -> Option<&'a Route> {
    let vh = select_virtual_host(rc, req.authority)?;
    vh.routes.iter().find(|r| route_matches(r, req))
}

/// Envoy's order: an exact domain, then the longest `*suffix` wildcard, then
/// the longest `prefix*` wildcard, then `*`. Istio lists each domain with and
/// without its port; a host with a port that nothing names is tried without it.
pub fn select_virtual_host<'a>(rc: &'a RouteConfig, authority: &str) -> Option<&'a VirtualHost> {
    let lowered;
    let host = if authority.bytes().any(|b| b.is_ascii_uppercase()) {
        lowered = authority.to_ascii_lowercase();
        lowered.as_str()
    } else {
        authority
    };
    let without_port = strip_port(host);
    for candidate in [Some(host), without_port].into_iter().flatten() {
        if let Some(vh) = best_specific(rc, candidate) {
            return Some(vh);
        }
    }
    rc.virtual_hosts.iter().find(|vh| vh.domains.iter().any(|d| d == "*"))
}

/// `host:port` -> `host`; `[v6]:port` -> `[v6]`; None when there is no port.
fn strip_port(host: &str) -> Option<&str> {
    let (head, port) = host.rsplit_once(':')?;
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // A bare IPv6 address has colons but no brackets: it has no port.
    if head.contains(':') && !head.ends_with(']') {
        return None;
    }
    Some(head)
}

fn best_specific<'a>(rc: &'a RouteConfig, host: &str) -> Option<&'a VirtualHost> {
    if let Some(vh) = rc.virtual_hosts.iter().find(|vh| vh.domains.iter().any(|d| d == host)) {
        return Some(vh);
    }
    // Suffix wildcards (`*.example.com`, `*-svc`) first, then prefix ones (`api.*`); the longest wins.
    let suffix = longest(rc, |d| {
        let suffix = d.strip_prefix('*')?;
        (!suffix.is_empty() && host.len() > suffix.len() && host.ends_with(suffix)).then_some(suffix.len())
    });
    suffix.or_else(|| {
        longest(rc, |d| {
            let prefix = d.strip_suffix('*')?;
            (!prefix.is_empty() && !prefix.starts_with('*') && host.len() > prefix.len() && host.starts_with(prefix))
                .then_some(prefix.len())
        })
    })
}

/// The virtual host with the longest wildcard match, `matched` giving the
/// length of a domain's fixed part when it matches.
fn longest(rc: &RouteConfig, matched: impl Fn(&str) -> Option<usize>) -> Option<&VirtualHost> {
    let mut best: Option<(&VirtualHost, usize)> = None;
    for vh in &rc.virtual_hosts {
        for len in vh.domains.iter().filter_map(|d| matched(d)) {
            if best.is_none_or(|(_, l)| len > l) {
                best = Some((vh, len));
            }
        }
    }
    best.map(|(vh, _)| vh)
}

fn route_matches(r: &Route, req: &RequestHead<'_>) -> bool {
    // A CONNECT has no path: it meets connect_matcher routes, and only them.
    let connect = *req.method == Method::CONNECT;
    if connect != matches!(r.matcher.path, PathMatch::Connect) {
        return false;
    }
    let path = req.path.split_once(['?', '#']).map_or(req.path, |(p, _)| p);
    (connect || path_matches(&r.matcher.path, r.matcher.case_sensitive, path))
        && r.matcher.headers.iter().all(|h| header_matches(h, req))
}

fn path_matches(m: &PathMatch, case_sensitive: bool, path: &str) -> bool {
    let starts = |p: &str| {
        path.len() >= p.len()
            && if case_sensitive {
                path.as_bytes().starts_with(p.as_bytes())
            } else {
                path.as_bytes()[..p.len()].eq_ignore_ascii_case(p.as_bytes())
            }
    };
    match m {
        PathMatch::Prefix(p) => starts(p),
        PathMatch::Exact(p) => path.len() == p.len() && starts(p),
        PathMatch::Regex(re) => re.is_match(path),
        PathMatch::PathSeparatedPrefix(p) => starts(p) && matches!(path.as_bytes().get(p.len()), None | Some(b'/')),
        PathMatch::Connect => false,
    }
}

/// The length of the path prefix a route matched, for prefix_rewrite.
pub(crate) fn matched_prefix_len(m: &PathMatch, path: &str) -> Option<usize> {
    match m {
        PathMatch::Prefix(p) | PathMatch::PathSeparatedPrefix(p) => Some(p.len().min(path.len())),
        PathMatch::Exact(_) => Some(path.split_once(['?', '#']).map_or(path.len(), |(p, _)| p.len())),
        PathMatch::Regex(_) | PathMatch::Connect => None,
    }
}

fn header_matches(h: &HeaderMatch, req: &RequestHead<'_>) -> bool {
    let value: Option<std::borrow::Cow<'_, str>> = match h.name.as_str() {
        ":method" => Some(req.method.as_str().into()),
        ":authority" | "host" => Some(req.authority.into()),
        ":path" => Some(req.path.into()),
        ":scheme" => Some(req.scheme.into()),
        name => {
            let mut values = req.headers.get_all(name).iter().filter_map(|v| v.to_str().ok());
            match (values.next(), values.next()) {
                (None, _) => None,
                (Some(one), None) => Some(one.into()),
                // Envoy matches repeated headers as one comma-joined value.
                (Some(first), Some(second)) => {
                    let mut joined = format!("{first},{second}");
                    for v in values {
                        joined.push(',');
                        joined.push_str(v);
                    }
                    Some(joined.into())
                }
            }
        }
    };
    let matched = match (&h.value, value) {
        (HeaderValueMatch::Present(want), v) => v.is_some() == *want,
        (_, None) => return false, // an absent header never matches, inverted or not (as in Envoy)
        (m, Some(v)) => {
            let v = if h.ignore_case { v.to_lowercase().into() } else { v };
            match m {
                HeaderValueMatch::Exact(x) => *v == **x,
                HeaderValueMatch::Prefix(x) => v.starts_with(x.as_str()),
                HeaderValueMatch::Suffix(x) => v.ends_with(x.as_str()),
                HeaderValueMatch::Contains(x) => v.contains(x.as_str()),
                HeaderValueMatch::Regex(re) => re.is_match(&v),
                HeaderValueMatch::Range { start, end } => v.parse::<i64>().is_ok_and(|n| *start <= n && n < *end),
                HeaderValueMatch::Present(_) => false, // handled above
            }
        }
    };
    matched != h.invert
}

/// The cluster for one request: the only one, or one of a weighted split
/// picked with probability weight / total.
pub fn pick_cluster(target: &ClusterTarget) -> &str {
    match target {
        ClusterTarget::Cluster(c) => c,
        ClusterTarget::Weighted(ws) => {
            let total: u64 = ws.iter().map(|w| u64::from(w.weight)).sum();
            if total == 0 {
                return ws.first().map_or("", |w| w.name.as_str());
            }
            let mut r = fastrand::u64(0..total);
            for w in ws {
                if r < u64::from(w.weight) {
                    return &w.name;
                }
                r -= u64::from(w.weight);
            }
            ws.last().map_or("", |w| w.name.as_str())
        }
    }
}

#[cfg(test)]
#[path = "route_tests.rs"]
mod tests;
