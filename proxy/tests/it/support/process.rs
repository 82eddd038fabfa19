//! Real processes: the proxy binary, and `meshperf` (the Go control plane,
//! server and load generator) for the tests that need it.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use super::eventually;

const PROXY_BIN: &str = env!("CARGO_BIN_EXE_meshperf-proxy");

/// A child process, killed when the test ends however it ends.
pub struct Reaper(pub Child);

impl Drop for Reaper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Reaper {
    /// Waits for the process to exit, for at most `within`.
    pub async fn exited(&mut self, within: Duration) -> ExitStatus {
        eventually("the process exits", within, async || self.0.try_wait().unwrap()).await
    }
}

/// Starts the proxy binary as pod `pod` of namespace `shop`, configured by
/// the control plane at `ads`, with `flags` after those; logs to `log`.
pub fn start_proxy(ads: SocketAddr, admin: SocketAddr, pod: &str, flags: &[&str], log: &Path) -> Reaper {
    let (ads, admin) = (ads.to_string(), admin.to_string());
    let mut args = vec!["--xds-address", &ads, "--admin-address", &admin, "--pod-name", pod, "--pod-namespace", "shop"];
    args.extend_from_slice(flags);
    spawn(PROXY_BIN, &args, log)
}

/// Starts `program`, its stdout and stderr both to `log`.
pub fn spawn(program: &str, args: &[&str], log: &Path) -> Reaper {
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

/// The Go binary, for the tests that run the real control plane.
pub fn meshperf_bin() -> String {
    std::env::var("MESHPERF_BIN")
        .expect("set MESHPERF_BIN to a built meshperf binary (go build -o /tmp/meshperf ./cmd/meshperf)")
}

/// A port free on `ip` now, for a process that must be told its address.
pub fn free_port(ip: IpAddr) -> SocketAddr {
    TcpListener::bind((ip, 0)).and_then(|l| l.local_addr()).expect("a free loopback port")
}

pub fn free_loopback_port() -> SocketAddr {
    free_port(IpAddr::V4(Ipv4Addr::LOCALHOST))
}

/// A directory of this test's own under the system's temporary directory,
/// emptied first; removed when the test passes, kept (with the processes'
/// logs) when it fails.
pub struct TestDir(PathBuf);

impl TestDir {
    pub fn new(name: &str) -> TestDir {
        let dir = std::env::temp_dir().join(format!("meshperf-proxy-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TestDir(dir)
    }

    pub fn join(&self, file: &str) -> PathBuf {
        self.0.join(file)
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Polls the admin endpoint until `/ready` answers 200.
pub async fn wait_ready(admin: SocketAddr, what: &str, within: Duration) {
    eventually(&format!("{what} is ready"), within, async || {
        let listening = tokio::net::TcpStream::connect(admin).await.is_ok();
        (listening && super::http(admin, "GET", "/ready").await.0 == 200).then_some(())
    })
    .await
}

/// `meshperf pilot`'s listeners, as its ready file names them.
pub struct PilotAddrs {
    pub grpc: SocketAddr,
    pub http: SocketAddr,
    /// The TLS listener (xDS and the CA's CreateCertificate); None unless
    /// asked for.
    pub secure_grpc: Option<SocketAddr>,
}

/// Starts `meshperf pilot` with its data in `dir`, every listener on a
/// port of its own choosing (port 0: a port picked here and passed would
/// race with the other tests for it), and waits for its ready file, which
/// says where each listener is; with `secure`, its TLS listener too. It
/// trusts the identities proxies claim (SDS serves them their secrets, the
/// CA signs for any caller), as these tests' proxies carry no token; it is
/// on loopback only.
pub async fn spawn_pilot(dir: &TestDir, secure: bool) -> (Reaper, PilotAddrs) {
    spawn_pilot_with(dir, secure, &["--insecure-trust-claimed-identity"]).await
}

/// [`spawn_pilot`] with `extra` flags instead of trusting claimed identities.
pub async fn spawn_pilot_with(dir: &TestDir, secure: bool, extra: &[&str]) -> (Reaper, PilotAddrs) {
    let ready = dir.join("pilot.ready");
    let data = dir.join("pilot");
    let mut args =
        vec!["pilot", "--dataDir", data.to_str().unwrap(), "--grpcAddr", "127.0.0.1:0", "--httpAddr", "127.0.0.1:0"];
    args.extend_from_slice(&["--monitoringAddr", "127.0.0.1:0", "--ready-file", ready.to_str().unwrap()]);
    args.extend_from_slice(extra);
    if secure {
        args.extend_from_slice(&["--secureGRPCAddr", "127.0.0.1:0"]);
    }
    let pilot = spawn(&meshperf_bin(), &args, &dir.join("pilot.log"));
    let listeners = eventually("pilot is ready", Duration::from_secs(20), async || {
        let text = std::fs::read_to_string(&ready).ok()?;
        let doc: serde_json::Value = serde_json::from_str(&text).ok()?;
        doc.get("listeners").cloned()
    })
    .await;
    let addr =
        |name: &str| listeners.get(name).and_then(|a| a.as_str()).map(|a| a.parse().expect("a listener's address"));
    let addrs = PilotAddrs {
        grpc: addr("grpc").expect("pilot's grpc listener"),
        http: addr("http").expect("pilot's http listener"),
        secure_grpc: addr("secureGRPC"),
    };
    (pilot, addrs)
}

/// Starts `meshperf pilot` with its data in `dir` and applies `mesh` (a
/// YAML file) once it takes it; returns the process and its ADS address.
pub async fn start_pilot(dir: &TestDir, mesh: &Path) -> (Reaper, SocketAddr) {
    let (pilot, PilotAddrs { grpc, .. }) = start_pilot_with(dir, mesh, &["--insecure-trust-claimed-identity"]).await;
    (pilot, grpc)
}

/// [`start_pilot`] with `extra` flags instead of trusting claimed
/// identities; returns every listener's address.
pub async fn start_pilot_with(dir: &TestDir, mesh: &Path, extra: &[&str]) -> (Reaper, PilotAddrs) {
    let (pilot, addrs) = spawn_pilot_with(dir, false, extra).await;
    let http = addrs.http;
    eventually("pilot takes the mesh", Duration::from_secs(20), async || {
        let applied = Command::new(meshperf_bin())
            .args(["apply", "-f", mesh.to_str().unwrap(), "-s", &http.to_string()])
            .output()
            .expect("run meshperf apply");
        applied.status.success().then_some(())
    })
    .await;
    (pilot, addrs)
}
