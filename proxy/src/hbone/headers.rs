//! The two request fields HBONE reads: the `:authority` (where the stream
//! goes) and the `forwarded` header's `for=` (who it comes from).
//! Both parse untrusted input; the fuzz target `hbone_headers` runs them.

use std::net::SocketAddr;

/// The CONNECT authority as a destination: exactly `IP:PORT` (`[IPv6]:PORT`).
/// Host names are refused: a node proxy delivers to addresses only.
pub fn parse_authority(authority: &str) -> Option<SocketAddr> {
    authority.parse().ok()
}

/// The `forwarded` value a client sends (RFC 7239): `for="IP:PORT"`.
pub fn forwarded_for(source: SocketAddr) -> String {
    format!("for=\"{source}\"")
}

/// The first `for=` of a `forwarded` header as an address, when it is one:
/// `for="IP:PORT"` or `for=IP` (port 0), in the first element of a list,
/// parameters in any order and case. None for anything else (obfuscated
/// identifiers, `unknown`, garbage): the source is then the connection's peer.
pub fn parse_forwarded_for(value: &str) -> Option<SocketAddr> {
    let first = value.split(',').next()?;
    let raw = first.split(';').find_map(|pair| {
        let (name, v) = pair.split_once('=')?;
        name.trim().eq_ignore_ascii_case("for").then_some(v.trim())
    })?;
    let unquoted = match raw.strip_prefix('"') {
        Some(rest) => rest.strip_suffix('"')?,
        None => raw,
    };
    if let Ok(addr) = unquoted.parse::<SocketAddr>() {
        return Some(addr);
    }
    let bare = unquoted.strip_prefix('[').and_then(|s| s.strip_suffix(']')).unwrap_or(unquoted);
    bare.parse().ok().map(|ip| SocketAddr::new(ip, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorities() {
        assert_eq!(parse_authority("10.0.0.7:8080"), Some("10.0.0.7:8080".parse().unwrap()));
        assert_eq!(parse_authority("[fd00::7]:80"), Some("[fd00::7]:80".parse().unwrap()));
        for bad in ["", "10.0.0.7", "catalog:80", "10.0.0.7:99999", "fd00::7:80", "10.0.0.7:80/x"] {
            assert_eq!(parse_authority(bad), None, "{bad}");
        }
    }

    #[test]
    fn forwarded_round_trips_and_tolerates_variants() {
        for source in ["10.0.0.3:41234", "[fd00::3]:41234"] {
            let addr: SocketAddr = source.parse().unwrap();
            assert_eq!(parse_forwarded_for(&forwarded_for(addr)), Some(addr));
        }
        let ip = |s: &str| Some(SocketAddr::new(s.parse().unwrap(), 0));
        assert_eq!(parse_forwarded_for("for=10.0.0.3"), ip("10.0.0.3"));
        assert_eq!(parse_forwarded_for("proto=http; For=\"[fd00::3]\""), ip("fd00::3"));
        assert_eq!(parse_forwarded_for("for=\"10.0.0.3:1\", for=10.0.0.9"), Some("10.0.0.3:1".parse().unwrap()));
        for bad in ["", "for=unknown", "for=_hidden", "by=10.0.0.3", "for=\"10.0.0.3", "for="] {
            assert_eq!(parse_forwarded_for(bad), None, "{bad}");
        }
    }
}
