//! What the integration tests share, one module per kind of thing:
//! `ads` (a scripted control plane), `envoy` (Envoy resources as the control
//! plane sends them), `model` (the proxy's own config model, built by hand),
//! `upstreams` (real servers on 127.0.0.1:0), `clients`, `certs` (the
//! committed test certificates), `running` (the proxy in process, with or
//! without xDS and admin) and `process` (real binaries). The most used items
//! are re-exported here.

pub mod ads;
pub mod ca;
pub mod certs;
pub mod clients;
pub mod envoy;
pub mod model;
pub mod process;
pub mod running;
pub mod upstreams;
pub mod waypoint;

use std::time::Duration;

pub use clients::*;
pub use model::*;
pub use running::*;
pub use upstreams::*;

/// How long anything in a test may take before the test fails; on tokio's
/// clock, so a test on a paused clock fails at once instead of hanging.
pub const WAIT: Duration = Duration::from_secs(10);

/// Polls `check` until it returns `Some`, for at most `within` (tokio's
/// clock), and returns that; panics saying `what` did not happen. The pause
/// between polls grows from 1 ms to 100 ms.
pub async fn eventually<T>(what: &str, within: Duration, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + within;
    let mut pause = Duration::from_millis(1);
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(tokio::time::Instant::now() < deadline, "{what}: not within {within:?}");
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}
