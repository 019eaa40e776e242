//! IPv4 CIDRs, as the apiserver (Service ClusterIPs) and node IPAM (pod CIDRs)
//! read them; and the address a node or master is reached at by default.

use std::net::Ipv4Addr;

/// This machine's address toward the rest of the network: the source the
/// kernel picks for the default route (a UDP "connect" sends nothing). None
/// when there is no default route. The ingress proxy publishes it, and the
/// serverless gateway is reached at it.
pub fn default_route_source() -> Option<Ipv4Addr> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("192.0.2.1:9").ok()?;
    match socket.local_addr().ok()?.ip() {
        std::net::IpAddr::V4(ip) if !ip.is_unspecified() => Some(ip),
        _ => None,
    }
}

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

/// The node name a kubelet and kube-proxy take by default: the host name,
/// lowercased (as Kubernetes' `nodeutil.GetHostname`), "node" if unreadable.
pub fn default_node_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_lowercase())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "node".into())
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
