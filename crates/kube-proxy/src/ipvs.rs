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

use crate::ServicePort;
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
        let reals: BTreeSet<RealServer> = p
            .endpoints
            .iter()
            .filter_map(|(ip, port)| {
                Some(RealServer {
                    addr: ip.parse().ok()?,
                    port: *port,
                    weight: 1,
                })
            })
            .collect();
        state.addresses.insert(vip);
        let vs = VirtualServer {
            protocol,
            addr: vip,
            port: p.port,
        };
        state.services.insert(vs, reals.clone());
        if let Some(np) = p.node_port {
            for ip in node_ips {
                let vs = VirtualServer {
                    protocol,
                    addr: *ip,
                    port: np,
                };
                state.services.insert(vs, reals.clone());
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
        if !desired.services.contains_key(vs) {
            out.push(Change::DelService(*vs));
        }
    }
    for a in current.addresses.difference(&desired.addresses) {
        out.push(Change::DelAddress(*a));
    }
    out
}

/// Generic netlink messages of the IPVS family, encoded and decoded by hand.
pub mod nl {
    use super::{Protocol, RealServer, VirtualServer, SCHEDULER};
    use std::net::Ipv4Addr;

    pub const NLMSG_ERROR: u16 = 2;
    pub const NLMSG_DONE: u16 = 3;
    pub const NLM_F_REQUEST: u16 = 0x1;
    pub const NLM_F_MULTI: u16 = 0x2;
    pub const NLM_F_ACK: u16 = 0x4;
    pub const NLM_F_DUMP: u16 = 0x300;
    pub const NLA_F_NESTED: u16 = 0x8000;
    const NLMSG_HDRLEN: usize = 16;
    const GENL_HDRLEN: usize = 4;

    pub const GENL_ID_CTRL: u16 = 0x10;
    pub const CTRL_CMD_GETFAMILY: u8 = 3;
    pub const CTRL_ATTR_FAMILY_ID: u16 = 1;
    pub const CTRL_ATTR_FAMILY_NAME: u16 = 2;
    pub const IPVS_FAMILY: &str = "IPVS";
    pub const IPVS_GENL_VERSION: u8 = 1;

    // enum ipvs_cmd
    pub const CMD_NEW_SERVICE: u8 = 1;
    pub const CMD_DEL_SERVICE: u8 = 3;
    pub const CMD_GET_SERVICE: u8 = 4;
    pub const CMD_NEW_DEST: u8 = 5;
    pub const CMD_DEL_DEST: u8 = 7;
    pub const CMD_GET_DEST: u8 = 8;
    // IPVS_CMD_ATTR_*
    pub const ATTR_SERVICE: u16 = 1;
    pub const ATTR_DEST: u16 = 2;
    // IPVS_SVC_ATTR_*
    const SVC_AF: u16 = 1;
    const SVC_PROTOCOL: u16 = 2;
    const SVC_ADDR: u16 = 3;
    const SVC_PORT: u16 = 4;
    const SVC_SCHED_NAME: u16 = 6;
    const SVC_FLAGS: u16 = 7;
    const SVC_TIMEOUT: u16 = 8;
    const SVC_NETMASK: u16 = 9;
    // IPVS_DEST_ATTR_*
    const DEST_ADDR: u16 = 1;
    const DEST_PORT: u16 = 2;
    const DEST_FWD_METHOD: u16 = 3;
    const DEST_WEIGHT: u16 = 4;
    const DEST_U_THRESH: u16 = 5;
    const DEST_L_THRESH: u16 = 6;
    const DEST_ADDR_FAMILY: u16 = 11;
    const AF_INET: u16 = 2;
    /// IP_VS_CONN_F_MASQ: NAT to the real server (the only method that
    /// works for pods behind a VIP).
    const FWD_MASQ: u32 = 0;

    fn align4(n: usize) -> usize {
        (n + 3) & !3
    }

    /// Appends one attribute (header, payload, padding to 4 bytes).
    pub fn put_attr(buf: &mut Vec<u8>, kind: u16, payload: &[u8]) {
        let len = 4 + payload.len();
        buf.extend_from_slice(&(len as u16).to_ne_bytes());
        buf.extend_from_slice(&kind.to_ne_bytes());
        buf.extend_from_slice(payload);
        buf.resize(buf.len() + align4(len) - len, 0);
    }

    fn put_nested(buf: &mut Vec<u8>, kind: u16, inner: &[u8]) {
        put_attr(buf, kind | NLA_F_NESTED, inner);
    }

