//! Access log tests: JSON lines with Envoy's field names, the run-time switch,
//! and a full queue that drops and counts instead of blocking.

use std::io::{self, Write};
use std::net::SocketAddr;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::*;

/// A writer whose bytes the test can read.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().map_err(|_| io::Error::other("poisoned"))?.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Shared {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().map(|b| b.clone()).unwrap_or_default()).expect("utf-8")
    }
}

fn entry(i: u64) -> AccessLogEntry {
    let addr = |s: &str| s.parse::<SocketAddr>().ok();
    AccessLogEntry {
        method: Some("GET".into()),
        path: Some(format!("/items/{i}")),
        protocol: Some("HTTP/1.1"),
        response_code: 200,
        response_flags: ResponseFlags::NONE,
        bytes_received: 0,
        bytes_sent: 1024,
        duration: Duration::from_micros(2_900),
        upstream_service_time: Some(Duration::from_millis(2)),
        user_agent: Some("fortio.org/fortio-1.75".into()),
        request_id: Some("6c1a5f0e".into()),
        authority: Some("web.shop:80".into()),
        upstream_host: addr("10.1.0.1:8080"),
        upstream_cluster: Some("outbound|80||web.shop.svc.cluster.local".into()),
        route_name: Some("default".into()),
        downstream_remote_address: addr("127.0.0.1:40000"),
        ..AccessLogEntry::new(UNIX_EPOCH + Duration::from_millis(1_700_000_000_123))
    }
}

fn log_to(w: Box<dyn Write + Send>, enabled: bool, capacity: usize) -> AccessLog {
    AccessLog::start(AccessLogOptions { enabled, sink: AccessLogSink::Writer(w), capacity }).expect("access log")
}

#[test]
fn lines_are_json_with_envoy_fields() {
    let buf = Shared::default();
    let log = log_to(Box::new(buf.clone()), true, 16);
    assert!(log.log(entry(1)));
    assert!(log.log(AccessLogEntry { response_flags: ResponseFlags::UPSTREAM_CONNECTION_FAILURE, ..entry(2) }));
    log.close();
    let text = buf.text();
    let lines: Vec<serde_json::Value> =
        text.lines().map(|l| serde_json::from_str(l).expect("each line is one JSON object")).collect();
    assert_eq!(lines.len(), 2, "{text}");
    let l = &lines[0];
    assert_eq!(l["start_time"], "2023-11-14T22:13:20.123Z");
    assert_eq!(l["method"], "GET");
    assert_eq!(l["path"], "/items/1");
    assert_eq!(l["protocol"], "HTTP/1.1");
    assert_eq!(l["response_code"], 200);
    assert_eq!(l["response_flags"], "-");
    assert_eq!(l["bytes_sent"], 1024);
    assert_eq!(l["duration"], 2);
    assert_eq!(l["upstream_service_time"], 2);
    assert_eq!(l["upstream_host"], "10.1.0.1:8080");
    assert_eq!(l["upstream_cluster"], "outbound|80||web.shop.svc.cluster.local");
    assert_eq!(l["downstream_remote_address"], "127.0.0.1:40000");
    assert!(l["x_forwarded_for"].is_null() && l["requested_server_name"].is_null());
    assert_eq!(lines[1]["response_flags"], "UF");
}

#[test]
fn off_by_default_and_switchable() {
    let buf = Shared::default();
    let log = AccessLog::start(AccessLogOptions {
        sink: AccessLogSink::Writer(Box::new(buf.clone())),
        ..AccessLogOptions::default()
    })
    .expect("access log");
    assert!(!log.enabled());
    assert!(!log.log(entry(1)), "off: not queued");
    log.set_enabled(true);
    assert!(log.log(entry(2)));
    log.set_enabled(false);
    assert!(!log.log(entry(3)));
    assert_eq!(log.dropped(), 0, "switched off is not dropped");
    log.close();
    assert_eq!(buf.text().lines().count(), 1);
    assert!(buf.text().contains("/items/2"));
}

/// Blocks in its first write until released, as a stuck disk would.
struct Stuck {
    entered: mpsc::Sender<()>,
    release: Option<mpsc::Receiver<()>>,
    out: Shared,
}

impl Write for Stuck {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if let Some(release) = self.release.take() {
            let _ = self.entered.send(());
            let _ = release.recv();
        }
        self.out.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_full_queue_drops_and_counts_without_blocking() {
    const CAPACITY: usize = 4;
    let (entered_tx, entered) = mpsc::channel();
    let (release, release_rx) = mpsc::channel();
    let out = Shared::default();
    let log = Arc::new(log_to(
        Box::new(Stuck { entered: entered_tx, release: Some(release_rx), out: out.clone() }),
        true,
        CAPACITY,
    ));
    assert!(log.log(entry(0)));
    entered.recv_timeout(Duration::from_secs(10)).expect("the writer reaches its first write");
    // The writer is stuck and its queue empty: CAPACITY entries fit, the rest
    // are dropped. Logged from another thread so a blocking log fails the test
    // instead of hanging it.
    let (done_tx, done) = mpsc::channel();
    let worker_log = log.clone();
    let worker = std::thread::spawn(move || {
        let queued = (1..=50).filter(|i| worker_log.log(entry(*i))).count();
        let _ = done_tx.send(queued);
    });
    let queued = done.recv_timeout(Duration::from_secs(10)).expect("log() returned while the writer was stuck");
    assert_eq!(queued, CAPACITY);
    assert_eq!(log.dropped(), 50 - CAPACITY as u64);
    let _ = release.send(());
    worker.join().expect("the logging thread");
    let log = Arc::try_unwrap(log).ok().expect("the only reference");
    log.close();
    assert_eq!(out.text().lines().count(), 1 + CAPACITY);
}

#[test]
fn bad_file_is_an_error_not_a_panic() {
    let err = AccessLog::start(AccessLogOptions {
        sink: AccessLogSink::File("/nonexistent-dir/for/sure/access.log".into()),
        ..AccessLogOptions::default()
    });
    let msg = err.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(msg.contains("/nonexistent-dir/for/sure/access.log"), "{msg}");
}

#[test]
fn rfc3339_dates() {
    let at = |ms: u64| format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms));
    assert_eq!(at(0), "1970-01-01T00:00:00.000Z");
    assert_eq!(at(951_782_400_000), "2000-02-29T00:00:00.000Z");
    assert_eq!(at(1_709_251_199_999), "2024-02-29T23:59:59.999Z");
    assert_eq!(at(4_102_444_800_000), "2100-01-01T00:00:00.000Z");
    assert_eq!(format_rfc3339_millis(SystemTime::UNIX_EPOCH - Duration::from_secs(1)), "1970-01-01T00:00:00.000Z");
}
