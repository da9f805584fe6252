//! Bytes to snapshot: rebuilds the tables and each thread's previous sample.
//! Every declared count is checked against the bytes left and `limits`, and
//! every table entry and sample is charged to the reader's `Budget`, before
//! anything is allocated for it.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail};

use super::*;
use crate::model::{AppWait, PassCost, Process, Stack, Target, ThreadIdent};
use crate::recording::limits::{
    app_cost, corrupt, ident_cost, process_cost, snapshot_cost, stack_cost, string_cost, target_cost, Budget,
    MAX_COMM, MAX_NAME, MAX_STACK_FRAMES, MAX_STRING, MAX_THREADS,
};

struct DecThread {
    ident: Arc<ThreadIdent>,
    prev: Prev,
}

/// An interned object's address: interned values are equal exactly when
/// their Arcs are the same, so keys of addresses hash in constant time where
/// hashing the values would hash every command line once per sample.
fn addr<T: ?Sized>(a: &Arc<T>) -> usize {
    Arc::as_ptr(a) as *const u8 as usize
}

type ProcessKey = (u32, usize, usize, usize);
type IdentKey = (u32, u32, u32, u32, u64, bool, [usize; 4]);

#[derive(Default)]
pub struct Decoder {
    strings: Vec<Arc<str>>,
    processes: Vec<Arc<Process>>,
    stacks: Vec<Arc<Stack>>,
    threads: HashMap<u32, DecThread>,
    snap: Option<Snapshot>,
    /// One Arc per distinct string, process and identity, kept across key
    /// frames (which redefine every table), so a replay holds each once and
    /// consumers can compare identities by pointer.
    interned_strings: HashSet<Arc<str>>,
    interned_processes: HashMap<ProcessKey, Arc<Process>>,
    idents: HashMap<IdentKey, Arc<ThreadIdent>>,
    interned_targets: HashSet<Arc<Target>>,
    interned_apps: HashSet<Arc<AppWait>>,
    /// Set for frames whose session was written before user stacks carried
    /// their program's own frame (`Stack::top`, `ustack_app`): those user
    /// stacks come out with it unknown, never with a guess.
    pub without_app_frames: bool,
    /// Those user stacks, by stack id (defined anew at each key frame).
    app_unknown: HashMap<u64, Arc<Stack>>,
}

impl Decoder {
    /// Starts from empty tables (at a key frame).
    pub fn reset(&mut self) {
        let mut idents = std::mem::take(&mut self.idents);
        let mut processes = std::mem::take(&mut self.interned_processes);
        let mut strings = std::mem::take(&mut self.interned_strings);
        let mut targets = std::mem::take(&mut self.interned_targets);
        let mut apps = std::mem::take(&mut self.interned_apps);
        let without_app_frames = self.without_app_frames;
        *self = Decoder::default();
        self.without_app_frames = without_app_frames;
        // What no decoded snapshot holds any more is not worth keeping. In this
        // order, so what a kept identity refers to is kept too (its count is
        // above one), and no key holds the address of something freed.
        idents.retain(|_, i| Arc::strong_count(i) > 1);
        targets.retain(|t| Arc::strong_count(t) > 1);
        apps.retain(|a| Arc::strong_count(a) > 1);
        processes.retain(|_, p| Arc::strong_count(p) > 1);
        strings.retain(|s| Arc::strong_count(s) > 1);
        self.idents = idents;
        self.interned_processes = processes;
        self.interned_strings = strings;
        self.interned_targets = targets;
        self.interned_apps = apps;
    }