    /// `union nf_inet_addr`: 16 bytes, the IPv4 address first.
    fn inet_addr(ip: Ipv4Addr) -> [u8; 16] {
        let mut a = [0u8; 16];
        a[..4].copy_from_slice(&ip.octets());
        a
    }

    /// The attributes that name a virtual server; `full` adds what creating
    /// one needs (scheduler, flags, timeout, netmask).
    pub fn service_attrs(vs: &VirtualServer, full: bool) -> Vec<u8> {
        let mut b = Vec::new();
        put_attr(&mut b, SVC_AF, &AF_INET.to_ne_bytes());
        put_attr(&mut b, SVC_PROTOCOL, &vs.protocol.number().to_ne_bytes());
        put_attr(&mut b, SVC_ADDR, &inet_addr(vs.addr));
        // Ports travel in network byte order.
        put_attr(&mut b, SVC_PORT, &vs.port.to_be_bytes());
        if full {
            put_attr(&mut b, SVC_SCHED_NAME, format!("{SCHEDULER}\0").as_bytes());
            // struct ip_vs_flags { flags, mask }: no persistence or hashing flags.
            let mut flags = [0u8; 8];
            flags[4..].copy_from_slice(&u32::MAX.to_ne_bytes());
            put_attr(&mut b, SVC_FLAGS, &flags);
            put_attr(&mut b, SVC_TIMEOUT, &0u32.to_ne_bytes());
            put_attr(&mut b, SVC_NETMASK, &u32::MAX.to_ne_bytes());
        }
        b
    }

    pub fn dest_attrs(rs: &RealServer, full: bool) -> Vec<u8> {
        let mut b = Vec::new();
        put_attr(&mut b, DEST_ADDR, &inet_addr(rs.addr));
        put_attr(&mut b, DEST_PORT, &rs.port.to_be_bytes());
        if full {
            put_attr(&mut b, DEST_FWD_METHOD, &FWD_MASQ.to_ne_bytes());
            put_attr(&mut b, DEST_WEIGHT, &rs.weight.to_ne_bytes());
            put_attr(&mut b, DEST_U_THRESH, &0u32.to_ne_bytes());
            put_attr(&mut b, DEST_L_THRESH, &0u32.to_ne_bytes());
            put_attr(&mut b, DEST_ADDR_FAMILY, &AF_INET.to_ne_bytes());
        }
        b
    }

    /// A whole netlink message: nlmsghdr + genlmsghdr + attributes.
    pub fn message(
        family: u16,
        flags: u16,
        seq: u32,
        cmd: u8,
        version: u8,
        attrs: &[u8],
    ) -> Vec<u8> {
        let len = NLMSG_HDRLEN + GENL_HDRLEN + attrs.len();
        let mut b = Vec::with_capacity(len);
        b.extend_from_slice(&(len as u32).to_ne_bytes());
        b.extend_from_slice(&family.to_ne_bytes());
        b.extend_from_slice(&flags.to_ne_bytes());
        b.extend_from_slice(&seq.to_ne_bytes());
        b.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel fills it in
        b.extend_from_slice(&[cmd, version, 0, 0]);
        b.extend_from_slice(attrs);
        b
    }

    /// CTRL_CMD_GETFAMILY for "IPVS": the answer carries its family id.
    pub fn get_family(seq: u32) -> Vec<u8> {
        let mut attrs = Vec::new();
        put_attr(
            &mut attrs,
            CTRL_ATTR_FAMILY_NAME,
            format!("{IPVS_FAMILY}\0").as_bytes(),
        );
        message(
            GENL_ID_CTRL,
            NLM_F_REQUEST,
            seq,
            CTRL_CMD_GETFAMILY,
            1,
            &attrs,
        )
    }

    /// An IPVS command on a virtual server (and a destination): the
    /// service's key attributes, complete ones when it is created, and the
    /// destination's, complete ones when it is added.
    fn ipvs_command(
        family: u16,
        seq: u32,
        cmd: u8,
        vs: &VirtualServer,
        rs: Option<&RealServer>,
    ) -> Vec<u8> {
        let mut attrs = Vec::new();
        put_nested(
            &mut attrs,
            ATTR_SERVICE,
            &service_attrs(vs, cmd == CMD_NEW_SERVICE),
        );
        if let Some(rs) = rs {
            put_nested(&mut attrs, ATTR_DEST, &dest_attrs(rs, cmd == CMD_NEW_DEST));
        }
        let flags = NLM_F_REQUEST | NLM_F_ACK;
        message(family, flags, seq, cmd, IPVS_GENL_VERSION, &attrs)
    }

