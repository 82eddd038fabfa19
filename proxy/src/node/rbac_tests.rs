//! Authorization decisions, table-driven: each case is a set of policies, a
//! connection and the expected outcome.

use super::*;
use crate::proto::security::{self as pb, string_match::MatchType};

fn identity(id: &str) -> &'static Identity {
    Box::leak(Box::new(id.parse().expect("a SPIFFE id")))
}

fn client() -> &'static Identity {
    identity("spiffe://cluster.local/ns/shop/sa/web")
}

fn other() -> &'static Identity {
    identity("spiffe://cluster.local/ns/other/sa/batch")
}

fn exact(s: &str) -> pb::StringMatch {
    pb::StringMatch { match_type: Some(MatchType::Exact(s.into())) }
}

fn presence() -> pb::StringMatch {
    pb::StringMatch { match_type: Some(MatchType::Presence(())) }
}

fn block(ip: [u8; 4], length: u32) -> pb::Address {
    pb::Address { address: ip.to_vec(), length }
}

/// A policy of one group of one rule of the given matches.
fn policy(name: &str, action: pb::Action, matches: Vec<pb::Match>) -> Policy {
    let p = pb::Authorization {
        name: name.into(),
        namespace: "shop".into(),
        scope: pb::Scope::Namespace as i32,
        action: action as i32,
        groups: vec![pb::Group { rules: vec![pb::Rules { matches }] }],
        ..Default::default()
    };
    Policy::from_proto(p).expect("valid policy")
}

/// istiod's static STRICT policy: deny whatever has no identity.
fn static_strict() -> Policy {
    let m = pb::Match { not_principals: vec![presence()], ..Default::default() };
    policy("istio_converted_static_strict", pb::Action::Deny, vec![m])
}

fn conn(identity: Option<&'static Identity>, src: &str, dst: &str) -> Connection<'static> {
    Connection { source_identity: identity, source: src.parse().unwrap(), destination: dst.parse().unwrap() }
}

/// Name, policies, connection, expected decision.
type Case<'a> = (&'a str, Vec<&'a Policy>, Connection<'a>, Result<(), Denied>);

#[test]
fn decisions() {
    let allow_web = policy(
        "allow-web",
        pb::Action::Allow,
        vec![pb::Match { principals: vec![exact("cluster.local/ns/shop/sa/web")], ..Default::default() }],
    );
    let allow_ns_shop = policy(
        "allow-ns",
        pb::Action::Allow,
        vec![pb::Match { namespaces: vec![exact("shop")], ..Default::default() }],
    );
    let deny_port_9000 =
        policy("deny-9000", pb::Action::Deny, vec![pb::Match { destination_ports: vec![9000], ..Default::default() }]);
    let deny_not_10_8 = policy(
        "deny-outside-10",
        pb::Action::Deny,
        vec![pb::Match { not_source_ips: vec![block([10, 0, 0, 0], 8)], ..Default::default() }],
    );
    let allow_sa = policy(
        "allow-sa",
        pb::Action::Allow,
        vec![pb::Match {
            service_accounts: vec![pb::ServiceAccountMatch {
                namespace: "other".into(),
                service_account: "batch".into(),
            }],
            ..Default::default()
        }],
    );
    let allow_not_port = policy(
        "allow-not-8080",
        pb::Action::Allow,
        vec![pb::Match { not_destination_ports: vec![8080], ..Default::default() }],
    );
    let allow_dst_ip = policy(
        "allow-dst",
        pb::Action::Allow,
        vec![pb::Match { destination_ips: vec![block([10, 1, 2, 0], 24)], ..Default::default() }],
    );
    let mut dry_deny_all = policy("dry-deny", pb::Action::Deny, vec![pb::Match::default()]);
    dry_deny_all.dry_run = true;
    dry_deny_all.groups = vec![vec![vec![]]];

    let strict = static_strict();
    let mtls = conn(Some(client()), "10.0.0.5:40000", "10.1.2.3:8080");
    let other = conn(Some(other()), "10.0.0.6:40000", "10.1.2.3:8080");
    let plain = conn(None, "10.0.0.5:40000", "10.1.2.3:8080");
    let outside = conn(Some(client()), "192.168.1.1:40000", "10.1.2.3:8080");
    let port_9000 = conn(Some(client()), "10.0.0.5:40000", "10.1.2.3:9000");

    let cases: Vec<Case> = vec![
        ("no policies allow", vec![], plain, Ok(())),
        (
            "static strict denies plain text",
            vec![&strict],
            plain,
            Err(Denied::ExplicitlyDenied("shop/istio_converted_static_strict".into())),
        ),
        ("static strict lets mTLS through", vec![&strict], mtls, Ok(())),
        ("allow by principal", vec![&allow_web], mtls, Ok(())),
        ("allow by principal refuses another", vec![&allow_web], other, Err(Denied::NotAllowed)),
        ("allow by principal refuses plain text", vec![&allow_web], plain, Err(Denied::NotAllowed)),
        ("any allow suffices", vec![&allow_web, &allow_sa], other, Ok(())),
        ("namespace match", vec![&allow_ns_shop], mtls, Ok(())),
        ("namespace mismatch", vec![&allow_ns_shop], other, Err(Denied::NotAllowed)),
        (
            "deny wins over allow",
            vec![&allow_web, &deny_port_9000],
            port_9000,
            Err(Denied::ExplicitlyDenied("shop/deny-9000".into())),
        ),
        ("deny on another port does not apply", vec![&allow_web, &deny_port_9000], mtls, Ok(())),
        (
            "not_source_ips denies outside the block",
            vec![&deny_not_10_8],
            outside,
            Err(Denied::ExplicitlyDenied("shop/deny-outside-10".into())),
        ),
        ("not_source_ips lets the block in", vec![&deny_not_10_8], mtls, Ok(())),
        ("not_destination_ports", vec![&allow_not_port], mtls, Err(Denied::NotAllowed)),
        ("not_destination_ports other port", vec![&allow_not_port], port_9000, Ok(())),
        ("destination ip block", vec![&allow_dst_ip], plain, Ok(())),
        ("dry run never enforced", vec![&dry_deny_all], plain, Ok(())),
    ];
    for (name, policies, c, want) in cases {
        assert_eq!(authorize(policies, &c), want, "{name}");
    }
}

