//! Arbitrary text as what an HBONE client controls in a CONNECT request's
//! head: the `:authority`, the `forwarded` header, and the SPIFFE id in its
//! certificate. Each parser must not panic, and what it accepts must print
//! back to something that parses to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use meshperf_proxy::hbone::{forwarded_for, parse_authority, parse_forwarded_for};
use meshperf_proxy::identity::Identity;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Some(addr) = parse_authority(text) {
        assert_eq!(parse_authority(&addr.to_string()), Some(addr), "authority {text:?}");
    }
    if let Some(addr) = parse_forwarded_for(text) {
        // A port-less `for=IP` parses with port 0, which prints back as IP:0.
        assert_eq!(parse_forwarded_for(&forwarded_for(addr)), Some(addr), "forwarded {text:?}");
    }
    if let Ok(id) = text.parse::<Identity>() {
        assert_eq!(id.to_string().parse::<Identity>().ok(), Some(id), "identity {text:?}");
    }
});