    pub fn new_service(family: u16, seq: u32, vs: &VirtualServer) -> Vec<u8> {
        ipvs_command(family, seq, CMD_NEW_SERVICE, vs, None)
    }

    pub fn del_service(family: u16, seq: u32, vs: &VirtualServer) -> Vec<u8> {
        ipvs_command(family, seq, CMD_DEL_SERVICE, vs, None)
    }

    pub fn new_dest(family: u16, seq: u32, vs: &VirtualServer, rs: &RealServer) -> Vec<u8> {
        ipvs_command(family, seq, CMD_NEW_DEST, vs, Some(rs))
    }

    pub fn del_dest(family: u16, seq: u32, vs: &VirtualServer, rs: &RealServer) -> Vec<u8> {
        ipvs_command(family, seq, CMD_DEL_DEST, vs, Some(rs))
    }

    /// Dump requests: every service, or every destination of one service.
    pub fn dump_services(family: u16, seq: u32) -> Vec<u8> {
        message(
            family,
            NLM_F_REQUEST | NLM_F_DUMP,
            seq,
            CMD_GET_SERVICE,
            IPVS_GENL_VERSION,
            &[],
        )
    }

    pub fn dump_dests(family: u16, seq: u32, vs: &VirtualServer) -> Vec<u8> {
        let mut attrs = Vec::new();
        put_nested(&mut attrs, ATTR_SERVICE, &service_attrs(vs, false));
        message(
            family,
            NLM_F_REQUEST | NLM_F_DUMP,
            seq,
            CMD_GET_DEST,
            IPVS_GENL_VERSION,
            &attrs,
        )
    }

    /// One received netlink message.
    #[derive(Debug, PartialEq, Eq)]
    pub struct Received<'a> {
        pub kind: u16,
        pub flags: u16,
        pub seq: u32,
        /// After the nlmsghdr (for generic netlink: genlmsghdr + attributes).
        pub payload: &'a [u8],
    }

    /// Splits a receive buffer into its messages.
    pub fn split(mut buf: &[u8]) -> Result<Vec<Received<'_>>, String> {
        let mut out = Vec::new();
        while buf.len() >= NLMSG_HDRLEN {
            let len = u32::from_ne_bytes(buf[0..4].try_into().unwrap()) as usize;
            if len < NLMSG_HDRLEN || len > buf.len() {
                return Err(format!(
                    "netlink message of length {len} in {} bytes",
                    buf.len()
                ));
            }
            out.push(Received {
                kind: u16::from_ne_bytes(buf[4..6].try_into().unwrap()),
                flags: u16::from_ne_bytes(buf[6..8].try_into().unwrap()),
                seq: u32::from_ne_bytes(buf[8..12].try_into().unwrap()),
                payload: &buf[NLMSG_HDRLEN..len],
            });
            buf = &buf[align4(len).min(buf.len())..];
        }
        Ok(out)
    }

    /// The errno of an NLMSG_ERROR message (0 is an acknowledgement).
    pub fn error_code(msg: &Received) -> Option<i32> {
        (msg.kind == NLMSG_ERROR && msg.payload.len() >= 4)
            .then(|| i32::from_ne_bytes(msg.payload[0..4].try_into().unwrap()))
    }

    /// The attributes in `buf`: (type without flag bits, payload).
    pub fn attrs(mut buf: &[u8]) -> Vec<(u16, &[u8])> {
        let mut out = Vec::new();
        while buf.len() >= 4 {
            let len = u16::from_ne_bytes([buf[0], buf[1]]) as usize;
            let kind = u16::from_ne_bytes([buf[2], buf[3]]) & 0x3fff;
            if len < 4 || len > buf.len() {
                break;
            }
            out.push((kind, &buf[4..len]));
            buf = &buf[align4(len).min(buf.len())..];
        }
        out
    }

    /// The attributes after the generic netlink header of a message's payload.
    fn genl_attrs(payload: &[u8]) -> Vec<(u16, &[u8])> {
        payload.get(GENL_HDRLEN..).map(attrs).unwrap_or_default()
    }

    fn u16_at(b: &[u8]) -> Option<u16> {
        Some(u16::from_ne_bytes(b.get(..2)?.try_into().ok()?))
    }

    fn ipv4_at(b: &[u8]) -> Option<Ipv4Addr> {
        let o: [u8; 4] = b.get(..4)?.try_into().ok()?;
        Some(Ipv4Addr::from(o))
    }

    /// The family id in a CTRL_CMD_GETFAMILY answer's payload.
    pub fn parse_family(payload: &[u8]) -> Option<u16> {
        genl_attrs(payload)
            .into_iter()
            .find(|(k, _)| *k == CTRL_ATTR_FAMILY_ID)
            .and_then(|(_, v)| u16_at(v))
    }

    /// The virtual server in a GET_SERVICE answer's payload (IPv4 TCP/UDP ones only).
    pub fn parse_service(payload: &[u8]) -> Option<VirtualServer> {
        let (_, svc) = genl_attrs(payload)
            .into_iter()
            .find(|(k, _)| *k == ATTR_SERVICE)?;
        let (mut af, mut proto, mut addr, mut port) = (None, None, None, None);
        for (k, v) in attrs(svc) {
            match k {
                SVC_AF => af = u16_at(v),
                SVC_PROTOCOL => proto = u16_at(v).and_then(Protocol::from_number),
                SVC_ADDR => addr = ipv4_at(v),
                SVC_PORT => port = v.get(..2).map(|p| u16::from_be_bytes([p[0], p[1]])),
                _ => {}
            }
        }
        (af == Some(AF_INET)).then_some(())?;
        Some(VirtualServer {
            protocol: proto?,
            addr: addr?,
            port: port?,
        })
    }

    /// The real server in a GET_DEST answer's payload.
    pub fn parse_dest(payload: &[u8]) -> Option<RealServer> {
        let (_, dest) = genl_attrs(payload)
            .into_iter()
            .find(|(k, _)| *k == ATTR_DEST)?;
        let (mut addr, mut port, mut weight) = (None, None, None);
        for (k, v) in attrs(dest) {
            match k {
                DEST_ADDR => addr = ipv4_at(v),
                DEST_PORT => port = v.get(..2).map(|p| u16::from_be_bytes([p[0], p[1]])),
                DEST_WEIGHT => {
                    weight = v
                        .get(..4)
                        .map(|w| u32::from_ne_bytes(w.try_into().unwrap()))
                }
                _ => {}
            }
        }
        Some(RealServer {
            addr: addr?,
            port: port?,
            weight: weight.unwrap_or(1),
        })
    }
}