#[test]
fn rules_of_a_group_must_all_match_groups_any() {
    // One group: (principal web) AND (port 8080).
    let both = pb::Authorization {
        name: "both".into(),
        namespace: "shop".into(),
        action: pb::Action::Allow as i32,
        groups: vec![pb::Group {
            rules: vec![
                pb::Rules {
                    matches: vec![pb::Match {
                        principals: vec![exact("cluster.local/ns/shop/sa/web")],
                        ..Default::default()
                    }],
                },
                pb::Rules { matches: vec![pb::Match { destination_ports: vec![8080], ..Default::default() }] },
            ],
        }],
        ..Default::default()
    };
    let both = Policy::from_proto(both).unwrap();
    assert!(both.matches(&conn(Some(client()), "10.0.0.5:1", "10.1.2.3:8080")));
    assert!(!both.matches(&conn(Some(client()), "10.0.0.5:1", "10.1.2.3:9000")));
    assert!(!both.matches(&conn(Some(other()), "10.0.0.5:1", "10.1.2.3:8080")));
    // A policy without groups matches nothing.
    let empty = Policy { groups: vec![], ..both.clone() };
    assert!(!empty.matches(&conn(Some(client()), "10.0.0.5:1", "10.1.2.3:8080")));
}

#[test]
fn ip_blocks() {
    let b = |ip: &str, len| IpBlock { address: ip.parse().unwrap(), length: len };
    for (block, ip, want) in [
        (b("10.0.0.0", 8), "10.200.1.1", true),
        (b("10.0.0.0", 8), "11.0.0.1", false),
        (b("10.1.2.128", 25), "10.1.2.200", true),
        (b("10.1.2.128", 25), "10.1.2.100", false),
        (b("0.0.0.0", 0), "1.2.3.4", true),
        (b("10.1.2.3", 32), "10.1.2.3", true),
        (b("fd00::", 8), "fd12::1", true),
        (b("fd00::", 8), "10.0.0.1", false),
    ] {
        assert_eq!(block.contains(ip.parse().unwrap()), want, "{block:?} {ip}");
    }
}

#[test]
fn bad_policies_are_errors_naming_the_field() {
    let base = pb::Authorization { name: "p".into(), namespace: "shop".into(), ..Default::default() };
    let with_match = |m: pb::Match| pb::Authorization {
        groups: vec![pb::Group { rules: vec![pb::Rules { matches: vec![m] }] }],
        ..base.clone()
    };
    for (p, want) in [
        (pb::Authorization { name: String::new(), ..base.clone() }, "no name"),
        (pb::Authorization { action: 7, ..base.clone() }, "action"),
        (pb::Authorization { scope: 9, ..base.clone() }, "scope"),
        (
            with_match(pb::Match {
                source_ips: vec![pb::Address { address: vec![1, 2, 3], length: 8 }],
                ..Default::default()
            }),
            "source_ips",
        ),
        (
            with_match(pb::Match { destination_ips: vec![block([10, 0, 0, 0], 33)], ..Default::default() }),
            "destination_ips",
        ),
        (with_match(pb::Match { destination_ports: vec![70000], ..Default::default() }), "destination_ports"),
        (
            with_match(pb::Match { principals: vec![pb::StringMatch { match_type: None }], ..Default::default() }),
            "principals",
        ),
    ] {
        let err = Policy::from_proto(p).expect_err(want).to_string();
        assert!(err.contains(want), "{err}");
    }
}
