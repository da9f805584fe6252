//! Snapshot to bytes: keeps the tables and each thread's previous sample.

use std::collections::HashMap;
use std::sync::Arc;

use super::*;
use crate::model::{Process, Stack, Target, ThreadIdent};
use crate::recording::limits;

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
    ident: Arc<ThreadIdent>, // the previous sample's, usually the very same Arc
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
    /// What the frame being encoded will cost a reader (`limits`), at most.
    cost: u64,
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
    /// Encodes snapshots; with `key`, from empty tables so the frame stands
    /// alone. Returns the payload and the most memory a reader will charge
    /// for decoding it (`limits`).
    pub fn encode(&mut self, snaps: &[Snapshot], key: bool) -> (Vec<u8>, u64) {
        if key {
            *self = Encoder::default();
        }
        self.cost = 0;
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
        (o.buf, self.cost)
    }

    fn string(&mut self, s: &Arc<str>) -> u32 {
        if let Some(&id) = self.strings.get(s) {
            return id;
        }
        let id = self.strings.len() as u32;
        self.strings.insert(s.clone(), id);
        self.defs.strings.bytes(s.as_bytes());
        self.defs.nstrings += 1;
        self.cost += limits::string_cost(s.len());
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
        self.cost += limits::process_cost();
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
        self.stacks.entry(st.hash).or_default().push((st.clone(), id));
        let d = &mut self.defs;
        d.stacks.buf.extend_from_slice(&st.hash.to_le_bytes());
        d.stacks.uv(st.top as u64);
        d.stacks.uv(ids.len() as u64);
        ids.iter().for_each(|&i| d.stacks.uv(i.into()));
        d.nstacks += 1;
        self.cost += limits::stack_cost(ids.len());
        id
    }

    fn static_ids(&mut self, s: &ThreadIdent) -> StaticIds {
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
            Some(p) => (p.time_ns, Some(p.interval), p.ncpus, Some(p.arch), p.dropped),
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
        self.cost += limits::snapshot_cost(snap.samples.len());
        let mut ptid = 0u32;
        for s in &snap.samples {
            o.iv(i64::from(s.ident.tid) - i64::from(ptid));
            ptid = s.ident.tid;
            self.sample(o, snap.time_ns, s);
        }
        self.snap = Some(header(snap));
    }

    fn sample(&mut self, o: &mut Out, time_ns: u64, s: &ThreadSample) {
        let known = self.threads.get(&s.ident.tid);
        // The tid is the key: the other identity fields are the static ones.
        // Arc equality compares by pointer first, then by value.
        let same_static = known.is_some_and(|t| t.ident == s.ident);
        let p = known.map(|t| t.prev.clone()).unwrap_or_default();
        let mut mask = 0;
        let mut fields = Out::default();
        if !same_static {
            mask |= M_STATIC;
            self.cost += limits::ident_cost();
            let ids = self.static_ids(&s.ident);
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
        let ks = s.kstack.as_ref().map_or(0, |k| u64::from(self.stack(k)) + 1);
        if ks != p.kstack {
            mask |= M_KSTACK;
            fields.uv(ks);
        }
        let us = s.ustack.as_ref().map_or(0, |u| u64::from(self.stack(u)) + 1);
        if us != p.ustack {
            mask |= M_USTACK;
            fields.uv(us);
        }
        if s.target != p.target {
            mask |= M_TARGET;
            // A reader charges each distinct target once; charging every
            // change keeps the estimate above that.
            if s.target.is_some() {
                self.cost += limits::target_cost();
            }
            match s.target.as_deref() {
                None => fields.u8(T_NONE),
                Some(Target::Unresolved) => fields.u8(T_UNRESOLVED),
                Some(Target::File(name)) => {
                    fields.u8(T_FILE);
                    let id = self.string(name);
                    fields.uv(id.into());
                }
                Some(Target::Socket {
                    file,
                    connection,
                    state,
                }) => match (connection, state) {
                    (Some(c), Some(st)) => {
                        fields.u8(T_SOCKET);
                        for s in [file, c, st] {
                            let id = self.string(s);
                            fields.uv(id.into());
                        }
                    }
                    // Both are read together; one without the other is unread.
                    _ => {
                        fields.u8(T_SOCKET_UNREAD);
                        let id = self.string(file);
                        fields.uv(id.into());
                    }
                },
            }
        }
        if s.app != p.app {
            mask |= M_APP;
            if s.app.is_some() {
                self.cost += limits::app_cost();
            }
            match s.app.as_deref() {
                None => fields.u8(A_NONE),
                Some(AppWait::Unread) => fields.u8(A_UNREAD),
                Some(AppWait::Known { class, event, state }) => {
                    fields.u8(A_KNOWN);
                    for s in [class, event, state] {
                        let id = self.string(s);
                        fields.uv(id.into());
                    }
                }
            }
        }
        if s.io != predict_io(&p.io, dt) {
            mask |= M_IO;
            match &s.io {
                IoWait::Untracked => fields.u8(IO_UNTRACKED),
                IoWait::None => fields.u8(IO_NONE),
                IoWait::InFlight(b) => {
                    fields.u8(IO_INFLIGHT);
                    let id = self.string(&b.device);
                    fields.uv(id.into());
                    fields.u8(b.op);
                    fields.uv(b.bytes.into());
                    fields.uv(b.inflight_ns);
                }
            }
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
            ustack: us,
            target: s.target.clone(),
            app: s.app.clone(),
            io: s.io.clone(),
        };
        self.threads.insert(
            s.ident.tid,
            EncThread {
                ident: s.ident.clone(),
                prev,
            },
        );
    }
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
