//! Route configurations: virtual hosts by domain, routes by path and headers,
//! and what to do with a matched request. Regexes are compiled here, on
//! receipt, so a bad one is a NACK and the data path never compiles anything.

use std::time::Duration;

use envoy_types::pb::envoy::config::route::v3 as rv3;
use envoy_types::pb::envoy::extensions::filters::http::fault::v3 as fault;
use envoy_types::pb::envoy::r#type::matcher::v3 as matcher;
use envoy_types::pb::envoy::r#type::v3::FractionalPercent;
use envoy_types::pb::google::protobuf;
use regex::Regex;
use serde::{Serialize, Serializer};

use super::{Bad, ConvertError, at, decode_any, decode_resource, duration};

const KIND: &str = "route";
const FAULT_FILTER: &str = "envoy.filters.http.fault";
/// Envoy's route timeout when none is configured; zero turns it off.
pub const DEFAULT_ROUTE_TIMEOUT: Duration = Duration::from_secs(15);

#[derive(Debug, Serialize)]
pub struct RouteConfig {
    pub name: String,
    pub virtual_hosts: Vec<VirtualHost>,
}

#[derive(Debug, Serialize)]
pub struct VirtualHost {
    pub name: String,
    /// Lower-cased; `*`, `*.suffix` and `prefix.*` wildcards as in Envoy.
    pub domains: Vec<String>,
    pub routes: Vec<Route>,
}

#[derive(Debug, Serialize)]
pub struct Route {
    pub name: String,
    #[serde(rename = "match")]
    pub matcher: RouteMatch,
    pub action: RouteAction,
    /// The fault filter's per-route config.
    pub fault: Option<Fault>,
}

