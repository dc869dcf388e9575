//! Ethernet addresses (OpenFlow `eth_src`/`eth_dst`, WAN next hops, OVS internal ports).

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A 48-bit Ethernet address, written `02:00:c6:12:0a:02`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(value_type = String, example = "02:00:c6:12:0a:02"))]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// The locally administered MAC `02:00:` + the four octets of `addr`: the convention of test
    /// beds that set interface MACs from addresses. Nothing guesses a MAC from it in production.
    pub fn from_ipv4(addr: Ipv4Addr) -> Self {
        let [a, b, c, d] = addr.octets();
        Self([0x02, 0x00, a, b, c, d])
    }
}

impl fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

/// A MAC address that is not six `:`-separated hex octets.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid MAC address {0:?}: not a MAC address like 02:00:c6:12:0a:02 (six hex octets)")]
pub struct MacParseError(pub String);

impl FromStr for MacAddr {
    type Err = MacParseError;
    fn from_str(s: &str) -> Result<Self, MacParseError> {
        let bad = || MacParseError(s.to_owned());
        let mut out = [0u8; 6];
        let mut parts = s.split(':');
        for byte in &mut out {
            let part = parts.next().ok_or_else(bad)?;
            if part.len() != 2 {
                return Err(bad());
            }
            *byte = u8::from_str_radix(part, 16).map_err(|_| bad())?;
        }
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(Self(out))
    }
}

impl TryFrom<String> for MacAddr {
    type Error = MacParseError;
    fn try_from(s: String) -> Result<Self, MacParseError> {
        s.parse()
    }
}

impl From<MacAddr> for String {
    fn from(m: MacAddr) -> String {
        m.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_print() {
        let m: MacAddr = "02:00:c6:12:0a:02".parse().unwrap();
        assert_eq!(m, MacAddr::from_ipv4(Ipv4Addr::new(198, 18, 10, 2)));
        assert_eq!(m.to_string(), "02:00:c6:12:0a:02");
        for bad in [
            "",
            "02:00:c6:12:0a",
            "02:00:c6:12:0a:02:03",
            "2:00:c6:12:0a:02",
            "zz:00:c6:12:0a:02",
        ] {
            assert!(bad.parse::<MacAddr>().is_err(), "{bad}");
        }
        let json = serde_json::to_string(&m).unwrap();
        assert_eq!(json, "\"02:00:c6:12:0a:02\"");
        assert_eq!(serde_json::from_str::<MacAddr>(&json).unwrap(), m);
    }
}
