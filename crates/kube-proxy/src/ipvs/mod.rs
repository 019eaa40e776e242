//! The ipvs backend: Service VIPs as IPVS virtual servers in the kernel,
//! programmed over generic netlink, with every VIP bound to a dummy device
//! (`kube-ipvs0`) so the node accepts packets for it.
//!
//! ```text
//!   ServicePorts ──▶ desired() ──▶ IpvsState ──▶ changes(current, desired) ──▶ netlink
//!                    (pure)        virtual servers      (pure, ordered)       IPVS_CMD_NEW_SERVICE,
//!                                  + real servers                             NEW_DEST, DEL_DEST, ...
//!                                  + VIPs on kube-ipvs0                       + RTM_NEWADDR on kube-ipvs0
//! ```
//!
//! As with iptables, only the difference is applied: a new endpoint is one
//! `NEW_DEST`, not a rebuild. The [`nl`] module encodes and decodes the
//! IPVS generic netlink messages by hand (the layouts are the kernel's
//! `include/uapi/linux/ip_vs.h`), and its tests pin them to known bytes.
//!
//! Packets from off-cluster sources to a VIP must leave with the node's
//! address or the reply would bypass the node: one iptables rule in
//! KUBE-POSTROUTING (`-m ipvs --vdir ORIGINAL --vmethod MASQ`) masquerades them.

mod backend;
pub mod netlink;

use crate::ServicePort;
pub use backend::{node_addresses, prepare, IpvsBackend};
pub use netlink::{io, nl};
use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

/// The device the VIPs are bound to (as upstream kube-proxy's ipvs mode).
pub const DEVICE: &str = "kube-ipvs0";
/// IPVS' round-robin scheduler.
pub const SCHEDULER: &str = "rr";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    Tcp,
    Udp,
}

impl Protocol {
    pub fn number(self) -> u16 {
        match self {
            Protocol::Tcp => 6,
            Protocol::Udp => 17,
        }
    }

    fn from_number(n: u16) -> Option<Protocol> {
        match n {
            6 => Some(Protocol::Tcp),
            17 => Some(Protocol::Udp),
            _ => None,
        }
    }

    fn from_name(s: &str) -> Option<Protocol> {
        match s {
            "TCP" => Some(Protocol::Tcp),
            "UDP" => Some(Protocol::Udp),
            _ => None,
        }
    }
}

/// An IPVS service: what clients connect to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VirtualServer {
    pub protocol: Protocol,
    pub addr: Ipv4Addr,
    pub port: u16,
    /// Seconds a client stays with its destination (`sessionAffinity:
    /// ClientIP` as IPVS persistence); 0: none.
    pub persistence: u32,
}

impl VirtualServer {
    /// What the kernel knows the service by (persistence is an attribute).
    fn identity(&self) -> (Protocol, Ipv4Addr, u16) {
        (self.protocol, self.addr, self.port)
    }
}

/// An IPVS destination: one endpoint behind a virtual server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RealServer {
    pub addr: Ipv4Addr,
    pub port: u16,
    pub weight: u32,
}

/// The part of the kernel's state the ipvs proxier owns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IpvsState {
    pub services: BTreeMap<VirtualServer, BTreeSet<RealServer>>,
    /// Addresses on [`DEVICE`].
    pub addresses: BTreeSet<Ipv4Addr>,
}

/// The state for `ports`: a virtual server per ClusterIP port (its VIP on
/// the device) and, for NodePorts, one per node address.
pub fn desired(ports: &[ServicePort], node_ips: &[Ipv4Addr]) -> IpvsState {
    let mut state = IpvsState::default();
    for p in ports {
        let (Some(protocol), Ok(vip)) = (Protocol::from_name(&p.protocol), p.cluster_ip.parse())
        else {
            continue;
        };
        let reals = |endpoints: &[(String, u16)]| -> BTreeSet<RealServer> {
            endpoints
                .iter()
                .filter_map(|(ip, port)| {
                    Some(RealServer {
                        addr: ip.parse().ok()?,
                        port: *port,
                        weight: 1,
                    })
                })
                .collect()
        };
        state.addresses.insert(vip);
        // Every virtual server of the port shares its protocol and persistence.
        let persistence = p.affinity_seconds.unwrap_or(0);
        let vs = |addr: Ipv4Addr, port: u16| VirtualServer {
            protocol,
            addr,
            port,
            persistence,
        };
        // The node-local traffic policies narrow the destinations to this
        // node's endpoints (the ClusterIP for internalTrafficPolicy, the
        // NodePorts and load balancer addresses for externalTrafficPolicy).
        state
            .services
            .insert(vs(vip, p.port), reals(p.internal_endpoints()));
        // A load balancer's addresses, at the Service's port.
        for ip in p.load_balancer_ips.iter().filter_map(|ip| ip.parse().ok()) {
            state
                .services
                .insert(vs(ip, p.port), reals(p.external_endpoints()));
        }
        if let Some(np) = p.node_port {
            for ip in node_ips {
                state
                    .services
                    .insert(vs(*ip, np), reals(p.external_endpoints()));
            }
        }
    }
    state
}

