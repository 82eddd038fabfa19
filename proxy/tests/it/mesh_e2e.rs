//! The whole mesh on loopback, across languages: `meshperf pilot`, two
//! `meshperf-proxy` sidecars in explicit mode (capture mode none, as Istio's
//! `captureMode: NONE`), `meshperf server` as the app behind the server
//! sidecar, and `meshperf load` as the client app. Traffic crosses the
//! sidecars in mesh mTLS (the namespace is STRICT), and both proxies' metrics
//! must say so, with each side's SPIFFE identity.
//!
//! The pods are distinct loopback addresses: the client pod's sidecar binds
//! its outbound listener on the client pod's address; the server pod's
//! sidecar binds the server pod's address on the app's port (which is what
//! the control plane hands out as the endpoint) and forwards to the app on
//! 127.0.0.1, as an inbound cluster does.
//!
//! Needs the Go binary: `go build -o /tmp/meshperf ./cmd/meshperf` at the repo
//! root, then `MESHPERF_BIN=/tmp/meshperf cargo test --test it -- --ignored`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::Command;
use std::time::Duration;

use crate::support::certs::{CART as CART_PRINCIPAL, CATALOG as CATALOG_PRINCIPAL};
use crate::support::process::{TestDir, free_port, meshperf_bin, spawn, start_pilot, start_proxy, wait_ready};
use crate::support::{eventually, http};

/// A loopback address of this test run's own, so that parallel runs and
/// other tests on 127.0.0.1 do not collide.
fn pod_ip(last: u8) -> IpAddr {
    let run = (std::process::id() % 200) as u8 + 20;
    IpAddr::V4(Ipv4Addr::new(127, 77, run, last))
}

fn mesh_yaml(app_port: u16) -> String {
    format!(
        r#"apiVersion: v1
kind: Namespace
metadata: {{name: shop}}
---
apiVersion: v1
kind: Service
metadata: {{name: catalog, namespace: shop}}
spec:
  selector: {{app: catalog}}
  ports: [{{name: http, port: 80, targetPort: {app_port}}}]
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {{name: default, namespace: shop}}
spec:
  mtls: {{mode: STRICT}}
"#
    )
}

/// The value of the first sample line of `metric` that has every label in `labels`.
fn sample(metrics: &str, metric: &str, labels: &[&str]) -> Option<f64> {
    metrics
        .lines()
        .filter(|l| l.starts_with(metric) && labels.iter().all(|want| l.contains(want)))
        .find_map(|l| l.rsplit(' ').next()?.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the Go binary: MESHPERF_BIN=/path/to/meshperf cargo test --test it -- --ignored"]
async fn pilot_two_sidecars_server_and_load_in_mtls() {
    let dir = TestDir::new("mesh-e2e");
    let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let (client_ip, server_ip) = (pod_ip(1), pod_ip(2));

    // The control plane, with the mesh applied.
    let app = free_port(lo);
    let mesh = dir.join("mesh.yaml");
    std::fs::write(&mesh, mesh_yaml(app.port())).unwrap();
    let (_pilot, grpc) = start_pilot(&dir, &mesh).await;

    // The server pod: the app on 127.0.0.1, its sidecar on the pod address.
    let _server = spawn(
        &meshperf_bin(),
        &["server", "-http-port", &app.to_string(), "-grpc-port", "disabled", "-tcp-port", "disabled"],
        &dir.join("server.log"),
    );
    // The sidecars, in explicit mode: the server pod's binds the pod address
    // on the app's port; the client pod's binds its outbound listener, as if
    // the app's connection to port 80 had been redirected.
    let sidecar = |admin: SocketAddr, pod: &str, account: &str, ip: IpAddr, listen: &str, log: &str| {
        let (ip, labels) = (ip.to_string(), format!("app={account}"));
        let flags = [
            "--service-account",
            account,
            "--instance-ip",
            &ip,
            "--labels",
            &labels,
            "--capture-mode",
            "none",
            "--listen",
            listen,
        ];
        start_proxy(grpc, admin, pod, &flags, &dir.join(log))
    };
    let (server_admin, client_admin) = (free_port(lo), free_port(lo));
    let inbound = format!("{server_ip}:{port}=virtualInbound:{port}", port = app.port());
    let _server_proxy = sidecar(server_admin, "catalog-1", "catalog", server_ip, &inbound, "server-proxy.log");
    let outbound = free_port(client_ip);
    let outbound_binding = format!("{outbound}=virtualOutbound:80");
    let _client_proxy = sidecar(client_admin, "cart-1", "cart", client_ip, &outbound_binding, "client-proxy.log");
    wait_ready(server_admin, "the server sidecar", Duration::from_secs(30)).await;
    wait_ready(client_admin, "the client sidecar", Duration::from_secs(30)).await;

    // Load through both sidecars, HTTP/1.1 then HTTP/2, until the control plane's
    // endpoint for the server pod has reached the client sidecar.
    let url = format!("http://{outbound}/?size=1024");
    let run = |h2: bool| {
        let mut args =
            vec!["load", "-quiet", "-n", "200", "-c", "2", "-qps", "0", "-H", "Host: catalog.shop.svc.cluster.local"];
        if h2 {
            args.push("-h2");
        }
        args.extend(["-json", "-", url.as_str()]);
        Command::new(meshperf_bin()).args(&args).output().expect("run meshperf load")
    };
    eventually("HTTP/1.1 through both sidecars fully succeeds", Duration::from_secs(30), async || {
        let out = run(false);
        let json = String::from_utf8_lossy(&out.stdout);
        let done = out.status.success() && json.contains(r#""200": 200"#);
        if !done {
            eprintln!("not yet: {json} {}", String::from_utf8_lossy(&out.stderr));
        }
        done.then_some(())
    })
    .await;
    let out = run(true);
    let json = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && json.contains(r#""200": 200"#), "HTTP/2: {json}");

    // What each side saw: the client side reports the server's identity, the
    // server side reports mTLS and the client's identity.
    let (_, client_metrics) = http(client_admin, "GET", "/stats/prometheus").await;
    let (_, server_metrics) = http(server_admin, "GET", "/stats/prometheus").await;
    let source = sample(
        &client_metrics,
        "istio_requests_total",
        &[
            r#"reporter="source""#,
            r#"destination_service="catalog.shop.svc.cluster.local""#,
            &format!(r#"destination_principal="{CATALOG_PRINCIPAL}""#),
            r#"response_code="200""#,
        ],
    );
    assert!(source.is_some_and(|n| n >= 400.0), "client sidecar counted {source:?}:\n{client_metrics}");
    let destination = sample(
        &server_metrics,
        "istio_requests_total",
        &[
            r#"reporter="destination""#,
            &format!(r#"source_principal="{CART_PRINCIPAL}""#),
            r#"connection_security_policy="mutual_tls""#,
            r#"response_code="200""#,
        ],
    );
    assert!(destination.is_some_and(|n| n >= 400.0), "server sidecar counted {destination:?}:\n{server_metrics}");

    // STRICT: a client without a sidecar is refused by the server sidecar.
    let plain = Command::new(meshperf_bin())
        .args(["load", "-quiet", "-n", "5", "-c", "1", "-qps", "0", "-json", "-"])
        .arg(format!("http://{server_ip}:{}/", app.port()))
        .output()
        .expect("run meshperf load");
    let json = String::from_utf8_lossy(&plain.stdout);
    assert!(!json.contains(r#""200""#), "plain text got through a STRICT sidecar: {json}");
    assert!(!plain.stderr.is_empty() || json.contains("-1"), "no sign of the refusal: {json}");
}
