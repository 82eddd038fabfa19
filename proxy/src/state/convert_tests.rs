//! Conversion tests on protos built here: each supported field lands in the
//! model, and each bad input is an error that names the resource and field.

use envoy_types::pb::envoy::config::cluster::v3 as cv3;
use envoy_types::pb::envoy::config::route::v3 as rv3;
use envoy_types::pb::envoy::extensions::filters::http::fault::v3 as fault;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3 as tls;
use envoy_types::pb::envoy::r#type::matcher::v3 as matcher;
use envoy_types::pb::envoy::r#type::v3::FractionalPercent;
use envoy_types::pb::google::protobuf::{self, Any};
use prost::{Message, Name};

use super::*;

fn any<M: Message + Name>(m: &M) -> Any {
    Any { type_url: M::type_url(), value: m.encode_to_vec() }
}

fn regex(r: &str) -> matcher::RegexMatcher {
    matcher::RegexMatcher { regex: r.into(), ..Default::default() }
}

fn route_to(cluster: &str, m: rv3::RouteMatch) -> rv3::Route {
    rv3::Route {
        name: "r".into(),
        r#match: Some(m),
        action: Some(rv3::route::Action::Route(rv3::RouteAction {
            cluster_specifier: Some(rv3::route_action::ClusterSpecifier::Cluster(cluster.into())),
            ..Default::default()
        })),
        ..Default::default()
    }
}

