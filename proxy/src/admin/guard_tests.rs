use hyper::{Method, Request, StatusCode};

use super::{AllowedHosts, Refusal, check, normalize_host_name};

/// A request as a browser or a tool would send it: `headers` as given.
fn request(method: Method, target: &str, headers: &[(&str, &str)]) -> Request<()> {
    let mut builder = Request::builder().method(method).uri(target);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder.body(()).unwrap()
}

fn get(host: &str) -> Request<()> {
    request(Method::GET, "/config_dump", &[("host", host)])
}

/// A POST /quitquitquit from 127.0.0.1:15000's own origin with `headers`.
fn post(headers: &[(&str, &str)]) -> Request<()> {
    let mut all = vec![("host", "127.0.0.1:15000")];
    all.extend_from_slice(headers);
    request(Method::POST, "/quitquitquit", &all)
}

const JSON: (&str, &str) = ("content-type", "application/json");

fn no_extra_names() -> AllowedHosts {
    AllowedHosts::new(&[])
}

fn status(result: Result<(), Refusal>) -> StatusCode {
    result.err().map(|r| r.status()).unwrap_or(StatusCode::OK)
}

#[test]
fn a_forged_host_is_refused_on_reads_and_writes() {
    let refused = check(&get("evil.example"), &no_extra_names()).unwrap_err();
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    assert_eq!(
        refused.to_string(),
        "host \"evil.example\" is not one of this proxy's names (an IP address, localhost, or --admin-allowed-hosts); refused as DNS rebinding"
    );
    for host in ["evil.example:15000", "rebind.attacker.test.", "localhost.evil.example", "127.0.0.1.nip.io"] {
        assert_eq!(status(check(&get(host), &no_extra_names())), StatusCode::FORBIDDEN, "GET with Host {host}");
    }
    let write = request(Method::POST, "/quitquitquit", &[("host", "evil.example:15000"), JSON]);
    assert!(matches!(check(&write, &no_extra_names()), Err(Refusal::ForeignHost(_))));
}

#[test]
fn an_ip_literal_host_is_accepted() {
    for host in ["127.0.0.1:15000", "127.0.0.1", "10.244.0.7:15000", "[::1]:15000", "[::1]", "::1", "127.0.0.1."] {
        assert_eq!(check(&get(host), &no_extra_names()), Ok(()), "Host {host}");
    }
}

#[test]
fn localhost_names_are_accepted_in_any_case() {
    for host in ["localhost", "localhost:15000", "LocalHost.:15000", "admin.localhost", "a.b.LOCALHOST"] {
        assert_eq!(check(&get(host), &no_extra_names()), Ok(()), "Host {host}");
    }
    assert!(check(&get("notlocalhost"), &no_extra_names()).is_err(), "a name merely ending in localhost");
}

#[test]
fn an_allowed_name_is_accepted_and_only_it() {
    let allowed = AllowedHosts::new(&["Proxy-Admin.Example.".to_string()]);
    for host in ["proxy-admin.example", "PROXY-ADMIN.EXAMPLE:15000", "proxy-admin.example."] {
        assert_eq!(check(&get(host), &allowed), Ok(()), "Host {host}");
    }
    assert!(check(&get("other.example"), &allowed).is_err());
    assert!(check(&get("sub.proxy-admin.example"), &allowed).is_err(), "names match whole, not as suffixes");
    let any = AllowedHosts::new(&["*".to_string()]);
    assert_eq!(check(&get("anything.example"), &any), Ok(()), "* allows any name");
}

#[test]
fn no_host_or_an_empty_one_is_accepted() {
    assert_eq!(check(&request(Method::GET, "/ready", &[]), &no_extra_names()), Ok(()), "HTTP/1.0 sends no Host");
    assert_eq!(check(&get(""), &no_extra_names()), Ok(()));
}

#[test]
fn every_host_a_request_names_is_checked() {
    let repeated = request(Method::GET, "/config_dump", &[("host", "127.0.0.1"), ("host", "evil.example")]);
    assert!(check(&repeated, &no_extra_names()).is_err(), "a second Host header");
    let absolute = request(Method::GET, "http://evil.example/config_dump", &[("host", "127.0.0.1")]);
    assert!(check(&absolute, &no_extra_names()).is_err(), "an absolute-form target naming another host");
    let absolute = request(Method::GET, "http://127.0.0.1:15000/config_dump", &[("host", "127.0.0.1:15000")]);
    assert_eq!(check(&absolute, &no_extra_names()), Ok(()));
}

