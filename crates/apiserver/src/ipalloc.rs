//! Service ClusterIP and NodePort allocation. The allocators live in memory and
//! are rebuilt from the stored Services at start-up; the Services themselves
//! are the durable record of what is taken.

use std::collections::HashSet;
use std::net::Ipv4Addr;
use std::sync::Mutex;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AllocError {
    #[error("provided IP is already allocated")]
    IpTaken,
    #[error("provided IP is not in the valid range. The range of valid IPs is {0}")]
    IpOutOfRange(String),
    #[error("provided port is already allocated")]
    PortTaken,
    #[error("provided port is not in the valid range. The range of valid ports is 30000-32767")]
    PortOutOfRange,
    #[error("range is full")]
    Full,
}

pub use minik8s_api::net::parse_cidr;

/// The node port range.
struct Ranged {
    first: u32,
    size: u32,
    used: HashSet<u32>,
    next: u32,
}

impl Ranged {
    fn allocate_next(&mut self) -> Option<u32> {
        for i in 0..self.size {
            let candidate = self.first + (self.next + i) % self.size;
            if self.used.insert(candidate) {
                self.next = (self.next + i + 1) % self.size;
                return Some(candidate);
            }
        }
        None
    }
    fn contains(&self, v: u32) -> bool {
        v >= self.first && v < self.first + self.size
    }
}

pub struct Allocators {
    ips: Mutex<IpPool>,
    ports: Mutex<Ranged>,
}

/// The ClusterIP ranges: the default one (`--service-cluster-ip-range`, the
/// `kubernetes` ServiceCIDR) first, then those of other ServiceCIDRs; one set
/// of used addresses over all of them (ServiceCIDRs may overlap).
struct IpPool {
    default: Span,
    extra: Vec<(String, Span)>,
    used: HashSet<u32>,
    /// Never handed out automatically, only when asked for by address (the
    /// `kubernetes` Service's IP, and the cluster DNS's conventional .10).
    kept: Vec<u32>,
}

/// The usable addresses of one CIDR (without its network and broadcast
/// addresses), and where the next search starts.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Span {
    cidr: String,
    first: u32,
    size: u32,
    next: u32,
}

impl Span {
    fn of(cidr: &str, next: u32) -> Result<Span, String> {
        let (net, bits) = parse_cidr(cidr)?;
        if bits > 30 {
            return Err(format!("{cidr} has no room for Services"));
        }
        Ok(Span {
            cidr: cidr.to_string(),
            first: u32::from(net) + 1,
            size: ((1u64 << (32 - bits)) - 2) as u32,
            next,
        })
    }
    fn contains(&self, v: u32) -> bool {
        v >= self.first && v - self.first < self.size
    }
}

impl IpPool {
    fn spans(&self) -> impl Iterator<Item = &Span> {
        std::iter::once(&self.default).chain(self.extra.iter().map(|(_, s)| s))
    }
    fn contains(&self, v: u32) -> bool {
        self.spans().any(|s| s.contains(v))
    }
    fn ranges(&self) -> String {
        self.spans()
            .map(|s| s.cidr.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }
    fn allocate_next(&mut self) -> Option<u32> {
        let IpPool {
            default,
            extra,
            used,
            kept,
        } = self;
        for span in std::iter::once(default).chain(extra.iter_mut().map(|(_, s)| s)) {
            for i in 0..span.size {
                let candidate = span.first + (span.next + i) % span.size;
                if !kept.contains(&candidate) && used.insert(candidate) {
                    span.next = (span.next + i + 1) % span.size;
                    return Some(candidate);
                }
            }
        }
        None
    }
}

impl Allocators {
    pub fn new(service_cidr: &str) -> Result<Self, String> {
        // Skip the network address and the broadcast address. The first usable
        // one (the `kubernetes` Service's IP) and the tenth (the cluster DNS's,
        // which kube-proxy reserves for kube-dns when it starts, perhaps after
        // other Services were made) are given only when asked for: Kubernetes
        // keeps dynamic allocations out of the low "static" band for the same
        // reason (KEP-3070).
        let default = Span::of(service_cidr, 10)?;
        let ips = IpPool {
            kept: vec![default.first, default.first + 9],
            default,
            extra: Vec::new(),
            used: HashSet::new(),
        };
        let ports = Ranged {
            first: 30000,
            size: 2768,
            used: HashSet::new(),
            next: 0,
        };
        Ok(Allocators {
            ips: Mutex::new(ips),
            ports: Mutex::new(ports),
        })
    }

