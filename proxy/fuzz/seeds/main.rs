//! Writes the seed corpora under `corpus/`: request heads for
//! `http1_request_head`, CONNECT authorities, `forwarded` values and SPIFFE
//! ids for `hbone_headers`, and encoded xDS resources for `xds_conversion` (every
//! resource of the control plane's goldens, turned into protobuf bytes with
//! the Envoy protos that envoy-types ships, plus SDS secrets made from the
//! proxy's test certificates). `--show` also prints what the proxy answers
//! each HTTP seed (or to the files named after it). Run from `fuzz/`: `cargo run --features seeds --bin seeds`.

use std::path::{Path, PathBuf};
use std::process::Command;

use envoy_types::pb::envoy::config::core::v3::{DataSource, data_source::Specifier};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3 as tls;
use meshperf_proxy::proxy::fuzzing::HttpHarness;
use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage};

type Error = Box<dyn std::error::Error>;

fn main() -> Result<(), Error> {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let http = http_seeds();
    write_all(&here.join("corpus/http1_request_head"), &http)?;
    write_all(&here.join("corpus/hbone_headers"), &hbone_seeds())?;
    write_all(&here.join("corpus/xds_conversion"), &xds_seeds(&here)?)?;
    // `--show [FILE...]`: the answers to the HTTP seeds, or to these inputs.
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = args.iter().position(|a| a == "--show") {
        let files = &args[i + 1..];
        let inputs = files.iter().map(|f| Ok((f.clone(), std::fs::read(f)?))).collect::<Result<Vec<_>, Error>>()?;
        show(if inputs.is_empty() { &http } else { &inputs })?;
    }
    Ok(())
}

fn write_all(dir: &Path, seeds: &[(String, Vec<u8>)]) -> Result<(), Error> {
    std::fs::create_dir_all(dir)?;
    for (name, bytes) in seeds {
        std::fs::write(dir.join(name), bytes)?;
    }
    println!("{}: {} seeds", dir.display(), seeds.len());
    Ok(())
}

fn http_seeds() -> Vec<(String, Vec<u8>)> {
    // Over the proxy's 60 KiB head limit (431), and over hyper's 100 headers (431).
    let oversized = format!("GET / HTTP/1.1\r\nhost: app\r\nx-big: {}\r\n\r\n", "a".repeat(70 * 1024));
    let many: String = (0..120).map(|i| format!("x-h{i}: v\r\n")).collect();
    let many = format!("GET / HTTP/1.1\r\nhost: app\r\n{many}\r\n");
    let h2_preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00".to_vec();
    let text = [
        (
            "get",
            "GET /productpage HTTP/1.1\r\nHost: app.ns.svc.cluster.local:80\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\n\r\n",
        ),
        (
            "get-pipelined-keepalive",
            "GET /direct HTTP/1.1\r\nHost: app\r\n\r\nGET /direct/2 HTTP/1.1\r\nHost: app:80\r\nConnection: close\r\n\r\n",
        ),
        (
            "post-chunked",
            "POST /api/v1/users HTTP/1.1\r\nHost: app.ns\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n7\r\n{\"a\":1}\r\n0\r\n\r\n",
        ),
        (
            "post-content-length",
            "POST /api/v1/x HTTP/1.1\r\nHost: app\r\nContent-Length: 5\r\nx-request-id: 1\r\n\r\nhello",
        ),
        ("absolute-form", "GET http://app.ns.svc.cluster.local:80/direct?x=1 HTTP/1.1\r\nHost: ignored\r\n\r\n"),
        ("redirect", "GET /old/page?keep=1 HTTP/1.1\r\nHost: 10.96.0.10:80\r\n\r\n"),
        ("fault", "HEAD /fault HTTP/1.1\r\nHost: app\r\n\r\n"),
        ("regex-headers", "GET /items/42 HTTP/1.1\r\nHost: app\r\nx-user: jason-7\r\nx-version: 3\r\n\r\n"),
        ("wildcard-nc", "GET / HTTP/1.1\r\nHost: www.example.com\r\n\r\n"),
        ("block-all-http10", "GET / HTTP/1.0\r\n\r\n"),
        (
            "expect-continue",
            "PUT /api/v1/u HTTP/1.1\r\nHost: app\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc",
        ),
        (
            "h2c-upgrade",
            "GET / HTTP/1.1\r\nHost: app\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n",
        ),
        ("connect", "CONNECT app.ns:443 HTTP/1.1\r\nHost: app.ns:443\r\n\r\n"),
    ];
    let mut seeds: Vec<(String, Vec<u8>)> = text.iter().map(|(n, s)| (n.to_string(), s.as_bytes().to_vec())).collect();
    seeds.push(("oversized-header".into(), oversized.into_bytes()));
    seeds.push(("too-many-headers".into(), many.into_bytes()));
    seeds.push(("h2-preface".into(), h2_preface));
    seeds
}

