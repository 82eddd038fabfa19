//! Against the real control plane: `meshperf pilot` on loopback, the shop mesh
//! applied, and the proxy joining it as a cart pod. It must reach readiness
//! (CDS, EDS, LDS, RDS and the SDS certificate and roots, all converted) over
//! delta and SotW, and the binary must serve /ready and exit on /quitquitquit.
//!
//! Needs the Go binary: `go build -o /tmp/meshperf ./cmd/meshperf` at the repo
//! root, then `MESHPERF_BIN=/tmp/meshperf cargo test -- --include-ignored`.

mod support;

use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use meshperf_proxy::config::NodeIdentity;
use meshperf_proxy::state::{Handler, Secret, State, TransportProtocol, UpstreamTransport};
use meshperf_proxy::xds::{XdsClient, XdsConfig};
use tokio::sync::watch;

/// Kills the child process when the test ends, however it ends.
struct Reaper(Child);

impl Drop for Reaper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free loopback port")
}

fn meshperf_bin() -> String {
    std::env::var("MESHPERF_BIN")
        .expect("set MESHPERF_BIN to a built meshperf binary (go build -o /tmp/meshperf ./cmd/meshperf)")
}

/// Starts pilot and applies the shop mesh; returns the guard and the ADS address.
fn start_pilot(dir: &std::path::Path) -> (Reaper, SocketAddr) {
    let (grpc, http, mon) = (free_port(), free_port(), free_port());
    let child = Command::new(meshperf_bin())
        .args(["pilot", "--dataDir"])
        .arg(dir)
        .args(["--grpcAddr", &grpc.to_string(), "--httpAddr", &http.to_string(), "--monitoringAddr", &mon.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start meshperf pilot");
    let reaper = Reaper(child);
    let mesh = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/testdata/pilot-mesh.yaml");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let applied = Command::new(meshperf_bin())
            .args(["apply", "-f", mesh, "-s", &http.to_string()])
            .output()
            .expect("run meshperf apply");
        if applied.status.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "pilot did not take the config: {}",
            String::from_utf8_lossy(&applied.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    (reaper, grpc)
}

fn cart_pod() -> NodeIdentity {
    NodeIdentity {
        id: "sidecar~127.0.0.1~cart-1.shop~shop.svc.cluster.local".into(),
        namespace: "shop".into(),
        labels: [("app".to_string(), "cart".to_string()), ("version".to_string(), "v1".to_string())].into(),
        service_account: "cart".into(),
        instance_ips: vec!["127.0.0.1".parse().unwrap()],
        workload_name: "cart".into(),
    }
}

async fn reaches_ready(ads: SocketAddr, delta: bool) {
    let state = Arc::new(State::new());
    let cfg = XdsConfig { address: ads.to_string(), node: cart_pod(), delta };
    let (client, mut ready) = XdsClient::new(cfg, state.clone());
    let metrics = client.metrics();
    let (stop_tx, stop) = watch::channel(false);
    let task = tokio::spawn(client.run(stop));
    assert!(
        tokio::time::timeout(Duration::from_secs(20), ready.wait()).await.expect("ready within 20s"),
        "delta={delta}"
    );

    // Readiness is the first complete config; pilot may still be debouncing
    // the applied mesh then, so wait for the cart pod's own config.
    let deadline = Instant::now() + Duration::from_secs(20);
    let snap = loop {
        let snap = state.snapshot();
        let settled = snap.clusters.contains_key("inbound|8080||")
            && snap.endpoints.contains_key("outbound|80|v1|cart.shop.svc.cluster.local")
            && snap.routes.contains_key("80");
        if settled {
            break snap;
        }
        assert!(
            Instant::now() < deadline,
            "no inbound cluster for cart: {:?}",
            snap.clusters.keys().collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let vi = snap.listeners.get("virtualInbound").expect("virtualInbound");
    let chain =
        vi.select_chain(8080, None, TransportProtocol::Tls, &[]).expect("an mTLS chain for cart's port 8080 (STRICT)");
    assert_eq!(chain.name, "inbound|8080||");
    assert!(chain.tls.as_ref().is_some_and(|t| t.require_client_certificate));
    assert!(matches!(chain.handler, Handler::Http(_)));
    let cart = snap.clusters.get("outbound|80|v1|cart.shop.svc.cluster.local").expect("cart v1 subset cluster");
    assert!(matches!(cart.transport, UpstreamTransport::Auto(_)));
    assert!(snap.endpoints.contains_key("outbound|80|v1|cart.shop.svc.cluster.local"));
    assert!(snap.routes.contains_key("80"));
    assert!(matches!(snap.secrets.get("default").map(|s| &**s), Some(Secret::Certificate(c)) if !c.chain.is_empty()));
    assert!(matches!(snap.secrets.get("ROOTCA").map(|s| &**s), Some(Secret::Validation(v)) if !v.roots.is_empty()));
    for t in meshperf_proxy::xds::ResourceType::ALL {
        assert_eq!(metrics.nacks(t), 0, "{t} NACKed");
    }
    stop_tx.send_replace(true);
    let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
}

#[tokio::test]
#[ignore = "needs the Go control plane: MESHPERF_BIN=/path/to/meshperf cargo test -- --include-ignored"]
async fn real_pilot_delta_sotw_and_binary() {
    let dir = std::env::temp_dir().join(format!("meshperf-proxy-pilot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (_pilot, ads) = start_pilot(&dir);
    reaches_ready(ads, true).await;
    reaches_ready(ads, false).await;

    // The binary itself: ready over admin, then a clean exit on /quitquitquit.
    let admin = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_meshperf-proxy"))
        .args(["--xds-address", &ads.to_string(), "--admin-address", &admin.to_string()])
        .args([
            "--pod-name",
            "cart-2",
            "--pod-namespace",
            "shop",
            "--labels",
            "app=cart,version=v1",
            "--service-account",
            "cart",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start meshperf-proxy");
    let mut proxy = Reaper(child);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(conn) = tokio::net::TcpStream::connect(admin).await {
            drop(conn);
            if support::http(admin, "GET", "/ready").await.0 == 200 {
                break;
            }
        }
        assert!(Instant::now() < deadline, "the proxy binary did not become ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(support::http(admin, "POST", "/quitquitquit").await.0, 200);
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = proxy.0.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "the proxy did not exit after /quitquitquit");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "{status}");
    let _ = std::fs::remove_dir_all(&dir);
}
