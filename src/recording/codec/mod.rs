//! Snapshot encoding (format version 6; version 1 lacked user stacks, 2 the
//! syscall's target, 3 its socket's connection, 4 the program's own wait state,
//! 5 the block I/O request waited for). Strings, processes and stacks are
//! defined once per key interval and then referred to by id; each thread's
//! static fields (tgid, user, comm, cgroup, ...) are stored when they change,
//! and its dynamic fields as a bit mask of what differs from a prediction made
//! from the thread's previous sample. A thread blocked in the same place costs
//! a few bytes: its tid delta, a mask, and one clock-skew value.
//!
//! ```text
//! payload  := defs snapcount:v snapshot*
//! defs     := n:v string*  n:v process*  n:v stack*      (ids continue the tables)
//! snapshot := dtime:i flags:v [interval:v] [ncpus:v] [arch:u8] [dropped:v]
//!             walk:v decode:v cpu:v n:v sample*
//! sample   := dtid:i mask:v field*                       (fields in mask bit order)
//! ```

mod decode;
mod encode;

pub use decode::Decoder;
pub use encode::Encoder;

use std::sync::Arc;

use anyhow::Result;

use super::varint::{In, Out};
use crate::model::{AppWait, Arch, BlockIo, IoWait, Snapshot, State, Syscall, Target, ThreadSample};

// Snapshot flags.
const S_INTERVAL: u64 = 1;
const S_NCPUS: u64 = 2;
const S_ARCH: u64 = 4;
const S_DROPPED: u64 = 8;

// Sample mask bits, in field order.
const M_STATIC: u64 = 1 << 0;
const M_CPU: u64 = 1 << 1;
const M_STATE: u64 = 1 << 2;
const M_SYSCALL: u64 = 1 << 3;
const M_SEQ: u64 = 1 << 4;
const M_SKEW: u64 = 1 << 5;
const M_OFFCPU: u64 = 1 << 6;
const M_ONCPU: u64 = 1 << 7;
const M_RUNQ: u64 = 1 << 8;
const M_SCNS: u64 = 1 << 9;
const M_VOLUNTARY: u64 = 1 << 10;
const M_WAKER: u64 = 1 << 11;
const M_KSTACK: u64 = 1 << 12;
/// Since version 2: version-1 writers never set it, so one decoder reads both.
const M_USTACK: u64 = 1 << 13;
/// Since version 3 (likewise): the file the syscall works on.
const M_TARGET: u64 = 1 << 14;
/// Target kinds: `tag [string id]`.
const T_NONE: u8 = 0;
const T_UNRESOLVED: u8 = 1;
const T_FILE: u8 = 2;
/// Since version 4: `tag file-id connection-id state-id`, or `tag file-id`
/// for a socket whose connection could not be read.
const T_SOCKET: u8 = 3;
const T_SOCKET_UNREAD: u8 = 4;
/// Since version 5: the program's own wait state (`AppWait`), as
/// `tag [class-id event-id state-id]`.
const M_APP: u64 = 1 << 15;
const A_NONE: u8 = 0;
const A_UNREAD: u8 = 1;
const A_KNOWN: u8 = 2;
/// Since version 6: the block I/O request waited for (`IoWait`), as
/// `tag [device-id op:u8 bytes:v inflight:v]`; absent, a thread's first
/// sample is untracked (what older recordings are), and later ones continue
/// the previous: the same request, in flight for that much longer.
const M_IO: u64 = 1 << 16;
const IO_UNTRACKED: u8 = 0;
const IO_NONE: u8 = 1;
const IO_INFLIGHT: u8 = 2;
/// The highest mask bit this version writes.
const M_LAST: u64 = M_IO;
/// The four "time since X" fields advance with the clock while nothing happens.
const M_TIMES: [u64; 4] = [M_OFFCPU, M_ONCPU, M_RUNQ, M_SCNS];

/// What a thread looked like in its previous sample, as both sides see it.
#[derive(Clone)]
struct Prev {
    time_ns: u64,
    cpu: u32,
    state: State,
    syscall: Syscall,
    times: [Option<u64>; 4],
    seq: Option<u64>,
    voluntary: Option<bool>,
    waker: Option<u32>,
    kstack: u64, // 0: none, else stack id + 1
    ustack: u64, // same table and encoding as kstack
    target: Option<Arc<Target>>,
    app: Option<Arc<AppWait>>,
    io: IoWait,
}

impl Default for Prev {
    fn default() -> Self {
        Prev {
            time_ns: 0,
            cpu: 0,
            state: State::Run,
            syscall: Syscall::None,
            times: [None; 4],
            seq: None,
            voluntary: None,
            waker: None,
            kstack: 0,
            ustack: 0,
            target: None,
            app: None,
            io: IoWait::Untracked,
        }
    }
}

/// The previous sample's block I/O, `dt` later: the same request, still in flight.
fn predict_io(prev: &IoWait, dt: u64) -> IoWait {
    match prev {
        IoWait::InFlight(b) => IoWait::InFlight(BlockIo {
            inflight_ns: b.inflight_ns.wrapping_add(dt),
            ..b.clone()
        }),
        other => other.clone(),
    }
}

fn times(s: &ThreadSample) -> [Option<u64>; 4] {
    let ns = match s.syscall {
        Syscall::In { ns_so_far, .. } => ns_so_far,
        _ => None,
    };
    [s.since_offcpu_ns, s.since_oncpu_ns, s.runq_wait_ns, ns]
}

fn seq(s: &Syscall) -> Option<u64> {
    match *s {
        Syscall::In { seq, .. } => seq,
        _ => None,
    }
}

/// The syscall without its moving parts (time so far, sequence number).
fn syscall_ident(s: &Syscall) -> Syscall {
    match *s {
        Syscall::In { nr, args, .. } => Syscall::In {
            nr,
            args,
            ns_so_far: None,
            seq: None,
        },
        other => other,
    }
}

fn state_index(s: State) -> u8 {
    State::ALL.iter().position(|&x| x == s).unwrap_or(0) as u8
}

fn arch_code(a: Arch) -> u8 {
    match a {
        Arch::X86_64 => 0,
        Arch::Aarch64 => 1,
    }
}

/// Predicted value of a "time since" field: the old one plus elapsed time and skew.
fn predict(prev: Option<u64>, dt: u64, skew: i64) -> Option<u64> {
    prev.map(|p| p.wrapping_add(dt).wrapping_add(skew as u64))
}

/// Option<u64> as one varint: 0 for None, else 1 + zigzag(v - base).
fn put_opt(o: &mut Out, v: Option<u64>, base: Option<u64>) {
    match v {
        None => o.uv(0),
        Some(v) => {
            let d = v.wrapping_sub(base.unwrap_or(0)) as i64;
            o.uv((((d << 1) ^ (d >> 63)) as u64).wrapping_add(1));
        }
    }
}

fn get_opt(i: &mut In, base: Option<u64>) -> Result<Option<u64>> {
    let v = i.uv()?;
    if v == 0 {
        return Ok(None);
    }
    let z = v - 1;
    let d = (z >> 1) as i64 ^ -((z & 1) as i64);
    Ok(Some(base.unwrap_or(0).wrapping_add(d as u64)))
}

/// A snapshot's header fields without its samples: the base for the next one.
fn header(s: &Snapshot) -> Snapshot {
    Snapshot {
        time_ns: s.time_ns,
        interval: s.interval,
        ncpus: s.ncpus,
        arch: s.arch,
        samples: Vec::new(),
        cost: s.cost,
        dropped: s.dropped,
    }
}
