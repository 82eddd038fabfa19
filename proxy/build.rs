//! Generates the Rust types of Istio's ambient protocols: workload discovery
//! (`istio.workload`), its authorization policies (`istio.security`), the
//! CNI's hand-over of pods to the node proxy (ZDS, `istio.workload.zds`) and
//! the certificate service (`istio.v1.auth`).
//!
//! The .proto files are not copied into this tree: they are read from the Go
//! modules that go.mod pins (istio.io/istio's pkg/workloadapi, istio.io/api's
//! security/v1alpha1), which the control plane compiles against, so both sides
//! of the wire always speak the same version. `go mod download` finds them in
//! (or fetches them into) Go's module cache.
//!
//! It also records the git commit the proxy is built from (and whether its
//! sources differed from it) in MESHPERF_PROXY_COMMIT, which `--version`
//! prints: results name the data plane they measured by it. A build may set
//! MESHPERF_PROXY_COMMIT itself (a release from a tarball; or two checkouts
//! built into one target directory, as scripts/regression does, where Cargo
//! would otherwise keep the first checkout's answer: it re-runs a build
//! script only when the paths that script named change, and those are the
//! first checkout's).

use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() -> Result<(), Box<dyn Error>> {
    println!("cargo:rerun-if-env-changed=MESHPERF_PROXY_COMMIT");
    let commit = match std::env::var("MESHPERF_PROXY_COMMIT") {
        Ok(given) if !given.is_empty() => given,
        _ => git_commit(),
    };
    println!("cargo:rustc-env=MESHPERF_PROXY_COMMIT={commit}");
    let go_mod = Path::new(env!("CARGO_MANIFEST_DIR")).join("../go.mod");
    println!("cargo:rerun-if-changed={}", go_mod.display());
    let go_mod = std::fs::read_to_string(&go_mod).map_err(|e| format!("reading {}: {e}", go_mod.display()))?;

    let istio = module_dir(&go_mod, "istio.io/istio")?.join("pkg");
    let api = module_dir(&go_mod, "istio.io/api")?;
    let files = [
        istio.join("workloadapi/workload.proto"),
        istio.join("workloadapi/security/authorization.proto"),
        istio.join("zdsapi/zds.proto"),
        api.join("security/v1alpha1/ca.proto"),
    ];
    let descriptors = protox::compile(&files, [&istio, &api])?;
    tonic_prost_build::configure()
        .build_server(true) // the in-process tests serve the CA API
        .build_transport(false)
        .compile_fds(descriptors)?;
    Ok(())
}

/// The commit HEAD names, with "-dirty" when the proxy's sources have
/// uncommitted changes; "unknown" outside a git checkout (a source tarball)
/// or without git. The build script re-runs when HEAD moves (a commit, a
/// checkout) or the sources or index change, so the answer stays true.
fn git_commit() -> String {
    let manifest_dir = env!("CARGO_MANIFEST_DIR");
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git").args(args).current_dir(manifest_dir).output().ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let Some(commit) = git(&["rev-parse", "HEAD"]) else {
        return "unknown".to_string();
    };
    // HEAD is a file naming a branch; the branch's ref file (or packed-refs)
    // is what a commit changes. Worktrees keep HEAD apart from the refs, so
    // git says where each is.
    let mut watched = vec!["HEAD".to_string(), "index".to_string(), "packed-refs".to_string()];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(branch);
    }
    for name in watched {
        if let Some(path) = git(&["rev-parse", "--path-format=absolute", "--git-path", &name]) {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    for source in ["src", "Cargo.toml", "Cargo.lock", "build.rs"] {
        println!("cargo:rerun-if-changed={manifest_dir}/{source}");
    }
    match git(&["status", "--porcelain", "--", "."]) {
        Some(changes) if changes.is_empty() => commit,
        _ => commit + "-dirty",
    }
}

/// The directory of `module` at the version go.mod requires.
fn module_dir(go_mod: &str, module: &str) -> Result<PathBuf, Box<dyn Error>> {
    let version = go_mod
        .lines()
        .map(|line| line.trim().trim_start_matches("require").trim())
        .find_map(|line| {
            let mut fields = line.split_whitespace();
            (fields.next() == Some(module)).then(|| fields.next()).flatten()
        })
        .ok_or_else(|| format!("go.mod does not require {module}"))?;
    let out = Command::new("go")
        .args(["mod", "download", "-json", &format!("{module}@{version}")])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .map_err(|e| {
            format!("running `go mod download` to find {module}'s protos (Go is needed to build the proxy): {e}")
        })?;
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| {
        format!("`go mod download -json {module}@{version}`: {e}: {}", String::from_utf8_lossy(&out.stderr))
    })?;
    match info["Dir"].as_str() {
        Some(dir) if out.status.success() => Ok(PathBuf::from(dir)),
        _ => Err(format!(
            "`go mod download {module}@{version}` failed: {}",
            info["Error"].as_str().unwrap_or("no directory")
        )
        .into()),
    }
}