    /// Decodes a frame payload, appending its snapshots to `out`.
    pub fn decode(&mut self, payload: &[u8], out: &mut Vec<Snapshot>, budget: &mut Budget) -> Result<()> {
        let mut i = In::new(payload);
        // Each item's smallest encoding bounds its count by the bytes left.
        for _ in 0..i.count_of(1, "strings")? {
            let s = i.str_max(MAX_STRING)?;
            budget.charge(string_cost(s.len()), || "a string".into())?;
            let s = match self.interned_strings.get(s) {
                Some(known) => known.clone(),
                None => {
                    let s: Arc<str> = s.into();
                    self.interned_strings.insert(s.clone());
                    s
                }
            };
            self.strings.push(s);
        }
        for _ in 0..i.count_of(4, "processes")? {
            let tgid = i.u32()?;
            let comm = self.str_ref(&mut i, MAX_COMM)?;
            let exe = self.str_ref(&mut i, MAX_STRING)?;
            let cmdline = self.str_ref(&mut i, MAX_STRING)?;
            let key = (tgid, addr(&comm), addr(&exe), addr(&cmdline));
            let p = match self.interned_processes.get(&key) {
                Some(p) => p.clone(),
                None => {
                    budget.charge(process_cost(), || "a process".into())?;
                    let p = Arc::new(Process {
                        tgid,
                        comm,
                        exe,
                        cmdline,
                    });
                    self.interned_processes.insert(key, p.clone());
                    p
                }
            };
            self.processes.push(p);
        }
        for _ in 0..i.count_of(10, "stacks")? {
            let mut h = [0u8; 8];
            for b in &mut h {
                *b = i.u8()?;
            }
            let top = i.uv()? as usize;
            let n = i.count_of(1, "stack frames")?;
            if n > MAX_STACK_FRAMES {
                return Err(corrupt(format!(
                    "a stack of {n} frames (at most {MAX_STACK_FRAMES})"
                )));
            }
            budget.charge(stack_cost(n), || format!("a stack of {n} frames"))?;
            let frames = (0..n)
                .map(|_| self.str_ref(&mut i, MAX_STRING))
                .collect::<Result<_>>()?;
            self.stacks.push(Arc::new(Stack {
                hash: u64::from_le_bytes(h),
                frames,
                top,
            }));
        }
        for _ in 0..i.count_of(6, "snapshots")? {
            let snap = self.snapshot(&mut i, budget)?;
            out.push(snap);
        }
        if !i.is_empty() {
            bail!("{} unexpected bytes after the snapshots", i.remaining());
        }
        Ok(())
    }

    /// A string by id, of at most `max` bytes for the role it plays.
    fn str_ref(&self, i: &mut In, max: usize) -> Result<Arc<str>> {
        let id = i.uv()?;
        let s = self
            .strings
            .get(id as usize)
            .ok_or_else(|| anyhow!("string id {id} not defined"))?;
        if s.len() > max {
            return Err(corrupt(format!(
                "a {}-byte string where at most {max} are allowed",
                s.len()
            )));
        }
        Ok(s.clone())
    }

    fn snapshot(&mut self, i: &mut In, budget: &mut Budget) -> Result<Snapshot> {
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
        // A sample takes at least two bytes: its tid delta and its mask.
        let n = i.count_of(2, "thread samples")?;
        if n > MAX_THREADS {
            return Err(corrupt(format!(
                "a snapshot of {n} threads (no system has more than {MAX_THREADS})"
            )));
        }
        budget.charge(snapshot_cost(n), || format!("a snapshot of {n} threads"))?;
        let mut samples = Vec::with_capacity(n);
        let mut tid = 0u32;
        for _ in 0..n {
            tid = u32::try_from(i64::from(tid) + i.iv()?).map_err(|_| anyhow!("bad thread id"))?;
            samples.push(self.sample(i, snap.time_ns, tid, budget)?);
        }
        self.snap = Some(header(&snap));
        snap.samples = samples;
        Ok(snap)
    }

