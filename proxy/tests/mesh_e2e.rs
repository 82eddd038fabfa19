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
//! root, then `MESHPERF_BIN=/tmp/meshperf cargo test --test mesh_e2e -- --include-ignored`.

mod support;

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CATALOG_PRINCIPAL: &str = "spiffe://cluster.local/ns/shop/sa/catalog";
const CART_PRINCIPAL: &str = "spiffe://cluster.local/ns/shop/sa/cart";

/// Kills the child process when the test ends, however it ends.
struct Reaper(Child);

impl Drop for Reaper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn meshperf_bin() -> String {
    std::env::var("MESHPERF_BIN")
        .expect("set MESHPERF_BIN to a built meshperf binary (go build -o /tmp/meshperf ./cmd/meshperf)")
}

fn free_port(ip: IpAddr) -> SocketAddr {
    TcpListener::bind((ip, 0)).and_then(|l| l.local_addr()).expect("a free loopback port")
}

/// A loopback address of this test run's own, so that parallel runs and
/// other tests on 127.0.0.1 do not collide.
fn pod_ip(last: u8) -> IpAddr {
    let run = (std::process::id() % 200) as u8 + 20;
    IpAddr::V4(Ipv4Addr::new(127, 77, run, last))
}

fn spawn(program: &str, args: &[&str], log: &Path) -> Reaper {
    let out = std::fs::File::create(log).expect("log file");
    let err = out.try_clone().expect("log file");
    let child = Command::new(program)
        .args(args)
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .spawn()
        .unwrap_or_else(|e| panic!("start {program}: {e}"));
    Reaper(child)
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

/// Polls `url` on an admin port until it answers 200.
async fn wait_ready(admin: SocketAddr, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if tokio::net::TcpStream::connect(admin).await.is_ok() && support::http(admin, "GET", "/ready").await.0 == 200 {
            return;
        }
        assert!(Instant::now() < deadline, "{what} did not become ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn proxy_args<'a>(
    ads: &'a str,
    admin: &'a str,
    pod: &'a str,
    sa: &'a str,
    ip: &'a str,
    labels: &'a str,
    listen: &'a str,
) -> Vec<&'a str> {
    vec![
        "--xds-address",
        ads,
        "--admin-address",
        admin,
        "--pod-name",
        pod,
        "--pod-namespace",
        "shop",
        "--service-account",
        sa,
        "--instance-ip",
        ip,
        "--labels",
        labels,
        "--capture-mode",
        "none",
        "--listen",
        listen,
    ]
}

/// The value of the first sample line of `metric` that has every label in `labels`.
fn sample(metrics: &str, metric: &str, labels: &[&str]) -> Option<f64> {
    metrics
        .lines()
        .filter(|l| l.starts_with(metric) && labels.iter().all(|want| l.contains(want)))
        .find_map(|l| l.rsplit(' ').next()?.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the Go binary: MESHPERF_BIN=/path/to/meshperf cargo test --test mesh_e2e -- --include-ignored"]
async fn pilot_two_sidecars_server_and_load_in_mtls() {
    let dir = std::env::temp_dir().join(format!("meshperf-mesh-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let (client_ip, server_ip) = (pod_ip(1), pod_ip(2));

    // The control plane, with the mesh applied.
    let (grpc, http, mon) = (free_port(lo), free_port(lo), free_port(lo));
    let _pilot = spawn(
        &meshperf_bin(),
        &[
            "pilot",
            "--dataDir",
            dir.join("pilot").to_str().unwrap(),
            "--grpcAddr",
            &grpc.to_string(),
            "--httpAddr",
            &http.to_string(),
            "--monitoringAddr",
            &mon.to_string(),
        ],
        &dir.join("pilot.log"),
    );
    let app = free_port(lo);
    let mesh = dir.join("mesh.yaml");
    std::fs::write(&mesh, mesh_yaml(app.port())).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let applied = Command::new(meshperf_bin())
            .args(["apply", "-f", mesh.to_str().unwrap(), "-s", &http.to_string()])
            .output()
            .expect("run meshperf apply");
        if applied.status.success() {
            break;
        }
        assert!(Instant::now() < deadline, "pilot did not take the mesh: {}", String::from_utf8_lossy(&applied.stderr));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // The server pod: the app on 127.0.0.1, its sidecar on the pod address.
    let _server = spawn(
        &meshperf_bin(),
        &["server", "-http-port", &app.to_string(), "-grpc-port", "disabled", "-tcp-port", "disabled"],
        &dir.join("server.log"),
    );
    let (ads, server_admin, client_admin) = (grpc.to_string(), free_port(lo), free_port(lo));
    let inbound = format!("{server_ip}:{port}=virtualInbound:{port}", port = app.port());
    let server_admin_s = server_admin.to_string();
    let server_ip_s = server_ip.to_string();
    let _server_proxy = spawn(
        env!("CARGO_BIN_EXE_meshperf-proxy"),
        &proxy_args(&ads, &server_admin_s, "catalog-1", "catalog", &server_ip_s, "app=catalog", &inbound),
        &dir.join("server-proxy.log"),
    );
    // The client pod: its sidecar's outbound listener, as if the app's
    // connection to port 80 had been redirected.
    let outbound = free_port(client_ip);
    let outbound_binding = format!("{outbound}=virtualOutbound:80");
    let client_admin_s = client_admin.to_string();
    let client_ip_s = client_ip.to_string();
    let _client_proxy = spawn(
        env!("CARGO_BIN_EXE_meshperf-proxy"),
        &proxy_args(&ads, &client_admin_s, "cart-1", "cart", &client_ip_s, "app=cart", &outbound_binding),
        &dir.join("client-proxy.log"),
    );
    wait_ready(server_admin, "the server sidecar").await;
    wait_ready(client_admin, "the client sidecar").await;

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
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = run(false);
        let json = String::from_utf8_lossy(&out.stdout);
        if out.status.success() && json.contains(r#""200": 200"#) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "HTTP/1.1 through both sidecars never fully succeeded: {json} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let out = run(true);
    let json = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && json.contains(r#""200": 200"#), "HTTP/2: {json}");

    // What each side saw: the client side reports the server's identity, the
    // server side reports mTLS and the client's identity.
    let (_, client_metrics) = support::http(client_admin, "GET", "/stats/prometheus").await;
    let (_, server_metrics) = support::http(server_admin, "GET", "/stats/prometheus").await;
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
    let _ = std::fs::remove_dir_all(&dir);
}