/// Prints the status line of each answer, to check the harness routes as meant.
/// What HBONE clients send (ztunnel's forms) and near misses.
fn hbone_seeds() -> Vec<(String, Vec<u8>)> {
    [
        ("authority-v4", "10.0.0.7:8080"),
        ("authority-v6", "[fd00::7]:8080"),
        ("authority-hostname", "catalog.shop.svc.cluster.local:80"),
        ("forwarded-v4", "for=\"10.0.0.3:41234\""),
        ("forwarded-v6", "for=\"[fd00::3]:41234\""),
        ("forwarded-list", "for=10.0.0.3;proto=http;by=10.0.0.1, for=\"_hidden\""),
        ("forwarded-unknown", "for=unknown"),
        ("identity", "spiffe://cluster.local/ns/shop/sa/cart"),
        ("identity-extra", "spiffe://cluster.local/ns/shop/sa/cart/x"),
    ]
    .into_iter()
    .map(|(name, text)| (name.to_string(), text.as_bytes().to_vec()))
    .collect()
}

fn show(seeds: &[(String, Vec<u8>)]) -> Result<(), Error> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build()?;
    let harness = HttpHarness::new();
    for (name, input) in seeds {
        let reply = rt.block_on(harness.exchange(input)).ok_or("the exchange hung")?;
        let text = String::from_utf8_lossy(&reply);
        let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("HTTP/") || l.starts_with("location")).collect();
        println!("{name:<24} {} bytes: {}", reply.len(), lines.join(" | "));
    }
    Ok(())
}

/// Every resource in the goldens, and two SDS secrets.
fn xds_seeds(here: &Path) -> Result<Vec<(String, Vec<u8>)>, Error> {
    let pool = pool(here)?;
    let golden = here.join("../../internal/pilot/snapshot/testdata/golden");
    let mut seeds = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&golden)?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?;
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file)?;
        let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("golden").to_string();
        for (i, v) in serde_json::Deserializer::from_str(&text).into_iter::<serde_json::Value>().enumerate() {
            let mut v = v?;
            let type_url = v["@type"].as_str().ok_or("no @type")?.to_string();
            v.as_object_mut().ok_or("not an object")?.remove("@type");
            let full_name = type_url.rsplit('/').next().unwrap_or_default();
            let short = full_name.rsplit('.').next().unwrap_or_default().to_lowercase();
            let desc = pool.get_message_by_name(full_name).ok_or_else(|| format!("no descriptor for {full_name}"))?;
            let msg = DynamicMessage::deserialize(desc, v)?;
            seeds.push((format!("{stem}-{i:02}-{short}"), msg.encode_to_vec()));
        }
    }
    let testdata = here.join("../testdata/tls");
    let inline = |file: &str| -> Result<Option<DataSource>, Error> {
        Ok(Some(DataSource {
            specifier: Some(Specifier::InlineBytes(std::fs::read(testdata.join(file))?)),
            ..Default::default()
        }))
    };
    let cert = tls::Secret {
        name: "default".into(),
        r#type: Some(tls::secret::Type::TlsCertificate(tls::TlsCertificate {
            certificate_chain: inline("cart-cert.pem")?,
            private_key: inline("cart-key.pem")?,
            ..Default::default()
        })),
    };
    let roots = tls::Secret {
        name: "ROOTCA".into(),
        r#type: Some(tls::secret::Type::ValidationContext(tls::CertificateValidationContext {
            trusted_ca: inline("root-cert.pem")?,
            ..Default::default()
        })),
    };
    seeds.push(("secret-certificate".into(), cert.encode_to_vec()));
    seeds.push(("secret-validation".into(), roots.encode_to_vec()));
    Ok(seeds)
}

/// Descriptors of the Envoy protos, compiled from envoy-types' proto directory
/// (as the proxy's golden test does).
fn pool(here: &Path) -> Result<DescriptorPool, Error> {
    let out = Command::new(env!("CARGO")).args(["metadata", "--format-version=1"]).current_dir(here).output()?;
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let manifest = meta["packages"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == "envoy-types"))
        .and_then(|p| p["manifest_path"].as_str())
        .ok_or("envoy-types not in cargo metadata")?;
    let root = Path::new(manifest).parent().ok_or("no crate dir")?.join("proto");
    let includes = [
        "data-plane-api",
        "xds",
        "protoc-gen-validate",
        "googleapis",
        "cel-spec/proto",
        "client_model",
        "opentelemetry-proto",
    ]
    .map(|d| root.join(d));
    let mut c = protox::Compiler::new(includes)?;
    c.include_imports(true);
    c.open_files([
        "envoy/config/cluster/v3/cluster.proto",
        "envoy/config/endpoint/v3/endpoint.proto",
        "envoy/config/listener/v3/listener.proto",
        "envoy/config/route/v3/route.proto",
        "envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.proto",
        "envoy/extensions/filters/network/tcp_proxy/v3/tcp_proxy.proto",
        "envoy/extensions/filters/http/fault/v3/fault.proto",
        "envoy/extensions/filters/http/router/v3/router.proto",
        "envoy/extensions/filters/listener/tls_inspector/v3/tls_inspector.proto",
        "envoy/extensions/transport_sockets/tls/v3/tls.proto",
        "envoy/extensions/transport_sockets/tls/v3/secret.proto",
        "envoy/extensions/transport_sockets/raw_buffer/v3/raw_buffer.proto",
    ])?;
    Ok(c.descriptor_pool())
}