/// I/O: a generic netlink socket for IPVS, rtnetlink for the device.
pub mod io {
    use super::{nl, Change, IpvsState, RealServer, VirtualServer, DEVICE};
    use anyhow::{bail, Context};
    use futures::TryStreamExt;
    use rtnetlink::packet_route::address::AddressAttribute;
    use rtnetlink::sys::{protocols::NETLINK_GENERIC, Socket, SocketAddr};
    use rtnetlink::LinkDummy;
    use std::net::{IpAddr, Ipv4Addr};

    /// A generic netlink socket bound to the IPVS family.
    pub struct Ipvs {
        socket: Socket,
        family: u16,
        seq: u32,
    }

    impl Ipvs {
        pub fn open() -> anyhow::Result<Ipvs> {
            let mut socket =
                Socket::new(NETLINK_GENERIC).context("opening a generic netlink socket")?;
            socket.bind_auto()?;
            socket.connect(&SocketAddr::new(0, 0))?;
            let mut me = Ipvs {
                socket,
                family: nl::GENL_ID_CTRL,
                seq: 0,
            };
            let answers = me.request(nl::get_family(1))?;
            me.family = answers
                .iter()
                .find_map(|payload| nl::parse_family(payload))
                .context("the kernel has no IPVS generic netlink family (modprobe ip_vs)")?;
            Ok(me)
        }

        /// Sends one request and collects the answers' payloads (generic
        /// netlink header + attributes) up to its ack or DONE.
        fn request(&mut self, mut msg: Vec<u8>) -> anyhow::Result<Vec<Vec<u8>>> {
            self.seq += 1;
            msg[8..12].copy_from_slice(&self.seq.to_ne_bytes());
            self.socket.send(&msg, 0)?;
            let mut answers = Vec::new();
            loop {
                let mut buf = vec![0u8; 65536];
                let n = self.socket.recv(&mut &mut buf[..], 0)?;
                let mut done = false;
                for m in nl::split(&buf[..n]).map_err(anyhow::Error::msg)? {
                    if m.seq != self.seq {
                        continue;
                    }
                    match nl::error_code(&m) {
                        Some(0) => done = true,
                        Some(e) => bail!("{}", std::io::Error::from_raw_os_error(-e)),
                        None if m.kind == nl::NLMSG_DONE => done = true,
                        None => {
                            // A plain (non-dump) answer is the whole reply.
                            done |= m.flags & nl::NLM_F_MULTI == 0;
                            answers.push(m.payload.to_vec());
                        }
                    }
                }
                if done {
                    return Ok(answers);
                }
            }
        }

