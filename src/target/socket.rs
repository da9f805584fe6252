//! What a socket connects, from the `struct sock_rec` the kernel side puts
//! at the start of a socket's file record (`read_sock` in
//! src/bpf/xtop.bpf.c): the protocol and both ends, as `ss` would name
//! them, and the state of the connection.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::model::printable;

/// sizeof(struct sock_rec), asserted on the kernel side.
pub const REC_LEN: usize = 48;

const AF_UNIX: u16 = 1;
const AF_INET: u16 = 2;
const AF_INET6: u16 = 10;
const AF_NETLINK: u16 = 16;
const AF_PACKET: u16 = 17;
const AF_ALG: u16 = 38;
const AF_VSOCK: u16 = 40;
const AF_XDP: u16 = 44;

const SOCK_STREAM: u16 = 1;
const SOCK_DGRAM: u16 = 2;
const SOCK_RAW: u16 = 3;
const SOCK_SEQPACKET: u16 = 5;

const IPPROTO_TCP: u16 = 6;
const IPPROTO_SCTP: u16 = 132;
const IPPROTO_MPTCP: u16 = 262;

// include/net/tcp_states.h
const TCP_ESTABLISHED: u8 = 1;
const TCP_CLOSE: u8 = 7;
const TCP_LISTEN: u8 = 10;

/// A socket's record, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sock<'a> {
    laddr: [u8; 16],
    raddr: [u8; 16],
    family: u16,
    ty: u16,
    protocol: u16,
    lport: u16,
    rport: u16,
    state: u8,
    /// UNIX: the socket's own sun_path, and its peer's.
    own: &'a [u8],
    peer: &'a [u8],
}

/// Splits a socket's file record into what it connects and the rest (the
/// names of its dentries); None when it is too short to be one.
pub fn parse(rec: &[u8]) -> Option<(Sock<'_>, &[u8])> {
    let head = rec.get(..REC_LEN)?;
    let u16_at = |o: usize| u16::from_ne_bytes([head[o], head[o + 1]]);
    let (own_len, peer_len) = (usize::from(head[43]), usize::from(head[44]));
    let own = rec.get(REC_LEN..REC_LEN + own_len)?;
    let peer = rec.get(REC_LEN + own_len..REC_LEN + own_len + peer_len)?;
    let s = Sock {
        laddr: head[..16].try_into().ok()?,
        raddr: head[16..32].try_into().ok()?,
        family: u16_at(32),
        ty: u16_at(34),
        protocol: u16_at(36),
        lport: u16_at(38),
        rport: u16_at(40),
        state: head[42],
        own,
        peer,
    };
    Some((s, &rec[REC_LEN + own_len + peer_len..]))
}

