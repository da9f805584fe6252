//! Snapshot encoding (format version 1). Strings, processes and stacks are
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

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};

use super::varint::{In, Out};
use crate::model::{Arch, PassCost, Process, Snapshot, Stack, State, Syscall, ThreadSample};

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
const M_WAKEUP: u64 = 1 << 8;
const M_SCNS: u64 = 1 << 9;
const M_VOLUNTARY: u64 = 1 << 10;
const M_WAKER: u64 = 1 << 11;
const M_KSTACK: u64 = 1 << 12;
/// The four "time since X" fields advance with the clock while nothing happens.
const M_TIMES: [u64; 4] = [M_OFFCPU, M_ONCPU, M_WAKEUP, M_SCNS];

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
        }
    }
}

fn times(s: &ThreadSample) -> [Option<u64>; 4] {
    let ns = match s.syscall {
        Syscall::In { ns_so_far, .. } => ns_so_far,
        _ => None,
    };
    [s.since_offcpu_ns, s.since_oncpu_ns, s.since_wakeup_ns, ns]
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

/// Static per-thread fields as ids, compared to detect a change.
#[derive(Clone, PartialEq)]
struct StaticIds {
    tgid: u32,
    uid: u32,
    pidns: u32,
    cgroup_id: u64,
    kthread: bool,
    user: u32,
    comm: u32,
    cgroup: u32,
    process: u32,
}

struct EncThread {
    sample: ThreadSample, // the previous sample, for cheap Arc-equality checks of static fields
    prev: Prev,
}

#[derive(Default)]
pub struct Encoder {
    strings: HashMap<Arc<str>, u32>,
    processes: HashMap<(u32, u32, u32, u32), u32>,
    stacks: HashMap<u64, Vec<(Arc<Stack>, u32)>>,
    nstacks: u32,
    threads: HashMap<u32, EncThread>,
    snap: Option<Snapshot>, // previous snapshot header (samples emptied)
    defs: Defs,
}

#[derive(Default)]
struct Defs {
    strings: Out,
    nstrings: u64,
    processes: Out,
    nprocesses: u64,
    stacks: Out,
    nstacks: u64,
}

impl Encoder {
    /// Encodes snapshots; with `key`, from empty tables so the frame stands alone.
    pub fn encode(&mut self, snaps: &[Snapshot], key: bool) -> Vec<u8> {
        if key {
            *self = Encoder::default();
        }
        let mut body = Out::default();
        body.uv(snaps.len() as u64);
        for snap in snaps {
            self.snapshot(&mut body, snap);
        }
        let d = std::mem::take(&mut self.defs);
        let mut o = Out::default();
        for (n, part) in [
            (d.nstrings, d.strings),
            (d.nprocesses, d.processes),
            (d.nstacks, d.stacks),
        ] {
            o.uv(n);
            o.buf.extend_from_slice(&part.buf);
        }
        o.buf.extend_from_slice(&body.buf);
        o.buf
    }

    fn string(&mut self, s: &Arc<str>) -> u32 {
        if let Some(&id) = self.strings.get(s) {
            return id;
        }
        let id = self.strings.len() as u32;
        self.strings.insert(s.clone(), id);
        self.defs.strings.bytes(s.as_bytes());
        self.defs.nstrings += 1;
        id
    }

    fn process(&mut self, p: &Process) -> u32 {
        let key = (
            p.tgid,
            self.string(&p.comm),
            self.string(&p.exe),
            self.string(&p.cmdline),
        );
        if let Some(&id) = self.processes.get(&key) {
            return id;
        }
        let id = self.processes.len() as u32;
        self.processes.insert(key, id);
        let d = &mut self.defs;
        [key.0, key.1, key.2, key.3]
            .iter()
            .for_each(|&v| d.processes.uv(v.into()));
        d.nprocesses += 1;
        id
    }

    fn stack(&mut self, st: &Arc<Stack>) -> u32 {
        if let Some(v) = self.stacks.get(&st.hash) {
            if let Some((_, id)) = v.iter().find(|(s, _)| Arc::ptr_eq(s, st) || **s == **st) {
                return *id;
            }
        }
        let ids: Vec<u32> = st.frames.iter().map(|f| self.string(f)).collect();
        let id = self.nstacks;
        self.nstacks += 1;
        self.stacks
            .entry(st.hash)
            .or_default()
            .push((st.clone(), id));
        let d = &mut self.defs;
        d.stacks.buf.extend_from_slice(&st.hash.to_le_bytes());
        d.stacks.uv(st.top as u64);
        d.stacks.uv(ids.len() as u64);
        ids.iter().for_each(|&i| d.stacks.uv(i.into()));
        d.nstacks += 1;
        id
    }

    fn static_ids(&mut self, s: &ThreadSample) -> StaticIds {
        StaticIds {
            tgid: s.tgid,
            uid: s.uid,
            pidns: s.pidns,
            cgroup_id: s.cgroup_id,
            kthread: s.kthread,
            user: self.string(&s.user),
            comm: self.string(&s.comm),
            cgroup: self.string(&s.cgroup),
            process: self.process(&s.process),
        }
    }

    fn snapshot(&mut self, o: &mut Out, snap: &Snapshot) {
        let prev = self.snap.take();
        let (ptime, pint, pcpus, parch, pdrop) = match &prev {
            Some(p) => (
                p.time_ns,
                Some(p.interval),
                p.ncpus,
                Some(p.arch),
                p.dropped,
            ),
            None => (0, None, 0, None, 0),
        };
        o.iv(snap.time_ns.wrapping_sub(ptime) as i64);
        let mut flags = 0;
        flags |= if pint != Some(snap.interval) {
            S_INTERVAL
        } else {
            0
        };
        flags |= if pcpus != snap.ncpus { S_NCPUS } else { 0 };
        flags |= if parch != Some(snap.arch) { S_ARCH } else { 0 };
        flags |= if pdrop != snap.dropped { S_DROPPED } else { 0 };
        o.uv(flags);
        if flags & S_INTERVAL != 0 {
            o.uv(snap.interval.as_nanos() as u64);
        }
        if flags & S_NCPUS != 0 {
            o.uv(snap.ncpus.into());
        }
        if flags & S_ARCH != 0 {
            o.u8(arch_code(snap.arch));
        }
        if flags & S_DROPPED != 0 {
            o.uv(snap.dropped);
        }
        o.uv(snap.cost.walk_ns);
        o.uv(snap.cost.decode_ns);
        o.uv(snap.cost.cpu_ns);
        o.uv(snap.samples.len() as u64);
        let mut ptid = 0u32;
        for s in &snap.samples {
            o.iv(i64::from(s.tid) - i64::from(ptid));
            ptid = s.tid;
            self.sample(o, snap.time_ns, s);
        }
        self.snap = Some(header(snap));
    }

    fn sample(&mut self, o: &mut Out, time_ns: u64, s: &ThreadSample) {
        let known = self.threads.get(&s.tid);
        let same_static = known.is_some_and(|t| same_static(&t.sample, s));
        let p = known.map(|t| t.prev.clone()).unwrap_or_default();
        let mut mask = 0;
        let mut fields = Out::default();
        if !same_static {
            mask |= M_STATIC;
            let ids = self.static_ids(s);
            let f = &mut fields;
            [ids.tgid, ids.uid, ids.pidns]
                .iter()
                .for_each(|&v| f.uv(v.into()));
            f.uv(ids.cgroup_id);
            f.u8(ids.kthread.into());
            [ids.user, ids.comm, ids.cgroup, ids.process]
                .iter()
                .for_each(|&v| f.uv(v.into()));
        }
        if s.cpu != p.cpu {
            mask |= M_CPU;
            fields.uv(s.cpu.into());
        }
        if s.state != p.state {
            mask |= M_STATE;
            fields.u8(state_index(s.state));
        }
        let ident = syscall_ident(&s.syscall);
        if ident != syscall_ident(&p.syscall) {
            mask |= M_SYSCALL;
            match ident {
                Syscall::None => fields.u8(0),
                Syscall::Unknown => fields.u8(1),
                Syscall::In { nr, args, .. } => {
                    fields.u8(2);
                    fields.uv(nr.into());
                    args.iter().for_each(|&a| fields.uv(a));
                }
            }
        }
        let sq = seq(&s.syscall);
        if sq != p.seq {
            mask |= M_SEQ;
            put_opt(&mut fields, sq, p.seq);
        }
        let dt = time_ns.wrapping_sub(p.time_ns);
        let cur = times(s);
        let skew = common_skew(&cur, &p.times, dt);
        if skew != 0 {
            mask |= M_SKEW;
            fields.iv(skew);
        }
        for (k, bit) in M_TIMES.iter().enumerate() {
            let pred = predict(p.times[k], dt, skew);
            if cur[k] != pred {
                mask |= bit;
                put_opt(&mut fields, cur[k], pred);
            }
        }
        if s.voluntary != p.voluntary {
            mask |= M_VOLUNTARY;
            fields.u8(match s.voluntary {
                None => 0,
                Some(false) => 1,
                Some(true) => 2,
            });
        }
        if s.waker_tid != p.waker {
            mask |= M_WAKER;
            put_opt(&mut fields, s.waker_tid.map(u64::from), None);
        }
        let ks = s
            .kstack
            .as_ref()
            .map_or(0, |k| u64::from(self.stack(k)) + 1);
        if ks != p.kstack {
            mask |= M_KSTACK;
            fields.uv(ks);
        }
        o.uv(mask);
        o.buf.extend_from_slice(&fields.buf);
        let prev = Prev {
            time_ns,
            cpu: s.cpu,
            state: s.state,
            syscall: s.syscall,
            times: cur,
            seq: sq,
            voluntary: s.voluntary,
            waker: s.waker_tid,
            kstack: ks,
        };
        self.threads.insert(
            s.tid,
            EncThread {
                sample: s.clone(),
                prev,
            },
        );
    }
}

fn same_static(a: &ThreadSample, b: &ThreadSample) -> bool {
    a.tgid == b.tgid
        && a.uid == b.uid
        && a.pidns == b.pidns
        && a.cgroup_id == b.cgroup_id
        && a.kthread == b.kthread
        && a.user == b.user
        && a.comm == b.comm
        && a.cgroup == b.cgroup
        && a.process == b.process
}

/// The per-thread clock skew of this pass: the most common deviation of the
/// time fields from "previous + elapsed". Fields that had no event share it.
fn common_skew(cur: &[Option<u64>; 4], prev: &[Option<u64>; 4], dt: u64) -> i64 {
    let devs: Vec<i64> = (0..4)
        .filter_map(|k| Some(cur[k]?.wrapping_sub(prev[k]?).wrapping_sub(dt) as i64))
        .collect();
    devs.iter()
        .copied()
        .max_by_key(|d| {
            (
                devs.iter().filter(|x| *x == d).count(),
                std::cmp::Reverse(d.unsigned_abs()),
            )
        })
        .unwrap_or(0)
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

struct DecThread {
    sample: ThreadSample,
    prev: Prev,
}

#[derive(Default)]
pub struct Decoder {
    strings: Vec<Arc<str>>,
    processes: Vec<Arc<Process>>,
    stacks: Vec<Arc<Stack>>,
    threads: HashMap<u32, DecThread>,
    snap: Option<Snapshot>,
}

impl Decoder {
    pub fn reset(&mut self) {
        *self = Decoder::default();
    }

    /// Decodes a frame payload, appending its snapshots to `out`.
    pub fn decode(&mut self, payload: &[u8], out: &mut Vec<Snapshot>) -> Result<()> {
        let mut i = In::new(payload);
        for _ in 0..i.count()? {
            let s: Arc<str> = i.str()?.into();
            self.strings.push(s);
        }
        for _ in 0..i.count()? {
            let tgid = i.u32()?;
            let comm = self.str_ref(&mut i)?;
            let exe = self.str_ref(&mut i)?;
            let cmdline = self.str_ref(&mut i)?;
            self.processes.push(Arc::new(Process {
                tgid,
                comm,
                exe,
                cmdline,
            }));
        }
        for _ in 0..i.count()? {
            let mut h = [0u8; 8];
            for b in &mut h {
                *b = i.u8()?;
            }
            let top = i.uv()? as usize;
            let frames = (0..i.count()?)
                .map(|_| self.str_ref(&mut i))
                .collect::<Result<_>>()?;
            self.stacks.push(Arc::new(Stack {
                hash: u64::from_le_bytes(h),
                frames,
                top,
            }));
        }
        for _ in 0..i.count()? {
            let snap = self.snapshot(&mut i)?;
            out.push(snap);
        }
        if !i.is_empty() {
            bail!("{} unexpected bytes after the snapshots", i.remaining());
        }
        Ok(())
    }

    fn str_ref(&self, i: &mut In) -> Result<Arc<str>> {
        let id = i.uv()?;
        self.strings
            .get(id as usize)
            .cloned()
            .ok_or_else(|| anyhow!("string id {id} not defined"))
    }

    fn snapshot(&mut self, i: &mut In) -> Result<Snapshot> {
        let mut snap = match self.snap.take() {
            Some(p) => p,
            None => Snapshot {
                time_ns: 0,
                interval: Duration::ZERO,
                ncpus: 0,
                arch: Arch::X86_64,
                samples: Vec::new(),
                cost: PassCost::default(),
                dropped: 0,
            },
        };
        snap.time_ns = snap.time_ns.wrapping_add(i.iv()? as u64);
        let flags = i.uv()?;
        if flags & S_INTERVAL != 0 {
            snap.interval = Duration::from_nanos(i.uv()?);
        }
        if flags & S_NCPUS != 0 {
            snap.ncpus = i.u32()?;
        }
        if flags & S_ARCH != 0 {
            snap.arch = match i.u8()? {
                0 => Arch::X86_64,
                1 => Arch::Aarch64,
                a => bail!("unknown architecture code {a}"),
            };
        }
        if flags & S_DROPPED != 0 {
            snap.dropped = i.uv()?;
        }
        snap.cost = PassCost {
            walk_ns: i.uv()?,
            decode_ns: i.uv()?,
            cpu_ns: i.uv()?,
        };
        let n = i.count()?;
        let mut samples = Vec::with_capacity(n);
        let mut tid = 0u32;
        for _ in 0..n {
            tid = u32::try_from(i64::from(tid) + i.iv()?).map_err(|_| anyhow!("bad thread id"))?;
            samples.push(self.sample(i, snap.time_ns, tid)?);
        }
        self.snap = Some(header(&snap));
        snap.samples = samples;
        Ok(snap)
    }

    fn sample(&mut self, i: &mut In, time_ns: u64, tid: u32) -> Result<ThreadSample> {
        let mask = i.uv()?;
        let (mut s, p) = match self.threads.get(&tid) {
            Some(t) => (t.sample.clone(), t.prev.clone()),
            None if mask & M_STATIC != 0 => (self.blank(tid), Prev::default()),
            None => bail!("thread {tid} used before it was defined"),
        };
        if mask & M_STATIC != 0 {
            s.tgid = i.u32()?;
            s.uid = i.u32()?;
            s.pidns = i.u32()?;
            s.cgroup_id = i.uv()?;
            s.kthread = i.u8()? != 0;
            s.user = self.str_ref(i)?;
            s.comm = self.str_ref(i)?;
            s.cgroup = self.str_ref(i)?;
            let pid = i.uv()? as usize;
            s.process = self
                .processes
                .get(pid)
                .cloned()
                .ok_or_else(|| anyhow!("process id {pid} not defined"))?;
        }
        s.cpu = if mask & M_CPU != 0 { i.u32()? } else { p.cpu };
        s.state = if mask & M_STATE != 0 {
            let k = i.u8()? as usize;
            *State::ALL
                .get(k)
                .ok_or_else(|| anyhow!("unknown state {k}"))?
        } else {
            p.state
        };
        let ident = if mask & M_SYSCALL != 0 {
            match i.u8()? {
                0 => Syscall::None,
                1 => Syscall::Unknown,
                2 => {
                    let nr = i.u32()?;
                    let mut args = [0u64; 6];
                    for a in &mut args {
                        *a = i.uv()?;
                    }
                    Syscall::In {
                        nr,
                        args,
                        ns_so_far: None,
                        seq: None,
                    }
                }
                k => bail!("unknown syscall kind {k}"),
            }
        } else {
            syscall_ident(&p.syscall)
        };
        let sq = if mask & M_SEQ != 0 {
            get_opt(i, p.seq)?
        } else {
            p.seq
        };
        let skew = if mask & M_SKEW != 0 { i.iv()? } else { 0 };
        let dt = time_ns.wrapping_sub(p.time_ns);
        let mut t = [None; 4];
        for (k, bit) in M_TIMES.iter().enumerate() {
            let pred = predict(p.times[k], dt, skew);
            t[k] = if mask & bit != 0 {
                get_opt(i, pred)?
            } else {
                pred
            };
        }
        s.voluntary = if mask & M_VOLUNTARY != 0 {
            match i.u8()? {
                0 => None,
                1 => Some(false),
                _ => Some(true),
            }
        } else {
            p.voluntary
        };
        s.waker_tid = if mask & M_WAKER != 0 {
            get_opt(i, None)?
                .map(|w| u32::try_from(w).map_err(|_| anyhow!("bad waker")))
                .transpose()?
        } else {
            p.waker
        };
        let ks = if mask & M_KSTACK != 0 {
            i.uv()?
        } else {
            p.kstack
        };
        s.kstack = match ks {
            0 => None,
            k => Some(
                self.stacks
                    .get(k as usize - 1)
                    .cloned()
                    .ok_or_else(|| anyhow!("stack id {k} not defined"))?,
            ),
        };
        s.syscall = match ident {
            Syscall::In { nr, args, .. } => Syscall::In {
                nr,
                args,
                ns_so_far: t[3],
                seq: sq,
            },
            other => other,
        };
        [s.since_offcpu_ns, s.since_oncpu_ns, s.since_wakeup_ns] = [t[0], t[1], t[2]];
        let prev = Prev {
            time_ns,
            cpu: s.cpu,
            state: s.state,
            syscall: s.syscall,
            times: t,
            seq: sq,
            voluntary: s.voluntary,
            waker: s.waker_tid,
            kstack: ks,
        };
        self.threads.insert(
            tid,
            DecThread {
                sample: s.clone(),
                prev,
            },
        );
        Ok(s)
    }

    fn blank(&self, tid: u32) -> ThreadSample {
        let empty: Arc<str> = "".into();
        ThreadSample {
            tid,
            tgid: 0,
            uid: 0,
            user: empty.clone(),
            comm: empty.clone(),
            process: Arc::new(Process {
                tgid: 0,
                comm: empty.clone(),
                exe: empty.clone(),
                cmdline: empty.clone(),
            }),
            pidns: 0,
            cgroup_id: 0,
            cgroup: empty,
            cpu: 0,
            kthread: false,
            state: State::Run,
            syscall: Syscall::None,
            since_offcpu_ns: None,
            since_oncpu_ns: None,
            voluntary: None,
            since_wakeup_ns: None,
            waker_tid: None,
            kstack: None,
        }
    }
}