/// One step that turns the current state into the desired one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    AddAddress(Ipv4Addr),
    AddService(VirtualServer),
    AddDest(VirtualServer, RealServer),
    DelDest(VirtualServer, RealServer),
    DelService(VirtualServer),
    DelAddress(Ipv4Addr),
}

/// The changes, in an order the kernel accepts and that keeps serving
/// while it runs: new addresses and services first, then destinations are
/// added before old ones go, and whole services and addresses last.
pub fn changes(current: &IpvsState, desired: &IpvsState) -> Vec<Change> {
    let mut out = Vec::new();
    // A service whose persistence changes is made again: deleted first, as
    // the kernel knows only one service per protocol, address and port.
    let wanted: BTreeMap<_, &VirtualServer> = desired
        .services
        .keys()
        .map(|vs| (vs.identity(), vs))
        .collect();
    let remade: BTreeSet<&VirtualServer> = current
        .services
        .keys()
        .filter(|vs| wanted.get(&vs.identity()).is_some_and(|w| *w != *vs))
        .collect();
    for vs in &remade {
        out.push(Change::DelService(**vs));
    }
    for a in desired.addresses.difference(&current.addresses) {
        out.push(Change::AddAddress(*a));
    }
    let none = BTreeSet::new();
    for (vs, reals) in &desired.services {
        let have = match current.services.get(vs) {
            Some(h) => h,
            None => {
                out.push(Change::AddService(*vs));
                &none
            }
        };
        for r in reals.difference(have) {
            out.push(Change::AddDest(*vs, *r));
        }
    }
    for (vs, have) in &current.services {
        if let Some(want) = desired.services.get(vs) {
            for r in have.difference(want) {
                out.push(Change::DelDest(*vs, *r));
            }
        }
    }
    for vs in current.services.keys() {
        if !desired.services.contains_key(vs) && !remade.contains(vs) {
            out.push(Change::DelService(*vs));
        }
    }
    for a in current.addresses.difference(&desired.addresses) {
        out.push(Change::DelAddress(*a));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(vip: &str, port: u16, node_port: Option<u16>, eps: &[(&str, u16)]) -> ServicePort {
        ServicePort {
            namespace: "default".into(),
            service: "web".into(),
            port_name: "http".into(),
            protocol: "TCP".into(),
            cluster_ip: vip.into(),
            port,
            node_port,
            endpoints: eps.iter().map(|(i, p)| (i.to_string(), *p)).collect(),
            ..Default::default()
        }
    }

    fn vs(addr: [u8; 4], port: u16) -> VirtualServer {
        VirtualServer {
            protocol: Protocol::Tcp,
            addr: addr.into(),
            port,
            persistence: 0,
        }
    }

    #[test]
    fn client_ip_affinity_is_persistence_and_a_change_remakes_the_service() {
        let mut web = port("10.96.0.20", 80, None, &[("10.244.1.2", 8080)]);
        web.affinity_seconds = Some(600);
        let sticky = desired(&[web], &[]);
        let v = *sticky.services.keys().next().unwrap();
        assert_eq!(v.persistence, 600);
        // The kernel hears it as the persistent flag and the timeout, and
        // says it back the same way.
        let mut attrs = Vec::new();
        nl::put_attr(
            &mut attrs,
            nl::ATTR_SERVICE | nl::NLA_F_NESTED,
            &nl::service_attrs(&v, true),
        );
        let answer = nl::message(0x1c, 0, 1, nl::CMD_NEW_SERVICE, 1, &attrs);
        let msgs = nl::split(&answer).unwrap();
        assert_eq!(nl::parse_service(msgs[0].payload), Some(v));
        // Turning affinity off: the old service goes first, then the new one comes.
        let plain = desired(
            &[port("10.96.0.20", 80, None, &[("10.244.1.2", 8080)])],
            &[],
        );
        let steps = changes(&sticky, &plain);
        let mut off = v;
        off.persistence = 0;
        assert_eq!(
            steps,
            vec![
                Change::DelService(v),
                Change::AddService(off),
                Change::AddDest(off, rs([10, 244, 1, 2], 8080)),
            ]
        );
    }

    fn rs(addr: [u8; 4], port: u16) -> RealServer {
        RealServer {
            addr: addr.into(),
            port,
            weight: 1,
        }
    }

    #[test]
    fn desired_has_a_virtual_server_per_vip_and_node_port() {
        let node = Ipv4Addr::new(192, 168, 77, 11);
        let state = desired(
            &[port(
                "10.96.0.20",
                80,
                Some(30080),
                &[("10.244.1.2", 8080), ("10.244.2.2", 8080)],
            )],
            &[node],
        );
        let reals = BTreeSet::from([rs([10, 244, 1, 2], 8080), rs([10, 244, 2, 2], 8080)]);
        assert_eq!(
            state.services,
            BTreeMap::from([
                (vs([10, 96, 0, 20], 80), reals.clone()),
                (vs([192, 168, 77, 11], 30080), reals),
            ])
        );
        // Only the VIP goes on the device: the node address is already the node's.
        assert_eq!(
            state.addresses,
            BTreeSet::from([Ipv4Addr::new(10, 96, 0, 20)])
        );
    }

    #[test]
    fn changes_add_before_they_remove_and_touch_only_the_difference() {
        let one = desired(
            &[port(
                "10.96.0.20",
                80,
                None,
                &[("10.244.1.2", 8080), ("10.244.2.2", 8080)],
            )],
            &[],
        );
        let two = desired(
            &[
                port(
                    "10.96.0.20",
                    80,
                    None,
                    &[("10.244.2.2", 8080), ("10.244.3.2", 8080)],
                ),
                port("10.96.0.30", 53, None, &[]),
            ],
            &[],
        );
        assert_eq!(
            changes(&one, &two),
            vec![
                Change::AddAddress([10, 96, 0, 30].into()),
                Change::AddDest(vs([10, 96, 0, 20], 80), rs([10, 244, 3, 2], 8080)),
                Change::AddService(vs([10, 96, 0, 30], 53)),
                Change::DelDest(vs([10, 96, 0, 20], 80), rs([10, 244, 1, 2], 8080)),
            ]
        );
        assert_eq!(
            changes(&two, &IpvsState::default()),
            vec![
                Change::DelService(vs([10, 96, 0, 20], 80)),
                Change::DelService(vs([10, 96, 0, 30], 53)),
                Change::DelAddress([10, 96, 0, 20].into()),
                Change::DelAddress([10, 96, 0, 30].into()),
            ]
        );
        assert!(changes(&two, &two).is_empty());
    }

    #[test]
    fn one_endpoint_change_is_one_message() {
        let eps: Vec<(String, u16)> = (0..10).map(|i| (format!("10.244.{i}.2"), 8080)).collect();
        let mut ports: Vec<ServicePort> = (0..100)
            .map(|i| {
                let mut p = port(&format!("10.96.1.{i}"), 80, Some(30000 + i), &[]);
                p.endpoints = eps.clone();
                p
            })
            .collect();
        let node = [Ipv4Addr::new(192, 168, 77, 11)];
        let before = desired(&ports, &node);
        ports[42].endpoints[3].0 = "10.244.99.2".into();
        let after = desired(&ports, &node);
        // The ClusterIP and the NodePort virtual server each swap one destination.
        assert_eq!(changes(&before, &after).len(), 4);
    }

    // Byte layouts below are struct nlmsghdr / genlmsghdr / struct nlattr from
    // the kernel's uapi headers, written out field by field (x86_64: native
    // byte order is little endian; ports are big endian on the wire).
    #[cfg(target_endian = "little")]
    #[test]
    fn new_service_message_matches_the_kernel_layout() {
        let msg = nl::new_service(0x1c, 7, &vs([10, 96, 0, 1], 80));
        #[rustfmt::skip]
        let expected: Vec<u8> = [
            &[104, 0, 0, 0][..],           // nlmsg_len = 16 + 4 + 84
            &[0x1c, 0], &[0x05, 0],        // type = IPVS family, flags = REQUEST|ACK
            &[7, 0, 0, 0], &[0, 0, 0, 0],  // seq, port id
            &[1, 1, 0, 0],                 // cmd NEW_SERVICE, version 1, reserved
            &[84, 0, 0x01, 0x80],          // IPVS_CMD_ATTR_SERVICE | NLA_F_NESTED, 84 bytes
            &[6, 0, 1, 0], &[2, 0], &[0, 0],               // AF = AF_INET (+2 padding)
            &[6, 0, 2, 0], &[6, 0], &[0, 0],               // PROTOCOL = IPPROTO_TCP
            &[20, 0, 3, 0], &[10, 96, 0, 1], &[0; 12],     // ADDR = nf_inet_addr
            &[6, 0, 4, 0], &[0, 80], &[0, 0],              // PORT = htons(80)
            &[7, 0, 6, 0], b"rr\0", &[0],                  // SCHED_NAME
            &[12, 0, 7, 0], &[0, 0, 0, 0], &[0xff; 4],     // FLAGS {flags 0, mask ~0}
            &[8, 0, 8, 0], &[0, 0, 0, 0],                  // TIMEOUT 0
            &[8, 0, 9, 0], &[0xff; 4],                     // NETMASK /32
        ]
        .concat();
        assert_eq!(msg, expected);
    }

    #[cfg(target_endian = "little")]
    #[test]
    fn new_dest_and_delete_messages_match_the_kernel_layout() {
        let msg = nl::new_dest(0x1c, 9, &vs([10, 96, 0, 1], 53), &rs([10, 244, 1, 2], 5353));
        #[rustfmt::skip]
        let expected: Vec<u8> = [
            &[140, 0, 0, 0][..], &[0x1c, 0], &[0x05, 0], &[9, 0, 0, 0], &[0; 4],
            &[5, 1, 0, 0],                                 // cmd NEW_DEST
            &[48, 0, 0x01, 0x80],                          // SERVICE (key attributes only)
            &[6, 0, 1, 0], &[2, 0, 0, 0],
            &[6, 0, 2, 0], &[6, 0, 0, 0],
            &[20, 0, 3, 0], &[10, 96, 0, 1], &[0; 12],
            &[6, 0, 4, 0], &[0, 53, 0, 0],
            &[72, 0, 0x02, 0x80],                          // IPVS_CMD_ATTR_DEST | NESTED
            &[20, 0, 1, 0], &[10, 244, 1, 2], &[0; 12],    // ADDR
            &[6, 0, 2, 0], &[0x14, 0xe9, 0, 0],            // PORT = htons(5353)
            &[8, 0, 3, 0], &[0; 4],                        // FWD_METHOD = MASQ
            &[8, 0, 4, 0], &[1, 0, 0, 0],                  // WEIGHT 1
            &[8, 0, 5, 0], &[0; 4],                        // U_THRESH
            &[8, 0, 6, 0], &[0; 4],                        // L_THRESH
            &[6, 0, 11, 0], &[2, 0, 0, 0],                 // ADDR_FAMILY = AF_INET
        ]
        .concat();
        assert_eq!(msg, expected);

        let del = nl::del_service(0x1c, 3, &vs([10, 96, 0, 1], 53));
        assert_eq!(&del[16..20], &[3, 1, 0, 0], "cmd DEL_SERVICE");
        assert_eq!(del.len(), 16 + 4 + 48, "key attributes only");
        let get = nl::get_family(1);
        #[rustfmt::skip]
        let expected_get: Vec<u8> = [
            &[32, 0, 0, 0][..], &[0x10, 0], &[0x01, 0], &[1, 0, 0, 0], &[0; 4],
            &[3, 1, 0, 0],                                 // CTRL_CMD_GETFAMILY
            &[9, 0, 2, 0], b"IPVS\0", &[0, 0, 0],          // CTRL_ATTR_FAMILY_NAME
        ]
        .concat();
        assert_eq!(get, expected_get);
    }

    #[test]
    fn answers_parse_back_into_servers() {
        // The kernel answers GET_SERVICE / GET_DEST with the same nested
        // attributes it accepts (plus statistics, which are skipped).
        let v = vs([10, 96, 0, 7], 443);
        let r = RealServer {
            addr: [10, 244, 5, 9].into(),
            port: 8443,
            weight: 3,
        };
        let mut svc = nl::service_attrs(&v, true);
        nl::put_attr(&mut svc, 10, &[0; 36]); // IPVS_SVC_ATTR_STATS
        let mut attrs = Vec::new();
        nl::put_attr(&mut attrs, nl::ATTR_SERVICE | nl::NLA_F_NESTED, &svc);
        let answer = nl::message(0x1c, nl::NLM_F_MULTI, 5, nl::CMD_NEW_SERVICE, 1, &attrs);
        let mut dest = Vec::new();
        nl::put_attr(
            &mut dest,
            nl::ATTR_DEST | nl::NLA_F_NESTED,
            &nl::dest_attrs(&r, true),
        );
        let dest_answer = nl::message(0x1c, nl::NLM_F_MULTI, 6, nl::CMD_NEW_DEST, 1, &dest);
        let mut buf = answer.clone();
        buf.extend_from_slice(&dest_answer);
        let msgs = nl::split(&buf).unwrap();
        assert_eq!(msgs.len(), 2);
        assert_eq!(nl::parse_service(msgs[0].payload), Some(v));
        assert_eq!(nl::parse_dest(msgs[1].payload), Some(r));
        // An ack and an error.
        let mut ack = nl::message(nl::NLMSG_ERROR, 0, 5, 0, 0, &[]);
        ack.truncate(16);
        ack.extend_from_slice(&(-17i32).to_ne_bytes());
        ack[0] = 20;
        let msgs = nl::split(&ack).unwrap();
        assert_eq!(nl::error_code(&msgs[0]), Some(-17));
        assert!(nl::split(&[200, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
    }
}