        /// Every IPv4 virtual server with its destinations.
        pub fn list(&mut self) -> anyhow::Result<Vec<(VirtualServer, Vec<RealServer>)>> {
            let family = self.family;
            let services: Vec<VirtualServer> = self
                .request(nl::dump_services(family, 0))?
                .iter()
                .filter_map(|payload| nl::parse_service(payload))
                .collect();
            let mut out = Vec::new();
            for vs in services {
                let dests = self
                    .request(nl::dump_dests(family, 0, &vs))?
                    .iter()
                    .filter_map(|payload| nl::parse_dest(payload))
                    .collect();
                out.push((vs, dests));
            }
            Ok(out)
        }

        pub fn apply(&mut self, change: &Change) -> anyhow::Result<()> {
            let f = self.family;
            let msg = match change {
                Change::AddService(vs) => nl::new_service(f, 0, vs),
                Change::DelService(vs) => nl::del_service(f, 0, vs),
                Change::AddDest(vs, rs) => nl::new_dest(f, 0, vs, rs),
                Change::DelDest(vs, rs) => nl::del_dest(f, 0, vs, rs),
                Change::AddAddress(_) | Change::DelAddress(_) => return Ok(()),
            };
            self.request(msg)
                .map(drop)
                .with_context(|| format!("{change:?}"))
        }
    }

    /// The dummy device holding the VIPs.
    pub struct Device {
        handle: rtnetlink::Handle,
        index: u32,
    }

    impl Device {
        /// Finds or creates [`DEVICE`].
        pub async fn ensure() -> anyhow::Result<Device> {
            let (conn, handle, _) =
                rtnetlink::new_connection().context("opening a route netlink socket")?;
            tokio::spawn(conn);
            let find = |handle: rtnetlink::Handle| async move {
                let mut links = handle.link().get().match_name(DEVICE.to_string()).execute();
                Ok::<_, anyhow::Error>(
                    links
                        .try_next()
                        .await
                        .ok()
                        .flatten()
                        .map(|l| l.header.index),
                )
            };
            let index = match find(handle.clone()).await? {
                Some(i) => i,
                None => {
                    handle
                        .link()
                        .add(LinkDummy::new(DEVICE).build())
                        .execute()
                        .await
                        .with_context(|| format!("creating the dummy device {DEVICE}"))?;
                    find(handle.clone())
                        .await?
                        .context("the new device is missing")?
                }
            };
            Ok(Device { handle, index })
        }

        pub async fn addresses(&self) -> anyhow::Result<Vec<Ipv4Addr>> {
            let mut stream = self
                .handle
                .address()
                .get()
                .set_link_index_filter(self.index)
                .execute();
            let mut out = Vec::new();
            while let Some(msg) = stream.try_next().await? {
                for a in msg.attributes {
                    if let AddressAttribute::Address(IpAddr::V4(ip)) = a {
                        out.push(ip);
                    }
                }
            }
            Ok(out)
        }

        pub async fn add(&self, ip: Ipv4Addr) -> anyhow::Result<()> {
            self.handle
                .address()
                .add(self.index, IpAddr::V4(ip), 32)
                .replace()
                .execute()
                .await
                .with_context(|| format!("adding {ip}/32 to {DEVICE}"))
        }

        pub async fn delete(&self, ip: Ipv4Addr) -> anyhow::Result<()> {
            let mut stream = self
                .handle
                .address()
                .get()
                .set_link_index_filter(self.index)
                .set_address_filter(IpAddr::V4(ip))
                .execute();
            while let Some(msg) = stream.try_next().await? {
                self.handle.address().del(msg).execute().await?;
            }
            Ok(())
        }
    }