#[derive(Debug, Serialize)]
pub struct RouteMatch {
    pub path: PathMatch,
    pub case_sensitive: bool,
    /// All must match; `:method` is matched as a header, as in Envoy.
    pub headers: Vec<HeaderMatch>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PathMatch {
    Prefix(String),
    Exact(String),
    /// Anchored (`^(?:...)$`): Envoy's safe_regex matches the whole path.
    Regex(#[serde(serialize_with = "regex_str")] Regex),
    PathSeparatedPrefix(String),
    /// `connect_matcher`: CONNECT requests only (the only match they meet).
    Connect,
}

#[derive(Debug, Serialize)]
pub struct HeaderMatch {
    /// Lower-cased header name.
    pub name: String,
    pub value: HeaderValueMatch,
    pub invert: bool,
    /// Exact/prefix/suffix/contains compare without case (the pattern is lower-cased).
    pub ignore_case: bool,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HeaderValueMatch {
    Exact(String),
    Prefix(String),
    Suffix(String),
    Contains(String),
    Regex(#[serde(serialize_with = "regex_str")] Regex),
    /// `true`: the header must be present; `false`: absent.
    Present(bool),
    /// Integer value in `[start, end)`.
    Range {
        start: i64,
        end: i64,
    },
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RouteAction {
    Forward(Forward),
    DirectResponse { status: u16, body: Option<String> },
    Redirect(Redirect),
}

#[derive(Debug, Serialize)]
pub struct Forward {
    pub target: ClusterTarget,
    /// None: no timeout (Envoy's `0s`). Unset in the config means Envoy's 15 s.
    #[serde(serialize_with = "super::ser_opt_duration")]
    pub timeout: Option<Duration>,
    pub retry: Option<RetryPolicy>,
    pub prefix_rewrite: Option<String>,
    pub host_rewrite: Option<String>,
    /// `upgrade_configs [{CONNECT, connect_config}]`: the CONNECT request is
    /// terminated here and its stream's bytes go to the cluster (a
    /// waypoint's HBONE termination), instead of being forwarded.
    pub terminate_connect: bool,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClusterTarget {
    Cluster(String),
    Weighted(Vec<WeightedCluster>),
}

/// One cluster of a weighted split; weights need not sum to 100, a request
/// picks by `weight / total`.
#[derive(Debug, Clone, Serialize)]
pub struct WeightedCluster {
    pub name: String,
    pub weight: u32,
}

#[derive(Debug, Serialize)]
pub struct RetryPolicy {
    pub retry_on: Vec<RetryOn>,
    pub num_retries: u32,
    #[serde(serialize_with = "super::ser_opt_duration")]
    pub per_try_timeout: Option<Duration>,
    pub retriable_status_codes: Vec<u16>,
}

/// Envoy's `retry_on` conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RetryOn {
    #[serde(rename = "5xx")]
    FiveXx,
    GatewayError,
    Reset,
    ResetBeforeRequest,
    ConnectFailure,
    Retriable4xx,
    RefusedStream,
    RetriableStatusCodes,
    RetriableHeaders,
    Http3PostConnectFailure,
    EnvoyRatelimited,
    // gRPC status conditions.
    Cancelled,
    DeadlineExceeded,
    Internal,
    ResourceExhausted,
    Unavailable,
}

impl RetryOn {
    fn parse(s: &str) -> Option<RetryOn> {
        Some(match s {
            "5xx" => RetryOn::FiveXx,
            "gateway-error" => RetryOn::GatewayError,
            "reset" => RetryOn::Reset,
            "reset-before-request" => RetryOn::ResetBeforeRequest,
            "connect-failure" => RetryOn::ConnectFailure,
            "retriable-4xx" => RetryOn::Retriable4xx,
            "refused-stream" => RetryOn::RefusedStream,
            "retriable-status-codes" => RetryOn::RetriableStatusCodes,
            "retriable-headers" => RetryOn::RetriableHeaders,
            "http3-post-connect-failure" => RetryOn::Http3PostConnectFailure,
            "envoy-ratelimited" => RetryOn::EnvoyRatelimited,
            "cancelled" => RetryOn::Cancelled,
            "deadline-exceeded" => RetryOn::DeadlineExceeded,
            "internal" => RetryOn::Internal,
            "resource-exhausted" => RetryOn::ResourceExhausted,
            "unavailable" => RetryOn::Unavailable,
            _ => return None,
        })
    }
}

#[derive(Debug, Serialize)]
pub struct Redirect {
    pub https: bool,
    pub scheme: Option<String>,
    pub host: Option<String>,
    pub port: Option<u16>,
    pub path: Option<String>,
    pub prefix_rewrite: Option<String>,
    pub status: u16,
    pub strip_query: bool,
}

#[derive(Debug, Default, Serialize)]
pub struct Fault {
    pub delay: Option<FaultDelay>,
    pub abort: Option<FaultAbort>,
}

/// Percentages are kept in parts per million, Envoy's finest denominator.
#[derive(Debug, Serialize)]
pub struct FaultDelay {
    #[serde(serialize_with = "super::ser_duration")]
    pub delay: Duration,
    pub per_million: u32,
}

#[derive(Debug, Serialize)]
pub struct FaultAbort {
    pub status: u16,
    pub per_million: u32,
}

fn regex_str<S: Serializer>(r: &Regex, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(r.as_str())
}

impl RouteConfig {
    /// Converts one RDS resource.
    pub fn from_any(any: &protobuf::Any) -> Result<RouteConfig, ConvertError> {
        let rc: rv3::RouteConfiguration = decode_resource(KIND, any)?;
        RouteConfig::convert(&rc).map_err(|b| b.into_error(KIND, &rc.name))
    }

    pub(crate) fn convert(rc: &rv3::RouteConfiguration) -> Result<RouteConfig, Bad> {
        let virtual_hosts = rc
            .virtual_hosts
            .iter()
            .enumerate()
            .map(|(i, vh)| virtual_host(vh).map_err(at(format!("virtual_hosts[{i}] {:?}", vh.name))))
            .collect::<Result<_, _>>()?;
        Ok(RouteConfig { name: rc.name.clone(), virtual_hosts })
    }

    /// Clusters the routes send to.
    pub fn cluster_names(&self) -> impl Iterator<Item = &str> {
        self.virtual_hosts.iter().flat_map(|vh| &vh.routes).flat_map(|r| match &r.action {
            RouteAction::Forward(f) => f.target.names().collect::<Vec<_>>(),
            _ => Vec::new(),
        })
    }
}

impl ClusterTarget {
    pub fn names(&self) -> impl Iterator<Item = &str> {
        let (one, many) = match self {
            ClusterTarget::Cluster(c) => (Some(c.as_str()), &[][..]),
            ClusterTarget::Weighted(w) => (None, w.as_slice()),
        };
        one.into_iter().chain(many.iter().map(|w| w.name.as_str()))
    }
}

fn virtual_host(vh: &rv3::VirtualHost) -> Result<VirtualHost, Bad> {
    if vh.domains.is_empty() {
        return Err(Bad::new("no domains"));
    }
    let routes = vh
        .routes
        .iter()
        .enumerate()
        .map(|(i, r)| route(r).map_err(at(format!("routes[{i}]"))))
        .collect::<Result<_, _>>()?;
    Ok(VirtualHost {
        name: vh.name.clone(),
        domains: vh.domains.iter().map(|d| d.to_ascii_lowercase()).collect(),
        routes,
    })
}

fn route(r: &rv3::Route) -> Result<Route, Bad> {
    let m = r.r#match.as_ref().ok_or_else(|| Bad::new("no match"))?;
    let matcher = route_match(m).map_err(at("match"))?;
    let action = match &r.action {
        Some(rv3::route::Action::Route(a)) => RouteAction::Forward(forward(a).map_err(at("route"))?),
        Some(rv3::route::Action::DirectResponse(d)) => direct_response(d).map_err(at("direct_response"))?,
        Some(rv3::route::Action::Redirect(rd)) => RouteAction::Redirect(redirect(rd).map_err(at("redirect"))?),
        _ => return Err(Bad::new("want a route, direct_response or redirect action")),
    };
    let fault = r
        .typed_per_filter_config
        .get(FAULT_FILTER)
        .map(|any| decode_any::<fault::HttpFault>(any).and_then(|f| fault_config(&f)))
        .transpose()
        .map_err(at(format!("typed_per_filter_config[{FAULT_FILTER}]")))?;
    Ok(Route { name: r.name.clone(), matcher, action, fault })
}

/// Compiles an Envoy (RE2) regex for whole-string matching.
fn full_match_regex(re: &matcher::RegexMatcher, case_insensitive: bool) -> Result<Regex, Bad> {
    regex::RegexBuilder::new(&format!("^(?:{})$", re.regex))
        .case_insensitive(case_insensitive)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| {
            Bad::new(format!("invalid regex {:?}: {}", re.regex, e.to_string().lines().last().unwrap_or_default()))
        })
}

fn route_match(m: &rv3::RouteMatch) -> Result<RouteMatch, Bad> {
    use rv3::route_match::PathSpecifier as P;
    let case_sensitive = m.case_sensitive.as_ref().is_none_or(|b| b.value);
    let path = match &m.path_specifier {
        Some(P::Prefix(p)) => PathMatch::Prefix(p.clone()),
        Some(P::Path(p)) => PathMatch::Exact(p.clone()),
        Some(P::SafeRegex(re)) => PathMatch::Regex(full_match_regex(re, !case_sensitive).map_err(at("safe_regex"))?),
        Some(P::PathSeparatedPrefix(p)) => PathMatch::PathSeparatedPrefix(p.clone()),
        Some(P::ConnectMatcher(_)) => PathMatch::Connect,
        _ => return Err(Bad::new("want prefix, path, safe_regex, path_separated_prefix or connect_matcher")),
    };
    if !m.query_parameters.is_empty() || !m.cookies.is_empty() || m.grpc.is_some() || m.runtime_fraction.is_some() {
        return Err(Bad::new("query parameter, cookie, grpc and runtime matches are not supported"));
    }
    let headers = m
        .headers
        .iter()
        .enumerate()
        .map(|(i, h)| header_match(h).map_err(at(format!("headers[{i}] {:?}", h.name))))
        .collect::<Result<_, _>>()?;
    Ok(RouteMatch { path, case_sensitive, headers })
}

// The deprecated direct matchers are still valid Envoy config; accept them.
#[allow(deprecated)]
fn header_match(h: &rv3::HeaderMatcher) -> Result<HeaderMatch, Bad> {
    use matcher::string_matcher::MatchPattern as M;
    use rv3::header_matcher::HeaderMatchSpecifier as H;
    if h.name.is_empty() {
        return Err(Bad::new("no header name"));
    }
    let mut ignore_case = false;
    let value = match &h.header_match_specifier {
        Some(H::ExactMatch(v)) => HeaderValueMatch::Exact(v.clone()),
        Some(H::PrefixMatch(v)) => HeaderValueMatch::Prefix(v.clone()),
        Some(H::SuffixMatch(v)) => HeaderValueMatch::Suffix(v.clone()),
        Some(H::ContainsMatch(v)) => HeaderValueMatch::Contains(v.clone()),
        Some(H::SafeRegexMatch(re)) => HeaderValueMatch::Regex(full_match_regex(re, false)?),
        Some(H::PresentMatch(p)) => HeaderValueMatch::Present(*p),
        Some(H::RangeMatch(r)) if r.start < r.end => HeaderValueMatch::Range { start: r.start, end: r.end },
        Some(H::RangeMatch(r)) => return Err(Bad::new(format!("empty range [{}, {})", r.start, r.end))),
        Some(H::StringMatch(sm)) => {
            ignore_case = sm.ignore_case;
            let fold = |s: &String| if ignore_case { s.to_lowercase() } else { s.clone() };
            match &sm.match_pattern {
                Some(M::Exact(v)) => HeaderValueMatch::Exact(fold(v)),
                Some(M::Prefix(v)) => HeaderValueMatch::Prefix(fold(v)),
                Some(M::Suffix(v)) => HeaderValueMatch::Suffix(fold(v)),
                Some(M::Contains(v)) => HeaderValueMatch::Contains(fold(v)),
                Some(M::SafeRegex(re)) => HeaderValueMatch::Regex(full_match_regex(re, ignore_case)?),
                _ => return Err(Bad::new("unsupported string_match")),
            }
        }
        None => HeaderValueMatch::Present(true),
    };
    Ok(HeaderMatch { name: h.name.to_ascii_lowercase(), value, invert: h.invert_match, ignore_case })
}

/// Builds a cluster target from (name, weight) pairs; a single cluster of a
/// split is still a split, so the dump shows what was configured.
pub(crate) fn cluster_target<'a>(
    pairs: impl Iterator<Item = (&'a str, Option<protobuf::UInt32Value>)>,
) -> Result<ClusterTarget, Bad> {
    let mut out = Vec::new();
    let mut total: u64 = 0;
    for (i, (name, weight)) in pairs.enumerate() {
        if name.is_empty() {
            return Err(Bad::new(format!("weighted_clusters[{i}]: no cluster name")));
        }
        let weight = weight.map_or(0, |w| w.value);
        total += u64::from(weight);
        out.push(WeightedCluster { name: name.to_string(), weight });
    }
    if total == 0 {
        return Err(Bad::new("weighted_clusters: the weights add up to zero"));
    }
    if total > u64::from(u32::MAX) {
        return Err(Bad::new("weighted_clusters: the weights overflow"));
    }
    Ok(ClusterTarget::Weighted(out))
}

fn forward(a: &rv3::RouteAction) -> Result<Forward, Bad> {
    use rv3::route_action::{ClusterSpecifier as C, HostRewriteSpecifier as HR};
    let target = match &a.cluster_specifier {
        Some(C::Cluster(c)) if !c.is_empty() => ClusterTarget::Cluster(c.clone()),
        Some(C::WeightedClusters(w)) => cluster_target(w.clusters.iter().map(|c| (c.name.as_str(), c.weight)))?,
        _ => return Err(Bad::new("want cluster or weighted_clusters")),
    };
    let timeout = match &a.timeout {
        None => Some(DEFAULT_ROUTE_TIMEOUT),
        Some(d) => Some(duration(d).map_err(at("timeout"))?).filter(|d| !d.is_zero()),
    };
    let retry = a.retry_policy.as_ref().map(retry_policy).transpose().map_err(at("retry_policy"))?;
    let host_rewrite = match &a.host_rewrite_specifier {
        None => None,
        Some(HR::HostRewriteLiteral(h)) => Some(h.clone()),
        Some(_) => return Err(Bad::new("only host_rewrite_literal is supported")),
    };
    if a.regex_rewrite.is_some() || a.path_rewrite_policy.is_some() {
        return Err(Bad::new("regex_rewrite and path_rewrite_policy are not supported"));
    }
    let mut terminate_connect = false;
    for (i, u) in a.upgrade_configs.iter().enumerate() {
        if u.enabled.as_ref().is_some_and(|e| !e.value) {
            continue;
        }
        let field = format!("upgrade_configs[{i}]");
        match (u.upgrade_type.to_ascii_lowercase().as_str(), &u.connect_config) {
            ("websocket", _) => {}
            ("connect", Some(c)) if c.proxy_protocol_config.is_none() && !c.allow_post => terminate_connect = true,
            ("connect", Some(_)) => {
                return Err(Bad::new("connect_config: PROXY protocol and POST are not supported").at(field));
            }
            ("connect", None) => {
                return Err(Bad::new("forwarding CONNECT (no connect_config) is not supported").at(field));
            }
            (other, _) => return Err(Bad::new(format!("unsupported upgrade_type {other:?}")).at(field)),
        }
    }
    Ok(Forward {
        target,
        timeout,
        retry,
        prefix_rewrite: Some(a.prefix_rewrite.clone()).filter(|p| !p.is_empty()),
        host_rewrite,
        terminate_connect,
    })
}

fn retry_policy(p: &rv3::RetryPolicy) -> Result<RetryPolicy, Bad> {
    let mut retry_on = Vec::new();
    let mut retriable_status_codes = Vec::new();
    for code in &p.retriable_status_codes {
        retriable_status_codes.push(status_code(*code)?);
    }
    for token in p.retry_on.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        // Istio passes HTTP status codes in retryOn through; they mean
        // retriable-status-codes with that code.
        if let Ok(code) = token.parse::<u32>() {
            retriable_status_codes.push(status_code(code)?);
            if !retry_on.contains(&RetryOn::RetriableStatusCodes) {
                retry_on.push(RetryOn::RetriableStatusCodes);
            }
            continue;
        }
        let on = RetryOn::parse(token).ok_or_else(|| Bad::new(format!("retry_on: unknown condition {token:?}")))?;
        if !retry_on.contains(&on) {
            retry_on.push(on);
        }
    }
    retriable_status_codes.sort_unstable();
    retriable_status_codes.dedup();
    Ok(RetryPolicy {
        retry_on,
        num_retries: p.num_retries.as_ref().map_or(1, |n| n.value),
        per_try_timeout: p.per_try_timeout.as_ref().map(duration).transpose()?.filter(|d| !d.is_zero()),
        retriable_status_codes,
    })
}

fn status_code(code: u32) -> Result<u16, Bad> {
    match u16::try_from(code) {
        Ok(c) if (100..600).contains(&c) => Ok(c),
        _ => Err(Bad::new(format!("{code} is not an HTTP status code"))),
    }
}

fn direct_response(d: &rv3::DirectResponseAction) -> Result<RouteAction, Bad> {
    use envoy_types::pb::envoy::config::core::v3::data_source::Specifier;
    let status = status_code(d.status)?;
    let body = match d.body.as_ref().and_then(|b| b.specifier.as_ref()) {
        None => None,
        Some(Specifier::InlineString(s)) => Some(s.clone()),
        Some(Specifier::InlineBytes(b)) => Some(String::from_utf8_lossy(b).into_owned()),
        Some(_) => return Err(Bad::new("body: only inline bodies are supported")),
    };
    Ok(RouteAction::DirectResponse { status, body })
}

fn redirect(r: &rv3::RedirectAction) -> Result<Redirect, Bad> {
    use rv3::redirect_action::{PathRewriteSpecifier as PR, SchemeRewriteSpecifier as SR};
    let status = match r.response_code {
        0 => 301,
        1 => 302,
        2 => 303,
        3 => 307,
        4 => 308,
        c => return Err(Bad::new(format!("unknown response_code {c}"))),
    };
    let (https, scheme) = match &r.scheme_rewrite_specifier {
        Some(SR::HttpsRedirect(h)) => (*h, None),
        Some(SR::SchemeRedirect(s)) => (false, Some(s.clone())),
        None => (false, None),
    };
    let (path, prefix_rewrite) = match &r.path_rewrite_specifier {
        None => (None, None),
        Some(PR::PathRedirect(p)) => (Some(p.clone()), None),
        Some(PR::PrefixRewrite(p)) => (None, Some(p.clone())),
        Some(_) => return Err(Bad::new("only path_redirect and prefix_rewrite are supported")),
    };
    let port = match r.port_redirect {
        0 => None,
        p => Some(u16::try_from(p).map_err(|_| Bad::new(format!("port_redirect {p} out of range")))?),
    };
    Ok(Redirect {
        https,
        scheme,
        host: Some(r.host_redirect.clone()).filter(|h| !h.is_empty()),
        port,
        path,
        prefix_rewrite,
        status,
        strip_query: r.strip_query,
    })
}

fn per_million(p: Option<&FractionalPercent>) -> Result<u32, Bad> {
    // No percentage: every request (Envoy's default for fault percentages).
    let Some(p) = p else { return Ok(1_000_000) };
    let scale = match p.denominator {
        0 => 10_000,
        1 => 100,
        2 => 1,
        d => return Err(Bad::new(format!("unknown denominator {d}"))),
    };
    Ok(p.numerator.saturating_mul(scale).min(1_000_000))
}

fn fault_config(f: &fault::HttpFault) -> Result<Fault, Bad> {
    use envoy_types::pb::envoy::extensions::filters::common::fault::v3::fault_delay::FaultDelaySecifier;
    use fault::fault_abort::ErrorType;
    let delay = match &f.delay {
        None => None,
        Some(d) => match &d.fault_delay_secifier {
            Some(FaultDelaySecifier::FixedDelay(fd)) => Some(FaultDelay {
                delay: duration(fd).map_err(at("delay.fixed_delay"))?,
                per_million: per_million(d.percentage.as_ref()).map_err(at("delay.percentage"))?,
            }),
            _ => return Err(Bad::new("delay: only fixed_delay is supported")),
        },
    };
    let abort = match &f.abort {
        None => None,
        Some(a) => match &a.error_type {
            Some(ErrorType::HttpStatus(s)) => Some(FaultAbort {
                status: status_code(*s).map_err(at("abort.http_status"))?,
                per_million: per_million(a.percentage.as_ref()).map_err(at("abort.percentage"))?,
            }),
            _ => return Err(Bad::new("abort: only http_status is supported")),
        },
    };
    Ok(Fault { delay, abort })
}