    fn ips(&self) -> std::sync::MutexGuard<'_, IpPool> {
        self.ips.lock().unwrap_or_else(|p| p.into_inner())
    }
    fn ports(&self) -> std::sync::MutexGuard<'_, Ranged> {
        self.ports.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The first address of the range: the `kubernetes` Service's ClusterIP.
    pub fn kubernetes_ip(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.ips().default.first)
    }

    /// The default range (`--service-cluster-ip-range`).
    pub fn default_cidr(&self) -> String {
        self.ips().default.cidr.clone()
    }

    /// The ranges of the other ServiceCIDRs (by name) new ClusterIPs may also
    /// come from; a range kept from before keeps its search position.
    /// Addresses in use stay in use whatever the ranges.
    pub fn set_extra_ranges(&self, ranges: &[(String, String)]) {
        let mut pool = self.ips();
        let extra = ranges
            .iter()
            .filter_map(|(name, cidr)| {
                let kept = pool
                    .extra
                    .iter()
                    .find(|(n, s)| n == name && s.cidr == *cidr)
                    .map(|(_, s)| s.clone());
                let span = kept.or_else(|| Span::of(cidr, 0).ok())?;
                Some((name.clone(), span))
            })
            .collect();
        pool.extra = extra;
    }

    pub fn allocate_ip(&self) -> Result<Ipv4Addr, AllocError> {
        self.ips()
            .allocate_next()
            .map(Ipv4Addr::from)
            .ok_or(AllocError::Full)
    }

    /// Reserves a specific IP (user-chosen, or re-registration at start-up).
    pub fn reserve_ip(&self, ip: &str) -> Result<(), AllocError> {
        let mut pool = self.ips();
        let addr: Ipv4Addr = ip
            .parse()
            .map_err(|_| AllocError::IpOutOfRange(pool.ranges()))?;
        if !pool.contains(u32::from(addr)) {
            return Err(AllocError::IpOutOfRange(pool.ranges()));
        }
        if !pool.used.insert(u32::from(addr)) {
            return Err(AllocError::IpTaken);
        }
        Ok(())
    }

    pub fn release_ip(&self, ip: &str) {
        if let Ok(addr) = ip.parse::<Ipv4Addr>() {
            self.ips().used.remove(&u32::from(addr));
        }
    }

    pub fn allocate_port(&self) -> Result<u16, AllocError> {
        self.ports()
            .allocate_next()
            .map(|p| p as u16)
            .ok_or(AllocError::Full)
    }

    pub fn reserve_port(&self, port: i64) -> Result<(), AllocError> {
        let mut r = self.ports();
        let p = u32::try_from(port).map_err(|_| AllocError::PortOutOfRange)?;
        if !r.contains(p) {
            return Err(AllocError::PortOutOfRange);
        }
        if !r.used.insert(p) {
            return Err(AllocError::PortTaken);
        }
        Ok(())
    }

    pub fn release_port(&self, port: i64) {
        if let Ok(p) = u32::try_from(port) {
            self.ports().used.remove(&p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_unique_ips_in_range_and_detects_conflicts() {
        let a = Allocators::new("10.96.0.0/28").unwrap();
        let mut seen = HashSet::new();
        // 14 usable addresses, .1 and .10 kept for those who ask for them.
        for _ in 0..12 {
            let ip = a.allocate_ip().unwrap();
            assert!(seen.insert(ip));
            assert!(ip.octets()[3] >= 2 && ip.octets()[3] <= 14, "{ip}");
            assert_ne!(
                ip.octets()[3],
                10,
                "the cluster DNS's address is never dynamic"
            );
        }
        assert_eq!(a.allocate_ip(), Err(AllocError::Full));
        assert_eq!(
            a.reserve_ip("10.96.0.10"),
            Ok(()),
            "but kube-dns may ask for it"
        );
        a.release_ip("10.96.0.5");
        assert_eq!(a.reserve_ip("10.96.0.5"), Ok(()));
        assert_eq!(a.reserve_ip("10.96.0.5"), Err(AllocError::IpTaken));
        assert!(matches!(
            a.reserve_ip("10.97.0.5"),
            Err(AllocError::IpOutOfRange(_))
        ));
    }

    #[test]
    fn other_service_cidrs_extend_the_range() {
        let a = Allocators::new("10.96.0.0/29").unwrap();
        // .2-.6 (.1 kept), then the extra range.
        for _ in 0..5 {
            a.allocate_ip().unwrap();
        }
        assert_eq!(a.allocate_ip(), Err(AllocError::Full));
        a.set_extra_ranges(&[("more".into(), "10.100.0.0/30".into())]);
        assert_eq!(a.allocate_ip(), Ok(Ipv4Addr::new(10, 100, 0, 1)));
        assert_eq!(a.reserve_ip("10.100.0.2"), Ok(()));
        assert_eq!(
            a.reserve_ip("10.101.0.1"),
            Err(AllocError::IpOutOfRange(
                "10.96.0.0/29,10.100.0.0/30".into()
            ))
        );
        // A range that goes away takes no new addresses; those in use stay taken.
        a.set_extra_ranges(&[]);
        assert_eq!(a.allocate_ip(), Err(AllocError::Full));
        a.set_extra_ranges(&[("more".into(), "10.100.0.0/30".into())]);
        assert_eq!(a.reserve_ip("10.100.0.1"), Err(AllocError::IpTaken));
    }

    #[test]
    fn node_ports() {
        let a = Allocators::new("10.96.0.0/12").unwrap();
        assert_eq!(a.reserve_port(30080), Ok(()));
        assert_eq!(a.reserve_port(30080), Err(AllocError::PortTaken));
        assert_eq!(a.reserve_port(80), Err(AllocError::PortOutOfRange));
        let p = a.allocate_port().unwrap();
        assert!((30000..=32767).contains(&p) && p != 30080);
    }
}