impl Sock<'_> {
    /// `TCP 10.0.0.5:43210->10.0.0.9:5432`, `UDP [::]:53`,
    /// `UNIX ->/run/postgresql/.s.PGSQL.5432`: the protocol, the local end,
    /// and `->` the remote end once there is one.
    pub fn connection(&self) -> String {
        match self.family {
            AF_INET | AF_INET6 => {
                let local = self.endpoint(&self.laddr, self.lport);
                let unconnected = self.raddr.iter().all(|&b| b == 0) && self.rport == 0;
                if unconnected {
                    format!("{} {local}", self.inet_protocol())
                } else {
                    let remote = self.endpoint(&self.raddr, self.rport);
                    format!("{} {local}->{remote}", self.inet_protocol())
                }
            }
            AF_UNIX => {
                let kind = match self.ty {
                    SOCK_STREAM => "UNIX",
                    SOCK_DGRAM => "UNIX-DGRAM",
                    SOCK_SEQPACKET => "UNIX-SEQPACKET",
                    _ => "UNIX-?",
                };
                // A server's sockets carry the bound path; its clients have
                // none of their own and name the connection by their peer's.
                match (unix_path(self.own), unix_path(self.peer)) {
                    (None, None) => format!("{kind} (unnamed)"),
                    (Some(own), None) => format!("{kind} {own}"),
                    (None, Some(peer)) => format!("{kind} ->{peer}"),
                    (Some(own), Some(peer)) => format!("{kind} {own}->{peer}"),
                }
            }
            AF_NETLINK => match self.protocol {
                0 => "NETLINK route".into(),
                4 => "NETLINK sock_diag".into(),
                9 => "NETLINK audit".into(),
                15 => "NETLINK kobject_uevent".into(),
                16 => "NETLINK generic".into(),
                p => format!("NETLINK {p}"),
            },
            AF_PACKET => "PACKET".into(),
            AF_ALG => "ALG".into(),
            AF_VSOCK => "VSOCK".into(),
            AF_XDP => "XDP".into(),
            f => format!("AF_{f}"),
        }
    }

    fn inet_protocol(&self) -> String {
        match self.protocol {
            IPPROTO_TCP => "TCP".into(),
            17 => "UDP".into(),
            136 => "UDPLITE".into(),
            IPPROTO_SCTP => "SCTP".into(),
            IPPROTO_MPTCP => "MPTCP".into(),
            1 if self.ty == SOCK_DGRAM => "PING".into(),
            58 if self.ty == SOCK_DGRAM => "PING6".into(),
            p if self.ty == SOCK_RAW => format!("RAW:{p}"),
            p => format!("IP:{p}"),
        }
    }

    fn endpoint(&self, addr: &[u8; 16], port: u16) -> String {
        if self.family == AF_INET {
            let a = Ipv4Addr::new(addr[0], addr[1], addr[2], addr[3]);
            format!("{a}:{port}")
        } else {
            format!("[{}]:{port}", Ipv6Addr::from(*addr))
        }
    }

    /// The state of the connection: TCP's own names for connection-oriented
    /// inet protocols; for the others (UDP, UNIX), whether the socket is
    /// connected or listening, as `ss` tells them. Empty for families whose
    /// sockets have no such state.
    pub fn state(&self) -> String {
        let tcp_like = matches!(self.protocol, IPPROTO_TCP | IPPROTO_MPTCP | IPPROTO_SCTP);
        match self.family {
            AF_INET | AF_INET6 if tcp_like => tcp_state(self.state),
            AF_INET | AF_INET6 | AF_UNIX => match self.state {
                TCP_ESTABLISHED => "CONNECTED".into(),
                TCP_CLOSE => "UNCONNECTED".into(),
                TCP_LISTEN => "LISTEN".into(),
                s => tcp_state(s),
            },
            _ => String::new(),
        }
    }
}

fn tcp_state(s: u8) -> String {
    const NAMES: [&str; 13] = [
        "ESTABLISHED",
        "SYN_SENT",
        "SYN_RECV",
        "FIN_WAIT1",
        "FIN_WAIT2",
        "TIME_WAIT",
        "CLOSE",
        "CLOSE_WAIT",
        "LAST_ACK",
        "LISTEN",
        "CLOSING",
        "NEW_SYN_RECV",
        "BOUND_INACTIVE",
    ];
    match s.checked_sub(1).and_then(|i| NAMES.get(usize::from(i))) {
        Some(n) => (*n).into(),
        None => format!("STATE_{s}"),
    }
}