    fn sample(&mut self, i: &mut In, time_ns: u64, tid: u32, budget: &mut Budget) -> Result<ThreadSample> {
        let mask = i.uv()?;
        if mask >= M_LAST << 1 {
            bail!("sample fields {mask:#x} unknown to this format version");
        }
        let known = self.threads.get(&tid).map(|t| (t.ident.clone(), t.prev.clone()));
        let (ident, p) = if mask & M_STATIC != 0 {
            (
                self.ident(i, tid, budget)?,
                known.map_or_else(Prev::default, |k| k.1),
            )
        } else {
            known.ok_or_else(|| anyhow!("thread {tid} used before it was defined"))?
        };
        let cpu = if mask & M_CPU != 0 { i.u32()? } else { p.cpu };
        let state = if mask & M_STATE != 0 {
            let k = i.u8()? as usize;
            *State::ALL.get(k).ok_or_else(|| anyhow!("unknown state {k}"))?
        } else {
            p.state
        };
        let syscall = if mask & M_SYSCALL != 0 {
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
            t[k] = if mask & bit != 0 { get_opt(i, pred)? } else { pred };
        }
        let voluntary = if mask & M_VOLUNTARY != 0 {
            match i.u8()? {
                0 => None,
                1 => Some(false),
                _ => Some(true),
            }
        } else {
            p.voluntary
        };
        let waker_tid = if mask & M_WAKER != 0 {
            get_opt(i, None)?
                .map(|w| u32::try_from(w).map_err(|_| anyhow!("bad waker")))
                .transpose()?
        } else {
            p.waker
        };
        let ks = if mask & M_KSTACK != 0 { i.uv()? } else { p.kstack };
        let kstack = self.stack_ref(ks)?;
        let us = if mask & M_USTACK != 0 { i.uv()? } else { p.ustack };
        let ustack = self.ustack_ref(us)?;
        let target = if mask & M_TARGET != 0 {
            self.target(i, budget)?
        } else {
            p.target
        };
        let app = if mask & M_APP != 0 {
            self.app(i, budget)?
        } else {
            p.app
        };
        let io = if mask & M_IO != 0 {
            match i.u8()? {
                IO_UNTRACKED => IoWait::Untracked,
                IO_NONE => IoWait::None,
                IO_INFLIGHT => IoWait::InFlight(BlockIo {
                    device: self.str_ref(i, MAX_NAME)?,
                    op: i.u8()?,
                    bytes: u32::try_from(i.uv()?).map_err(|_| anyhow!("bad block I/O size"))?,
                    inflight_ns: i.uv()?,
                }),
                k => bail!("unknown block I/O kind {k}"),
            }
        } else {
            predict_io(&p.io, dt)
        };
        let syscall = match syscall {
            Syscall::In { nr, args, .. } => Syscall::In {
                nr,
                args,
                ns_so_far: t[3],
                seq: sq,
            },
            other => other,
        };
        let prev = Prev {
            time_ns,
            cpu,
            state,
            syscall,
            times: t,
            seq: sq,
            voluntary,
            waker: waker_tid,
            kstack: ks,
            ustack: us,
            target: target.clone(),
            app: app.clone(),
            io: io.clone(),
        };
        self.threads.insert(
            tid,
            DecThread {
                ident: ident.clone(),
                prev,
            },
        );
        Ok(ThreadSample {
            ident,
            cpu,
            state,
            syscall,
            since_offcpu_ns: t[0],
            since_oncpu_ns: t[1],
            voluntary,
            runq_wait_ns: t[2],
            waker_tid,
            kstack,
            ustack,
            target,
            app,
            io,
        })
    }

    /// An app-wait field, as the Arc already held for an equal one.
    fn app(&mut self, i: &mut In, budget: &mut Budget) -> Result<Option<Arc<AppWait>>> {
        let a = match i.u8()? {
            A_NONE => return Ok(None),
            A_UNREAD => AppWait::Unread,
            A_KNOWN => AppWait::Known {
                class: self.str_ref(i, MAX_NAME)?,
                event: self.str_ref(i, MAX_NAME)?,
                state: self.str_ref(i, MAX_NAME)?,
            },
            k => bail!("unknown app wait kind {k}"),
        };
        if let Some(known) = self.interned_apps.get(&a) {
            return Ok(Some(known.clone()));
        }
        budget.charge(app_cost(), || "a wait state".into())?;
        let a = Arc::new(a);
        self.interned_apps.insert(a.clone());
        Ok(Some(a))
    }

