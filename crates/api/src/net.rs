//! IPv4 CIDRs, as the apiserver (Service ClusterIPs) and node IPAM (pod CIDRs)
//! read them.

use std::net::Ipv4Addr;

/// Parses `10.96.0.0/12` into (network, prefix length).
pub fn parse_cidr(cidr: &str) -> Result<(Ipv4Addr, u8), String> {
    let (ip, bits) = cidr
        .split_once('/')
        .ok_or_else(|| format!("{cidr:?} is not a CIDR"))?;
    let ip: Ipv4Addr = ip
        .parse()
        .map_err(|_| format!("{cidr:?} is not an IPv4 CIDR"))?;
    let bits: u8 = bits
        .parse()
        .ok()
        .filter(|b| *b <= 30)
        .ok_or_else(|| format!("{cidr:?}: prefix must be at most /30"))?;
    let mask = if bits == 0 {
        0
    } else {
        u32::MAX << (32 - bits)
    };
    Ok((Ipv4Addr::from(u32::from(ip) & mask), bits))
}

/// Formats (network, prefix length) as `10.244.3.0/24`.
pub fn format_cidr(net: Ipv4Addr, bits: u8) -> String {
    format!("{net}/{bits}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_normalizes() {
        assert_eq!(
            parse_cidr("10.244.7.9/16"),
            Ok((Ipv4Addr::new(10, 244, 0, 0), 16))
        );
        assert!(parse_cidr("10.244.0.0").is_err());
        assert!(parse_cidr("10.244.0.0/31").is_err());
        assert!(parse_cidr("fd00::/64").is_err());
        assert_eq!(
            format_cidr(Ipv4Addr::new(10, 244, 3, 0), 24),
            "10.244.3.0/24"
        );
    }
}
