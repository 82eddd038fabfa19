//! The worker threads the binary serves on: connections are spread over the
//! workers by open connections, each connection's requests stay on its
//! worker, and shutdown stops them all.

mod proxy_support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Parser;
use hyper_util::rt::TokioIo;
use meshperf_proxy::config::Cli;
use meshperf_proxy::proxy::{Proxy, RequestInfo, RequestObserver, TcpInfo, Workers};
use meshperf_proxy::state::*;
use proxy_support::*;
use tokio::net::TcpStream;
use tokio::sync::watch;

/// Which thread reported each request.
#[derive(Default)]
struct Threads(Mutex<BTreeMap<String, usize>>);

impl RequestObserver for Threads {
    fn on_request(&self, _: RequestInfo) {
        let name = std::thread::current().name().unwrap_or("unnamed").to_string();
        *self.0.lock().unwrap().entry(name).or_default() += 1;
    }
    fn on_tcp_close(&self, _: TcpInfo) {}
}

// Not a tokio test: the workers run their own runtimes; this one only runs
// the upstream and the clients.
#[test]
fn connections_spread_over_workers_and_shutdown_stops_them() {
    let clients = tokio::runtime::Runtime::new().unwrap();
    let (app, _) = clients.block_on(upstream("a"));
    let snap = http_to("outbound|80||a", app);
    let config = Cli::try_parse_from(["meshperf-proxy", "--capture-mode=none", "--listen=127.0.0.1:0=0.0.0.0_80:80"])
        .unwrap()
        .into_config()
        .unwrap();
    let state = Arc::new(State::new());
    state.publish(snap);
    let threads = Arc::new(Threads::default());
    let proxy = Proxy::new(Arc::new(config), state, Some(threads.clone()));

    let bound = Workers::bind(&proxy, 2).unwrap();
    let addr = *bound.local_addrs()[0].as_ref().unwrap();
    let (stop, stopped) = watch::channel(false);
    let workers = bound.start(stopped).unwrap();

    // Four keep-alive connections, opened one after another and held open
    // together, three requests each.
    clients.block_on(async {
        let mut senders = Vec::new();
        for _ in 0..4 {
            let stream = TcpStream::connect(addr).await.unwrap();
            let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
            tokio::spawn(conn);
            senders.push(sender);
        }
        for sender in &mut senders {
            for _ in 0..3 {
                assert_eq!(get_on(sender, "a").await, 200);
            }
        }
    });
    // Reports come after the response is sent: wait for all twelve.
    let deadline = std::time::Instant::now() + WAIT;
    while threads.0.lock().unwrap().values().sum::<usize>() < 12 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let seen = threads.0.lock().unwrap().clone();
    assert_eq!(seen, BTreeMap::from([("worker-0".to_string(), 6), ("worker-1".to_string(), 6)]));

    stop.send_replace(true);
    let (done, joined) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        workers.join();
        let _ = done.send(());
    });
    joined.recv_timeout(Duration::from_secs(10)).expect("workers did not stop after shutdown");
}