    /// A target field, as the Arc already held for an equal one.
    fn target(&mut self, i: &mut In, budget: &mut Budget) -> Result<Option<Arc<Target>>> {
        let t = match i.u8()? {
            T_NONE => return Ok(None),
            T_UNRESOLVED => Target::Unresolved,
            T_FILE => Target::File(self.str_ref(i, MAX_STRING)?),
            T_SOCKET => Target::Socket {
                file: self.str_ref(i, MAX_STRING)?,
                connection: Some(self.str_ref(i, MAX_STRING)?),
                state: Some(self.str_ref(i, MAX_STRING)?),
            },
            T_SOCKET_UNREAD => Target::Socket {
                file: self.str_ref(i, MAX_STRING)?,
                connection: None,
                state: None,
            },
            k => bail!("unknown target kind {k}"),
        };
        if let Some(known) = self.interned_targets.get(&t) {
            return Ok(Some(known.clone()));
        }
        budget.charge(target_cost(), || "a file name".into())?;
        let t = Arc::new(t);
        self.interned_targets.insert(t.clone());
        Ok(Some(t))
    }

    /// A thread's static fields, as the Arc already held for an equal identity.
    fn ident(&mut self, i: &mut In, tid: u32, budget: &mut Budget) -> Result<Arc<ThreadIdent>> {
        let tgid = i.u32()?;
        let uid = i.u32()?;
        let pidns = i.u32()?;
        let cgroup_id = i.uv()?;
        let kthread = i.u8()? != 0;
        let user = self.str_ref(i, MAX_NAME)?;
        let comm = self.str_ref(i, MAX_COMM)?;
        let cgroup = self.str_ref(i, MAX_STRING)?;
        let pid = i.uv()? as usize;
        let process = self
            .processes
            .get(pid)
            .cloned()
            .ok_or_else(|| anyhow!("process id {pid} not defined"))?;
        let key = (
            tid,
            tgid,
            uid,
            pidns,
            cgroup_id,
            kthread,
            [addr(&user), addr(&comm), addr(&cgroup), addr(&process)],
        );
        if let Some(known) = self.idents.get(&key) {
            return Ok(known.clone());
        }
        budget.charge(ident_cost(), || "a thread".into())?;
        let ident = Arc::new(ThreadIdent {
            tid,
            tgid,
            uid,
            user,
            comm,
            process,
            pidns,
            cgroup_id,
            cgroup,
            kthread,
        });
        self.idents.insert(key, ident.clone());
        Ok(ident)
    }

    /// A user stack: as `stack_ref`, with its program's own frame unknown
    /// where the session did not record it.
    fn ustack_ref(&mut self, v: u64) -> Result<Option<Arc<Stack>>> {
        let Some(s) = self.stack_ref(v)? else {
            return Ok(None);
        };
        if !self.without_app_frames {
            return Ok(Some(s));
        }
        let s = self.app_unknown.entry(v).or_insert_with(|| {
            Arc::new(Stack {
                top: Stack::APP_UNKNOWN,
                ..(*s).clone()
            })
        });
        Ok(Some(s.clone()))
    }

    /// A stack field: 0 for none, else stack id + 1.
    fn stack_ref(&self, v: u64) -> Result<Option<Arc<Stack>>> {
        match v {
            0 => Ok(None),
            k => self
                .stacks
                .get(k as usize - 1)
                .cloned()
                .map(Some)
                .ok_or_else(|| anyhow!("stack id {k} not defined")),
        }
    }
}
