//! What keeps a web page out of the admin endpoint (and out of the node
//! proxy's readiness and stats ports, which share its serving code). A page
//! open in a browser on the proxy's machine can send requests to any port
//! the browser reaches, 127.0.0.1:15000 included: a form or a no-cors fetch
//! can POST `/quitquitquit` without reading the answer, and with DNS
//! rebinding (a name the page's owner controls, re-pointed at 127.0.0.1) the
//! page becomes same-origin with the admin and reads `/config_dump`.
//!
//! Every request passes [`check`] before any handler runs. The rules, each
//! for one attack, are those of meshperf's Go servers:
//! 1. the Host header names this server, on every request, reads included
//!    (refuses DNS rebinding, which needs a name);
//! 2. a state-changing request (any method but GET, HEAD and OPTIONS) is not
//!    cross-origin, as Go's `net/http.CrossOriginProtection` decides it
//!    (refuses a page's fetch and form from another origin);
//! 3. a state-changing request declares `Content-Type: application/json`,
//!    which neither a form nor a no-cors fetch can send, and a CORS fetch
//!    can send only after a preflight the admin never approves (refuses
//!    what rule 2 cannot see: a browser that sends neither Sec-Fetch-Site
//!    nor Origin).
//!
//! The admin has no token: what reaches it unchallenged is what runs on the
//! machine (curl, the lab), which is why it belongs on loopback or on an
//! address only trusted hosts reach.

use std::net::IpAddr;

use hyper::header::{CONTENT_TYPE, HOST, HeaderMap, HeaderValue, ORIGIN};
use hyper::{Method, Request, StatusCode};

/// The names, besides IP addresses and localhost, that the Host header may
/// carry (`--admin-allowed-hosts`), normalized as [`normalize_host_name`]
/// does; `*` allows any.
#[derive(Clone, Debug, Default)]
pub struct AllowedHosts {
    any: bool,
    names: Vec<String>,
}

impl AllowedHosts {
    pub fn new(names: &[String]) -> AllowedHosts {
        AllowedHosts {
            any: names.iter().any(|n| n == "*"),
            names: names.iter().filter(|n| *n != "*").map(|n| normalize_host_name(n)).collect(),
        }
    }

    /// Whether `host` (the Host header's host part, normalized) is one of
    /// this server's names.
    fn allows(&self, host: &str) -> bool {
        // An IP literal cannot be rebound: rebinding needs a name whose
        // address the attacker controls. The port is not compared either:
        // the browser's same-origin policy already tells ports apart. (The
        // Go servers also accept the name they were bound to; the proxy
        // binds IP addresses only.)
        self.any
            || host.parse::<IpAddr>().is_ok()
            || host == "localhost"
            || host.ends_with(".localhost")
            || self.names.iter().any(|n| n == host)
    }
}

/// A host name as it is compared: lowercased, without one trailing dot
/// (`Admin.Example.` and `admin.example` name the same host).
pub fn normalize_host_name(name: &str) -> String {
    name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase()
}

/// Why a request was refused; its text is the one line the caller reads.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "host {0} is not one of this proxy's names (an IP address, localhost, or --admin-allowed-hosts); refused as DNS rebinding"
    )]
    ForeignHost(String),
    #[error(
        "cross-origin request refused: Sec-Fetch-Site is {0}; the admin takes {1} only from its own origin or from a client that is not a browser (curl)"
    )]
    CrossSite(String, Method),
    #[error("cross-origin request refused: Origin {origin} is not this server's (Host {host})")]
    ForeignOrigin { origin: String, host: String },
    #[error(
        "{method} needs Content-Type: application/json (got {got}), which a web page's form or no-cors fetch cannot send"
    )]
    ContentType { method: Method, got: String },
}

impl Refusal {
    pub fn status(&self) -> StatusCode {
        match self {
            Refusal::ContentType { .. } => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            _ => StatusCode::FORBIDDEN,
        }
    }
}

/// Applies the rules of the module's comment to `req`.
pub fn check<B>(req: &Request<B>, hosts: &AllowedHosts) -> Result<(), Refusal> {
    check_host(req, hosts)?;
    if matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        return Ok(());
    }
    check_same_origin(req)?;
    check_content_type(req.method(), req.headers())
}