/// A sun_path as `ss` shows it: a path, or `@name` for the abstract
/// namespace (whose NULs are shown as `@` too); None for no address.
fn unix_path(p: &[u8]) -> Option<String> {
    match p.split_first() {
        None => None,
        Some((0, rest)) => {
            let name: Vec<u8> = rest.iter().map(|&b| if b == 0 { b'@' } else { b }).collect();
            Some(format!("@{}", printable(&name)))
        }
        Some(_) => {
            // The length bound may count the path's NUL.
            let end = p.iter().position(|&b| b == 0).unwrap_or(p.len());
            Some(printable(&p[..end]))
        }
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// A record as the kernel side writes it.
    #[allow(clippy::too_many_arguments)]
    pub fn record(
        family: u16,
        ty: u16,
        protocol: u16,
        state: u8,
        (laddr, lport): (&[u8], u16),
        (raddr, rport): (&[u8], u16),
        own: &[u8],
        peer: &[u8],
    ) -> Vec<u8> {
        let mut r = vec![0u8; REC_LEN];
        r[..laddr.len()].copy_from_slice(laddr);
        r[16..16 + raddr.len()].copy_from_slice(raddr);
        for (o, v) in [(32, family), (34, ty), (36, protocol), (38, lport), (40, rport)] {
            r[o..o + 2].copy_from_slice(&v.to_ne_bytes());
        }
        r[42] = state;
        r[43] = own.len() as u8;
        r[44] = peer.len() as u8;
        r.extend_from_slice(own);
        r.extend_from_slice(peer);
        r
    }

    fn conn(rec: &[u8]) -> (String, String) {
        let (s, rest) = parse(rec).unwrap();
        assert!(rest.is_empty());
        (s.connection(), s.state())
    }

    #[test]
    fn inet_ends_and_states() {
        let lo = [127, 0, 0, 1];
        let r = record(AF_INET, SOCK_STREAM, 6, 1, (&lo, 43210), (&lo, 5432), b"", b"");
        assert_eq!(
            conn(&r),
            ("TCP 127.0.0.1:43210->127.0.0.1:5432".into(), "ESTABLISHED".into())
        );
        let r = record(
            AF_INET,
            SOCK_STREAM,
            6,
            10,
            (&[0; 4], 5432),
            (&[0; 4], 0),
            b"",
            b"",
        );
        assert_eq!(conn(&r), ("TCP 0.0.0.0:5432".into(), "LISTEN".into()));
        let mut one = [0u8; 16];
        one[15] = 1;
        let r = record(AF_INET6, SOCK_STREAM, 6, 2, (&one, 40000), (&one, 80), b"", b"");
        assert_eq!(conn(&r), ("TCP [::1]:40000->[::1]:80".into(), "SYN_SENT".into()));
        let mapped = Ipv4Addr::new(10, 0, 0, 7).to_ipv6_mapped().octets();
        let r = record(
            AF_INET6,
            SOCK_DGRAM,
            17,
            7,
            (&mapped, 53),
            (&[0; 16], 0),
            b"",
            b"",
        );
        assert_eq!(
            conn(&r),
            ("UDP [::ffff:10.0.0.7]:53".into(), "UNCONNECTED".into())
        );
        let r = record(AF_INET, SOCK_DGRAM, 17, 1, (&lo, 5000), (&lo, 53), b"", b"");
        assert_eq!(conn(&r).1, "CONNECTED");
        let r = record(AF_INET, SOCK_STREAM, 6, 200, (&lo, 1), (&lo, 2), b"", b"");
        assert_eq!(conn(&r).1, "STATE_200", "an unknown state is shown, not guessed");
    }

    #[test]
    fn unix_names_by_own_or_peer_path() {
        let srv = b"/run/postgresql/.s.PGSQL.5432\0";
        let r = record(AF_UNIX, SOCK_STREAM, 0, 1, (&[], 0), (&[], 0), b"", srv);
        assert_eq!(
            conn(&r),
            ("UNIX ->/run/postgresql/.s.PGSQL.5432".into(), "CONNECTED".into())
        );
        let r = record(AF_UNIX, SOCK_STREAM, 0, 10, (&[], 0), (&[], 0), srv, b"");
        assert_eq!(
            conn(&r),
            ("UNIX /run/postgresql/.s.PGSQL.5432".into(), "LISTEN".into())
        );
        let r = record(AF_UNIX, SOCK_DGRAM, 0, 7, (&[], 0), (&[], 0), b"\0xtop\0x", b"");
        assert_eq!(conn(&r).0, "UNIX-DGRAM @xtop@x");
        let r = record(AF_UNIX, SOCK_STREAM, 0, 1, (&[], 0), (&[], 0), b"", b"");
        assert_eq!(conn(&r).0, "UNIX (unnamed)");
        let r = record(
            AF_UNIX,
            SOCK_STREAM,
            0,
            1,
            (&[], 0),
            (&[], 0),
            b"/tmp/\x1b[2J",
            b"",
        );
        assert_eq!(
            conn(&r).0,
            "UNIX /tmp/\\x1b[2J",
            "no terminal escapes get through"
        );
    }

    #[test]
    fn other_families_have_no_state() {
        let r = record(AF_NETLINK, SOCK_RAW, 0, 0, (&[], 0), (&[], 0), b"", b"");
        assert_eq!(conn(&r), ("NETLINK route".into(), String::new()));
    }

    #[test]
    fn short_records_are_refused() {
        let r = record(AF_UNIX, SOCK_STREAM, 0, 1, (&[], 0), (&[], 0), b"/a", b"/b");
        for n in 0..r.len() {
            assert!(parse(&r[..n]).is_none(), "{n} bytes");
        }
        let mut long = r.clone();
        long.extend_from_slice(b"UNIX\0");
        assert_eq!(parse(&long).unwrap().1, b"UNIX\0");
    }
}
