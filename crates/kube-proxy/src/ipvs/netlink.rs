//! IPVS over generic netlink, encoded and decoded by hand ([`nl`], pinned to
//! the kernel's `include/uapi/linux/ip_vs.h` byte layouts by the tests in
//! `ipvs/mod.rs`), and the sockets and the `kube-ipvs0` device ([`io`]).

/// Generic netlink messages of the IPVS family, encoded and decoded by hand.
pub mod nl {
    use crate::ipvs::{Protocol, RealServer, VirtualServer, SCHEDULER};
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
    /// IP_VS_SVC_F_PERSISTENT: a client's connections go to one destination
    /// for the service's timeout.
    const SVC_F_PERSISTENT: u32 = 0x0001;
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
            // struct ip_vs_flags { flags, mask }: persistence (ClientIP
            // affinity) or nothing; no hashing flags.
            let persistent: u32 = if vs.persistence > 0 {
                SVC_F_PERSISTENT
            } else {
                0
            };
            let mut flags = [0u8; 8];
            flags[..4].copy_from_slice(&persistent.to_ne_bytes());
            flags[4..].copy_from_slice(&u32::MAX.to_ne_bytes());
            put_attr(&mut b, SVC_FLAGS, &flags);
            put_attr(&mut b, SVC_TIMEOUT, &vs.persistence.to_ne_bytes());
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
        let (mut persistent, mut timeout) = (false, 0);
        let u32_at = |v: &[u8]| {
            v.get(..4)
                .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        };
        for (k, v) in attrs(svc) {
            match k {
                SVC_AF => af = u16_at(v),
                SVC_PROTOCOL => proto = u16_at(v).and_then(Protocol::from_number),
                SVC_ADDR => addr = ipv4_at(v),
                SVC_PORT => port = v.get(..2).map(|p| u16::from_be_bytes([p[0], p[1]])),
                SVC_FLAGS => persistent = u32_at(v).is_some_and(|f| f & SVC_F_PERSISTENT != 0),
                SVC_TIMEOUT => timeout = u32_at(v).unwrap_or(0),
                _ => {}
            }
        }
        (af == Some(AF_INET)).then_some(())?;
        Some(VirtualServer {
            protocol: proto?,
            addr: addr?,
            port: port?,
            persistence: if persistent { timeout } else { 0 },
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
    use crate::ipvs::{nl, Change, IpvsState, RealServer, VirtualServer, DEVICE};
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