#[test]
fn a_malformed_host_is_refused() {
    for host in ["127.0.0.1:http", ":15000", "[evil.example]:15000", "[::1]junk", "127.0.0.1:"] {
        assert!(check(&get(host), &no_extra_names()).is_err(), "Host {host:?} accepted");
    }
    let bytes = Request::builder()
        .uri("/")
        .header("host", hyper::header::HeaderValue::from_bytes(b"caf\xe9.example").unwrap())
        .body(())
        .unwrap();
    assert!(check(&bytes, &no_extra_names()).is_err(), "a Host that is not text");
}

#[test]
fn a_cross_site_fetch_is_refused() {
    for site in ["cross-site", "same-site"] {
        let refused = check(&post(&[("sec-fetch-site", site), JSON]), &no_extra_names()).unwrap_err();
        assert_eq!(refused.status(), StatusCode::FORBIDDEN, "Sec-Fetch-Site {site}");
        assert!(refused.to_string().starts_with("cross-origin request refused"), "{refused}");
    }
    // Even with an Origin that matches: Sec-Fetch-Site, when sent, decides.
    let forged = post(&[("sec-fetch-site", "cross-site"), ("origin", "http://127.0.0.1:15000"), JSON]);
    assert!(check(&forged, &no_extra_names()).is_err());
}

#[test]
fn a_foreign_origin_is_refused() {
    for origin in ["http://evil.example", "http://127.0.0.1:8080", "https://localhost:15000", "null"] {
        let refused = check(&post(&[("origin", origin), JSON]), &no_extra_names()).unwrap_err();
        assert_eq!(refused.status(), StatusCode::FORBIDDEN, "Origin {origin}");
        assert!(matches!(refused, Refusal::ForeignOrigin { .. }), "Origin {origin}: {refused}");
    }
    let no_host = request(Method::POST, "/quitquitquit", &[("origin", "http://evil.example"), JSON]);
    assert!(check(&no_host, &no_extra_names()).is_err(), "an Origin and no Host to match it");
}

#[test]
fn same_origin_and_non_browser_writes_pass() {
    for headers in [
        vec![("sec-fetch-site", "same-origin"), JSON],
        vec![("sec-fetch-site", "none"), JSON],
        vec![("origin", "http://127.0.0.1:15000"), JSON],
        vec![("origin", "HTTP://127.0.0.1:15000"), JSON],
        vec![JSON], // curl, the lab's Go client
    ] {
        assert_eq!(check(&post(&headers), &no_extra_names()), Ok(()), "{headers:?}");
    }
}

#[test]
fn reads_are_not_checked_for_origin_or_content_type() {
    // A page may send these cross-origin; the browser keeps it from reading
    // the answer, and reads change nothing.
    for method in [Method::GET, Method::HEAD, Method::OPTIONS] {
        let read = request(method.clone(), "/config_dump", &[("host", "127.0.0.1"), ("sec-fetch-site", "cross-site")]);
        assert_eq!(check(&read, &no_extra_names()), Ok(()), "{method}");
    }
}

#[test]
fn a_post_without_content_type_is_refused() {
    let refused = check(&post(&[]), &no_extra_names()).unwrap_err();
    assert_eq!(refused.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(
        refused.to_string(),
        "POST needs Content-Type: application/json (got none), which a web page's form or no-cors fetch cannot send"
    );
}

#[test]
fn text_plain_and_form_types_are_refused() {
    for content_type in [
        "text/plain",
        "text/plain;charset=UTF-8",
        "text/plain; application/json",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=----x",
        "application/jsonx",
        "",
    ] {
        let refused = check(&post(&[("content-type", content_type)]), &no_extra_names()).unwrap_err();
        assert_eq!(refused.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE, "Content-Type {content_type:?}");
    }
    let put = request(Method::PUT, "/logging", &[("host", "127.0.0.1"), ("content-type", "text/plain")]);
    assert!(check(&put, &no_extra_names()).is_err(), "every method but GET, HEAD and OPTIONS");
}

#[test]
fn application_json_is_accepted_with_parameters_and_in_any_case() {
    for content_type in
        ["application/json", "application/json; charset=utf-8", "Application/JSON", " application/json "]
    {
        assert_eq!(check(&post(&[("content-type", content_type)]), &no_extra_names()), Ok(()), "{content_type:?}");
    }
}

#[test]
fn what_a_client_sent_is_echoed_short_on_one_line() {
    let long = format!("{}.example", "a".repeat(10_000));
    let message = check(&get(&long), &no_extra_names()).unwrap_err().to_string();
    assert!(message.len() < 250 && !message.contains('\n'), "{} bytes: {message}", message.len());
    let message = check(&post(&[("content-type", &"x".repeat(10_000))]), &no_extra_names()).unwrap_err().to_string();
    assert!(message.len() < 250, "{} bytes", message.len());
}

#[test]
fn host_names_compare_lowercased_without_a_trailing_dot() {
    assert_eq!(normalize_host_name("Admin.Example."), "admin.example");
    assert_eq!(normalize_host_name("admin.example"), "admin.example");
}