    /// The kernel's state as far as we own it: the device's addresses, and
    /// the virtual servers on them or on `node_ips` (NodePorts).
    pub async fn current(
        ipvs: &mut Ipvs,
        dev: &Device,
        node_ips: &[Ipv4Addr],
    ) -> anyhow::Result<IpvsState> {
        let mut state = IpvsState::default();
        state.addresses.extend(dev.addresses().await?);
        for (vs, dests) in ipvs.list()? {
            if state.addresses.contains(&vs.addr) || node_ips.contains(&vs.addr) {
                state.services.insert(vs, dests.into_iter().collect());
            }
        }
        Ok(state)
    }
}

/// The ipvs proxier: the same caches as the iptables one, kernel state out.
pub struct Proxier {
    ports: crate::PortSource,
    node_ips: Vec<Ipv4Addr>,
    ipvs: io::Ipvs,
    device: io::Device,
    /// What the kernel holds as far as we know (None: read it first).
    current: Option<IpvsState>,
}

impl Proxier {
    pub async fn new(ports: crate::PortSource, node_ips: Vec<Ipv4Addr>) -> anyhow::Result<Proxier> {
        Ok(Proxier {
            ports,
            node_ips,
            ipvs: io::Ipvs::open()?,
            device: io::Device::ensure().await?,
            current: None,
        })
    }

    /// One sync: desired → changes against current → netlink. Returns the
    /// number of changes applied.
    pub async fn sync_rules(&mut self) -> anyhow::Result<usize> {
        let current = match self.current.take() {
            Some(c) => c,
            None => io::current(&mut self.ipvs, &self.device, &self.node_ips).await?,
        };
        let desired = desired(&self.ports.ports(), &self.node_ips);
        let todo = changes(&current, &desired);
        for c in &todo {
            match c {
                Change::AddAddress(ip) => self.device.add(*ip).await?,
                Change::DelAddress(ip) => self.device.delete(*ip).await?,
                other => self.ipvs.apply(other)?,
            }
        }
        self.current = Some(desired);
        Ok(todo.len())
    }
}

/// The node's global IPv4 addresses (NodePorts listen on them), except
/// the VIPs on [`DEVICE`].
pub async fn node_addresses() -> anyhow::Result<Vec<Ipv4Addr>> {
    let out = tokio::process::Command::new("ip")
        .args(["-4", "-o", "addr", "show", "scope", "global"])
        .output()
        .await?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.split_whitespace().nth(1) != Some(DEVICE))
        .filter_map(|l| {
            let cidr = l.split_whitespace().skip_while(|w| *w != "inet").nth(1)?;
            cidr.split('/').next()?.parse().ok()
        })
        .collect())
}

/// What ipvs mode needs besides IPVS itself: conntrack for IPVS
/// connections (so they can be masqueraded), and the masquerade rule for
/// off-cluster clients, in KUBE-POSTROUTING (written once; the iptables
/// backend's chains are not used in this mode).
pub async fn prepare(cfg: &crate::proxier::Config) -> anyhow::Result<()> {
    use anyhow::Context;
    std::fs::write("/proc/sys/net/ipv4/vs/conntrack", "1")
        .context("setting net.ipv4.vs.conntrack=1")?;
    let mut rules = format!("*nat\n:{} - [0:0]\n", crate::iptables::POSTROUTING);
    if let Some(cidr) = &cfg.cluster_cidr {
        rules.push_str(&format!(
            "-A {} -m ipvs --vdir ORIGINAL --vmethod MASQ ! -s {cidr} -j MASQUERADE\n",
            crate::iptables::POSTROUTING
        ));
    }
    rules.push_str("COMMIT\n");
    cfg.iptables.restore(&rules).await?;
    cfg.iptables.ensure_postrouting_jump().await
}

/// Keeps IPVS in sync until the process ends.
pub async fn run(
    mut proxier: Proxier,
    wake: std::sync::Arc<tokio::sync::Notify>,
    min_sync: std::time::Duration,
    resync: std::time::Duration,
) {
    tracing::info!("kube-proxy (ipvs) caches synced; applying rules");
    loop {
        if let Err(e) = proxier.sync_rules().await {
            tracing::warn!(error = %format!("{e:#}"), "ipvs sync failed; retrying");
            proxier.current = None;
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            continue;
        }
        if tokio::time::timeout(resync, wake.notified()).await.is_err() {
            proxier.current = None;
        } else {
            tokio::time::sleep(min_sync).await;
        }
    }
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
        }
    }

    fn vs(addr: [u8; 4], port: u16) -> VirtualServer {
        VirtualServer {
            protocol: Protocol::Tcp,
            addr: addr.into(),
            port,
        }
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