fn route_config(routes: Vec<rv3::Route>) -> rv3::RouteConfiguration {
    rv3::RouteConfiguration {
        name: "80".into(),
        virtual_hosts: vec![rv3::VirtualHost {
            name: "vh".into(),
            domains: vec!["Cart.Shop".into()],
            routes,
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn path_match(p: rv3::route_match::PathSpecifier) -> rv3::RouteMatch {
    rv3::RouteMatch { path_specifier: Some(p), ..Default::default() }
}

#[test]
fn invalid_regex_is_an_error_naming_route_and_field() {
    let rc = route_config(vec![route_to("c", path_match(rv3::route_match::PathSpecifier::SafeRegex(regex("/a(["))))]);
    let err = RouteConfig::from_any(&any(&rc)).unwrap_err().to_string();
    assert!(
        err.starts_with("route \"80\": virtual_hosts[0] \"vh\": routes[0]: match: safe_regex: invalid regex"),
        "{err}"
    );
}

#[test]
fn regex_matches_the_whole_path_and_honours_case() {
    let mut m = path_match(rv3::route_match::PathSpecifier::SafeRegex(regex("/api/v[0-9]+")));
    m.case_sensitive = Some(protobuf::BoolValue { value: false });
    let rc = RouteConfig::from_any(&any(&route_config(vec![route_to("c", m)]))).unwrap();
    let vh = &rc.virtual_hosts[0];
    assert_eq!(vh.domains, ["cart.shop"]);
    let PathMatch::Regex(re) = &vh.routes[0].matcher.path else { panic!("not a regex") };
    assert!(re.is_match("/API/v2"));
    assert!(!re.is_match("/api/v2/extra"), "safe_regex is a full match");
}

#[test]
fn headers_weighted_clusters_retries_rewrites_and_faults() {
    use matcher::string_matcher::MatchPattern;
    use rv3::header_matcher::HeaderMatchSpecifier as H;
    let mut m = path_match(rv3::route_match::PathSpecifier::Prefix("/".into()));
    m.headers = vec![
        rv3::HeaderMatcher {
            name: "X-User".into(),
            header_match_specifier: Some(H::StringMatch(matcher::StringMatcher {
                ignore_case: true,
                match_pattern: Some(MatchPattern::Prefix("Jas".into())),
            })),
            ..Default::default()
        },
        rv3::HeaderMatcher {
            name: ":method".into(),
            header_match_specifier: Some(H::PresentMatch(true)),
            invert_match: true,
            ..Default::default()
        },
    ];
    let weighted = rv3::WeightedCluster {
        clusters: ["v1", "v2"]
            .iter()
            .zip([30, 40])
            .map(|(n, w)| rv3::weighted_cluster::ClusterWeight {
                name: (*n).into(),
                weight: Some(protobuf::UInt32Value { value: w }),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let action = rv3::RouteAction {
        cluster_specifier: Some(rv3::route_action::ClusterSpecifier::WeightedClusters(weighted)),
        timeout: Some(protobuf::Duration { seconds: 3, nanos: 0 }),
        prefix_rewrite: "/v2/".into(),
        host_rewrite_specifier: Some(rv3::route_action::HostRewriteSpecifier::HostRewriteLiteral(
            "cart.internal".into(),
        )),
        retry_policy: Some(rv3::RetryPolicy {
            retry_on: "5xx,reset,503".into(),
            num_retries: Some(protobuf::UInt32Value { value: 3 }),
            per_try_timeout: Some(protobuf::Duration { seconds: 1, nanos: 0 }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let f = fault::HttpFault {
        delay: Some(envoy_types::pb::envoy::extensions::filters::common::fault::v3::FaultDelay {
            percentage: Some(FractionalPercent { numerator: 10, denominator: 0 }),
            fault_delay_secifier: Some(
                envoy_types::pb::envoy::extensions::filters::common::fault::v3::fault_delay::FaultDelaySecifier::FixedDelay(protobuf::Duration { seconds: 0, nanos: 500_000_000 }),
            ),
        }),
        abort: Some(fault::FaultAbort {
            percentage: Some(FractionalPercent { numerator: 1000, denominator: 2 }),
            error_type: Some(fault::fault_abort::ErrorType::HttpStatus(503)),
            ..Default::default()
        }),
        ..Default::default()
    };
    let route = rv3::Route {
        name: "r".into(),
        r#match: Some(m),
        action: Some(rv3::route::Action::Route(action)),
        typed_per_filter_config: [("envoy.filters.http.fault".to_string(), any(&f))].into(),
        ..Default::default()
    };
    let rc = RouteConfig::from_any(&any(&route_config(vec![route]))).unwrap();
    let r = &rc.virtual_hosts[0].routes[0];
    assert_eq!(r.matcher.headers[0].name, "x-user");
    assert!(matches!(&r.matcher.headers[0].value, HeaderValueMatch::Prefix(p) if p == "jas"));
    assert!(r.matcher.headers[1].invert);
    let RouteAction::Forward(fw) = &r.action else { panic!("not forward") };
    let ClusterTarget::Weighted(w) = &fw.target else { panic!("not weighted") };
    assert_eq!(w.iter().map(|c| c.weight).sum::<u32>(), 70, "weights need not sum to 100");
    assert_eq!(fw.timeout, Some(Duration::from_secs(3)));
    assert_eq!(fw.prefix_rewrite.as_deref(), Some("/v2/"));
    assert_eq!(fw.host_rewrite.as_deref(), Some("cart.internal"));
    let retry = fw.retry.as_ref().unwrap();
    assert_eq!(retry.retry_on, [RetryOn::FiveXx, RetryOn::Reset, RetryOn::RetriableStatusCodes]);
    assert_eq!((retry.num_retries, retry.retriable_status_codes.as_slice()), (3, &[503][..]));
    assert_eq!(retry.per_try_timeout, Some(Duration::from_secs(1)));
    let fault = r.fault.as_ref().unwrap();
    let delay = fault.delay.as_ref().unwrap();
    assert_eq!((delay.delay, delay.per_million), (Duration::from_millis(500), 100_000));
    let abort = fault.abort.as_ref().unwrap();
    assert_eq!((abort.status, abort.per_million), (503, 1000));
}

#[test]
fn unset_route_timeout_is_envoys_15s() {
    let rc = route_config(vec![route_to("c", path_match(rv3::route_match::PathSpecifier::Path("/x".into())))]);
    let rc = RouteConfig::from_any(&any(&rc)).unwrap();
    let RouteAction::Forward(fw) = &rc.virtual_hosts[0].routes[0].action else { panic!() };
    assert_eq!(fw.timeout, Some(Duration::from_secs(15)));
}

#[test]
fn bad_routes_are_errors() {
    let zero = rv3::WeightedCluster {
        clusters: vec![rv3::weighted_cluster::ClusterWeight { name: "a".into(), ..Default::default() }],
        ..Default::default()
    };
    let mut r = route_to("c", path_match(rv3::route_match::PathSpecifier::Prefix("/".into())));
    if let Some(rv3::route::Action::Route(a)) = &mut r.action {
        a.cluster_specifier = Some(rv3::route_action::ClusterSpecifier::WeightedClusters(zero));
    }
    let mut bad_retry = route_to("c", path_match(rv3::route_match::PathSpecifier::Prefix("/".into())));
    if let Some(rv3::route::Action::Route(a)) = &mut bad_retry.action {
        a.retry_policy = Some(rv3::RetryPolicy { retry_on: "sometimes".into(), ..Default::default() });
    }
    for (route, want) in [(r, "weights add up to zero"), (bad_retry, "unknown condition \"sometimes\"")] {
        let err = RouteConfig::from_any(&any(&route_config(vec![route]))).unwrap_err().to_string();
        assert!(err.contains(want), "{err}");
    }
    let garbage = Any { type_url: rv3::RouteConfiguration::type_url(), value: vec![0xff, 0xff, 0xff] };
    assert!(matches!(RouteConfig::from_any(&garbage), Err(ConvertError::Decode { .. })));
    let wrong = any(&cv3::Cluster::default());
    assert!(matches!(RouteConfig::from_any(&wrong), Err(ConvertError::WrongType { .. })));
}

#[test]
fn cluster_limits_outlier_detection_and_tls() {
    use envoy_types::pb::envoy::config::core::v3 as core;
    let upstream = tls::UpstreamTlsContext {
        sni: "outbound_.80_._.cart.shop.svc.cluster.local".into(),
        common_tls_context: Some(tls::CommonTlsContext {
            tls_certificate_sds_secret_configs: vec![tls::SdsSecretConfig {
                name: "default".into(),
                ..Default::default()
            }],
            validation_context_type: Some(
                tls::common_tls_context::ValidationContextType::ValidationContextSdsSecretConfig(
                    tls::SdsSecretConfig { name: "ROOTCA".into(), ..Default::default() },
                ),
            ),
            ..Default::default()
        }),
        ..Default::default()
    };
    let c = cv3::Cluster {
        name: "outbound|80||cart".into(),
        cluster_discovery_type: Some(cv3::cluster::ClusterDiscoveryType::Type(cv3::cluster::DiscoveryType::Eds as i32)),
        lb_policy: cv3::cluster::LbPolicy::LeastRequest as i32,
        circuit_breakers: Some(cv3::CircuitBreakers {
            thresholds: vec![cv3::circuit_breakers::Thresholds {
                max_connections: Some(protobuf::UInt32Value { value: 10 }),
                max_pending_requests: Some(protobuf::UInt32Value { value: 5 }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        outlier_detection: Some(cv3::OutlierDetection {
            consecutive_5xx: Some(protobuf::UInt32Value { value: 3 }),
            base_ejection_time: Some(protobuf::Duration { seconds: 60, nanos: 0 }),
            ..Default::default()
        }),
        transport_socket: Some(core::TransportSocket {
            name: "envoy.transport_sockets.tls".into(),
            config_type: Some(core::transport_socket::ConfigType::TypedConfig(any(&upstream))),
        }),
        ..Default::default()
    };
    let got = Cluster::from_any(&any(&c)).unwrap();
    assert_eq!(got.lb_policy, LbPolicy::LeastRequest);
    assert_eq!(got.eds_service_name.as_deref(), Some("outbound|80||cart"), "EDS name defaults to the cluster's");
    assert_eq!(
        (
            got.circuit_breakers.max_connections,
            got.circuit_breakers.max_pending_requests,
            got.circuit_breakers.max_requests
        ),
        (10, 5, 1024)
    );
    let od = got.outlier_detection.as_ref().unwrap();
    assert_eq!((od.consecutive_5xx, od.base_ejection_time, od.max_ejection_percent), (3, Duration::from_secs(60), 10));
    let UpstreamTransport::Tls(t) = &got.transport else { panic!("not TLS") };
    assert_eq!(t.sni.as_deref(), Some("outbound_.80_._.cart.shop.svc.cluster.local"));
    assert_eq!(got.secret_names().collect::<Vec<_>>(), ["default", "ROOTCA"]);

    // A DestinationRule's ISTIO_MUTUAL and DISABLE come as a single catch-all
    // match (what meshperf pilot generates, as istiod does); both once NACKed.
    let tls_socket = c.transport_socket.clone();
    let mut mutual = c.clone();
    mutual.transport_socket = None;
    mutual.transport_socket_matches = vec![cv3::cluster::TransportSocketMatch {
        name: "tlsMode-istio".into(),
        transport_socket: tls_socket,
        ..Default::default()
    }];
    assert!(matches!(Cluster::from_any(&any(&mutual)).unwrap().transport, UpstreamTransport::Tls(_)));
    let mut disable = c.clone();
    disable.transport_socket = None;
    disable.transport_socket_matches = vec![cv3::cluster::TransportSocketMatch {
        name: "tlsMode-disabled".into(),
        r#match: Some(protobuf::Struct::default()),
        transport_socket: Some(core::TransportSocket {
            name: "envoy.transport_sockets.raw_buffer".into(),
            config_type: None,
        }),
    }];
    assert!(matches!(Cluster::from_any(&any(&disable)).unwrap().transport, UpstreamTransport::Plain));

    let mut bad = c.clone();
    bad.lb_policy = cv3::cluster::LbPolicy::Maglev as i32;
    let err = Cluster::from_any(&any(&bad)).unwrap_err().to_string();
    assert!(err.starts_with("cluster \"outbound|80||cart\": lb_policy"), "{err}");
}

fn pem(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/testdata/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn data(b: Vec<u8>) -> Option<envoy_types::pb::envoy::config::core::v3::DataSource> {
    use envoy_types::pb::envoy::config::core::v3::{DataSource, data_source::Specifier};
    Some(DataSource { specifier: Some(Specifier::InlineBytes(b)), ..Default::default() })
}

#[test]
fn secrets_parse_into_rustls_types_and_reject_garbage() {
    let cert = tls::Secret {
        name: "default".into(),
        r#type: Some(tls::secret::Type::TlsCertificate(tls::TlsCertificate {
            certificate_chain: data(pem("workload-cert.pem")),
            private_key: data(pem("workload-key.pem")),
            ..Default::default()
        })),
    };
    let (name, s) = Secret::from_any(&any(&cert)).unwrap();
    assert_eq!(name, "default");
    assert!(matches!(&s, Secret::Certificate(c) if c.chain.len() == 1));
    let dump = serde_json::to_string(&s).unwrap();
    assert!(dump.contains("redacted") && !dump.contains("PRIVATE"), "{dump}");

    let root = tls::Secret {
        name: "ROOTCA".into(),
        r#type: Some(tls::secret::Type::ValidationContext(tls::CertificateValidationContext {
            trusted_ca: data(pem("workload-cert.pem")),
            ..Default::default()
        })),
    };
    let (_, s) = Secret::from_any(&any(&root)).unwrap();
    assert!(matches!(&s, Secret::Validation(v) if v.roots.len() == 1));

    let mut bad = cert.clone();
    if let Some(tls::secret::Type::TlsCertificate(c)) = &mut bad.r#type {
        c.private_key = data(b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n".to_vec());
    }
    let err = Secret::from_any(&any(&bad)).unwrap_err().to_string();
    assert!(err.starts_with("secret \"default\": tls_certificate.private_key"), "{err}");
}