/// Rule 1. Every Host the request names is checked: each Host header (a
/// request may repeat it, and servers disagree on which one counts) and the
/// authority of an absolute-form target, which HTTP/1.1 says outranks Host.
/// No Host at all (HTTP/1.0) or an empty one names nothing and is accepted.
fn check_host<B>(req: &Request<B>, hosts: &AllowedHosts) -> Result<(), Refusal> {
    let foreign = |raw: &[u8]| Refusal::ForeignHost(quoted(&String::from_utf8_lossy(raw)));
    for value in req.headers().get_all(HOST) {
        let raw = value.to_str().map_err(|_| foreign(value.as_bytes()))?;
        if !raw.trim().is_empty() && !host_part(raw).is_some_and(|host| hosts.allows(&host)) {
            return Err(foreign(value.as_bytes()));
        }
    }
    if let Some(authority) = req.uri().authority()
        && !host_part(authority.host()).is_some_and(|host| hosts.allows(&host))
    {
        return Err(foreign(authority.as_str().as_bytes()));
    }
    Ok(())
}

/// The host part of a Host header (`name`, `name:port`, `[v6]:port`, or an
/// unbracketed IPv6 address), normalized; None when it is malformed.
fn host_part(value: &str) -> Option<String> {
    let value = value.trim();
    if value.parse::<IpAddr>().is_ok() {
        return Some(value.to_string());
    }
    let (host, port) = match value.strip_prefix('[') {
        Some(bracketed) => {
            let (v6, rest) = bracketed.split_once(']')?;
            v6.parse::<std::net::Ipv6Addr>().ok()?;
            (v6, if rest.is_empty() { None } else { Some(rest.strip_prefix(':')?) })
        }
        None => match value.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (value, None),
        },
    };
    let port_ok = port.is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    (port_ok && !host.is_empty()).then(|| normalize_host_name(host))
}

/// Rule 2, the algorithm of Go's `http.CrossOriginProtection`: a browser
/// says where a request comes from in Sec-Fetch-Site (every current one
/// does), older ones only in Origin; a request with neither is not from a
/// page (curl, the lab's Go client) and passes.
fn check_same_origin<B>(req: &Request<B>) -> Result<(), Refusal> {
    let header = |name| req.headers().get(name).map(HeaderValue::as_bytes);
    match header("sec-fetch-site") {
        // `none`: typed by the user or opened from a bookmark, not a page.
        Some(b"same-origin" | b"none") => return Ok(()),
        Some(other) => return Err(Refusal::CrossSite(quoted(&String::from_utf8_lossy(other)), req.method().clone())),
        None => {}
    }
    let Some(origin) = header(ORIGIN.as_str()) else { return Ok(()) };
    let host = header(HOST.as_str()).unwrap_or_default();
    // Origin is scheme://host[:port] (or "null", which matches no host);
    // Host is host[:port]: they must name the same host and port.
    let origin_host = origin.splitn(2, |&b| b == b':').nth(1).and_then(|rest| rest.strip_prefix(b"//"));
    if origin_host.is_some_and(|o| !o.is_empty() && o.eq_ignore_ascii_case(host)) {
        return Ok(());
    }
    Err(Refusal::ForeignOrigin {
        origin: quoted(&String::from_utf8_lossy(origin)),
        host: quoted(&String::from_utf8_lossy(host)),
    })
}

/// Rule 3: the media type, parameters (`; charset=utf-8`) aside.
fn check_content_type(method: &Method, headers: &HeaderMap) -> Result<(), Refusal> {
    let value = headers.get(CONTENT_TYPE).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let media_type = value.as_deref().map(|v| v.split(';').next().unwrap_or_default().trim());
    if media_type.is_some_and(|t| t.eq_ignore_ascii_case("application/json")) {
        return Ok(());
    }
    let got = value.map(|v| quoted(&v)).unwrap_or_else(|| "none".to_string());
    Err(Refusal::ContentType { method: method.clone(), got })
}

/// `s` in quotes for a message, cut short: what a client sent is echoed at
/// most this much, so that a refusal stays one short line.
fn quoted(s: &str) -> String {
    const MAX: usize = 64;
    match s.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{:?}...", &s[..cut]),
        None => format!("{s:?}"),
    }
}

#[cfg(test)]
#[path = "guard_tests.rs"]
mod tests;
