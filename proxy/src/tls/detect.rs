//! TLS or plain text? The PERMISSIVE inbound side serves both on one port and
//! picks the filter chain by the answer (`transport_protocol` tls/raw_buffer),
//! like Envoy's `tls_inspector`.
//!
//! The bytes are peeked, not read, so whichever side takes the connection
//! (rustls or the plain-text handler) sees them from the start. A TLS record
//! opens with content type 22 (handshake) and major version 3; nothing a
//! plain-text client of a mesh (HTTP, gRPC, most TCP protocols) sends starts
//! with byte 22, so the first byte alone usually decides.
//!
//! Timeout: Envoy's inspector waits for the client's first bytes, up to
//! `listener_filters_timeout` (15 s by default) and Istio lets the connection
//! continue as plain text when it expires (`continue_on_listener_filters_timeout`).
//! We do the same with [`DETECT_TIMEOUT`]. A short timeout (even 100 ms) would
//! help server-first protocols (MySQL, SMTP) but misread a slow TLS client as
//! plain text and break it; Istio tried that and reverted it, and documents
//! that server-first protocols need STRICT or DISABLE instead of PERMISSIVE.

use std::io;
use std::time::Duration;

use tokio::net::TcpStream;

/// Envoy's default `listener_filters_timeout`.
pub const DETECT_TIMEOUT: Duration = Duration::from_secs(15);

/// TLS record type "handshake"; a ClientHello's record starts with it.
const TLS_HANDSHAKE: u8 = 0x16;
/// The major version of SSL 3.0 and every TLS record version.
const TLS_MAJOR: u8 = 0x03;
/// How long to wait for the second byte when only the first has arrived; the
/// peek cannot wait for "more than what is there", so we poll, briefly and
/// only in this rare case (a ClientHello split after its first byte).
const PARTIAL_POLL: Duration = Duration::from_millis(1);

/// What the client's first bytes say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detected {
    /// A TLS ClientHello: serve the `tls` chain.
    Tls,
    /// Anything else, or nothing within the timeout: the `raw_buffer` chain.
    Plaintext,
    /// The client closed the connection before sending anything.
    Closed,
}

/// Peeks at the client's first bytes, without consuming them, and says
/// whether they open a TLS handshake. Waits at most `timeout` for them (then:
/// plain text); an I/O error (a reset) is returned for the caller to log.
pub async fn detect(stream: &TcpStream, timeout: Duration) -> io::Result<Detected> {
    match tokio::time::timeout(timeout, peek_first_bytes(stream)).await {
        Ok(r) => r,
        Err(_) => Ok(Detected::Plaintext),
    }
}

async fn peek_first_bytes(stream: &TcpStream) -> io::Result<Detected> {
    let mut buf = [0u8; 2];
    loop {
        let n = stream.peek(&mut buf).await?;
        match classify(&buf[..n]) {
            Some(d) => return Ok(d),
            None => tokio::time::sleep(PARTIAL_POLL).await,
        }
    }
}

/// Decides from the bytes seen so far; None: need another byte.
fn classify(bytes: &[u8]) -> Option<Detected> {
    match bytes {
        [] => Some(Detected::Closed),
        [TLS_HANDSHAKE] => None,
        [TLS_HANDSHAKE, TLS_MAJOR, ..] => Some(Detected::Tls),
        _ => Some(Detected::Plaintext),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classify_first_bytes() {
        assert_eq!(classify(&[]), Some(Detected::Closed));
        assert_eq!(classify(&[0x16]), None);
        assert_eq!(classify(&[0x16, 0x03]), Some(Detected::Tls));
        assert_eq!(classify(&[0x16, 0x01]), Some(Detected::Plaintext));
        assert_eq!(classify(b"GE"), Some(Detected::Plaintext));
        assert_eq!(classify(b"P"), Some(Detected::Plaintext));
        // The HTTP/2 prior-knowledge preface: h2c on a PERMISSIVE port.
        assert_eq!(classify(b"PR"), Some(Detected::Plaintext));
    }
}
