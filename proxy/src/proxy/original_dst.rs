//! The original destination of a connection that iptables redirected to the
//! capture listeners (SO_ORIGINAL_DST), read through nix's safe, AsFd-based
//! getsockopt: no unsafe code.

use std::io;
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};

use nix::sys::socket::{SockaddrIn, SockaddrIn6, getsockopt, sockopt};
use tokio::net::TcpStream;

pub fn original_dst(stream: &TcpStream) -> io::Result<SocketAddr> {
    let local = stream.local_addr()?;
    let addr = if local.is_ipv4() {
        let raw = getsockopt(stream, sockopt::OriginalDst).map_err(io::Error::from)?;
        SocketAddr::V4(SocketAddrV4::from(SockaddrIn::from(raw)))
    } else {
        let raw = getsockopt(stream, sockopt::Ip6tOriginalDst).map_err(io::Error::from)?;
        SocketAddr::V6(SocketAddrV6::from(SockaddrIn6::from(raw)))
    };
    Ok(addr)
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn not_redirected_is_an_error_or_the_local_address() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let _client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (server, _) = l.accept().await.unwrap();
        // Without a NAT entry Linux says ENOENT; with conntrack it may give the local address.
        match super::original_dst(&server) {
            Ok(a) => assert_eq!(a, addr),
            Err(e) => assert!(e.raw_os_error().is_some(), "{e}"),
        }
    }
}
