//! The worker threads the binary serves on: connections are spread over the
//! workers by open connections, each connection's requests stay on its
//! worker, and the drain reaches every worker: idle keep-alive connections
//! close at once and the workers stop.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Parser;
use meshperf_proxy::config::Cli;
use meshperf_proxy::proxy::{Proxy, RequestInfo, RequestObserver, TcpInfo, Workers, drain};
use meshperf_proxy::state::*;

use crate::support::*;

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
fn connections_spread_over_workers_and_the_drain_stops_them() {
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
    let (drain, drain_watch) = drain::channel();
    let workers = bound.start(&drain_watch, None).unwrap();

    clients.block_on(async {
        // Four keep-alive connections, opened one after another and held open
        // together, three requests each.
        let mut connections = Vec::new();
        for _ in 0..4 {
            connections.push(h1_connect(addr).await);
        }
        for (sender, _) in &mut connections {
            for _ in 0..3 {
                assert_eq!(get_on(sender, "a", "/").await.status, 200);
            }
        }
        // Reports come after the response is sent: wait for all twelve.
        let seen = eventually("twelve requests reported", WAIT, async || {
            let seen = threads.0.lock().unwrap().clone();
            (seen.values().sum::<usize>() == 12).then_some(seen)
        })
        .await;
        assert_eq!(seen, BTreeMap::from([("worker-0".to_string(), 6), ("worker-1".to_string(), 6)]));

        // The drain: idle keep-alive connections on both workers are closed
        // at once, well before the drain period ends.
        assert_eq!(drain_watch.open_connections(), 4);
        let report = tokio::time::timeout(WAIT, drain.drain(Duration::from_secs(3600))).await.expect("drained");
        assert_eq!(report.closed_at_deadline, 0, "{report:?}");
        for (_, conn) in connections {
            tokio::time::timeout(WAIT, conn).await.expect("closed").unwrap().expect("closed cleanly");
        }
        assert!(tokio::net::TcpStream::connect(addr).await.is_err(), "the listener is closed");
    });
    let (done, joined) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        workers.join();
        let _ = done.send(());
    });
    joined.recv_timeout(WAIT).expect("workers did not stop after the drain");
}
