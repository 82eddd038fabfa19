//! Arbitrary bytes as the first bytes an HTTP/1 client sends, into the
//! proxy's real HTTP server path (hyper's server connection and the proxy's
//! routing handler) over an in-memory stream. Nothing may panic, and every
//! exchange must end once the client has half-closed.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use meshperf_proxy::proxy::fuzzing::HttpHarness;

struct Env {
    runtime: tokio::runtime::Runtime,
    harness: HttpHarness,
}

fn env() -> &'static Env {
    static ENV: OnceLock<Env> = OnceLock::new();
    ENV.get_or_init(|| Env {
        // Paused clock: timers fire as soon as the runtime is idle, so the
        // server's header and route timeouts cost no wall time.
        runtime: tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("tokio runtime"),
        harness: HttpHarness::new(),
    })
}

fuzz_target!(|data: &[u8]| {
    let env = env();
    let reply = env.runtime.block_on(env.harness.exchange(data));
    assert!(reply.is_some(), "the connection did not end after the client half-closed");
});
