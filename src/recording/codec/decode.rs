//! Bytes to snapshot: rebuilds the tables and each thread's previous sample.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail};

use super::*;
use crate::model::{PassCost, Process, Stack, ThreadIdent};

struct DecThread {
    ident: Arc<ThreadIdent>,
    prev: Prev,
}

#[derive(Default)]
pub struct Decoder {
    strings: Vec<Arc<str>>,
    processes: Vec<Arc<Process>>,
    stacks: Vec<Arc<Stack>>,
    threads: HashMap<u32, DecThread>,
    snap: Option<Snapshot>,
    /// One Arc per distinct identity, kept across key frames (which redefine
    /// every thread), so a replay holds each identity once and consumers can
    /// compare identities by pointer.
    idents: HashSet<Arc<ThreadIdent>>,
}

impl Decoder {
    /// Starts from empty tables (at a key frame).
    pub fn reset(&mut self) {
        let mut idents = std::mem::take(&mut self.idents);
        *self = Decoder::default();
        // Identities no decoded snapshot holds any more are not worth keeping.
        idents.retain(|i| Arc::strong_count(i) > 1);
        self.idents = idents;
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
        if mask >= M_USTACK << 1 {
            bail!("sample fields {mask:#x} unknown to this format version");
        }
        let known = self.threads.get(&tid).map(|t| (t.ident.clone(), t.prev.clone()));
        let (ident, p) = if mask & M_STATIC != 0 {
            (self.ident(i, tid)?, known.map_or_else(Prev::default, |k| k.1))
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
        let ustack = self.stack_ref(us)?;
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
        })
    }

    /// A thread's static fields, as the Arc already held for an equal identity.
    fn ident(&mut self, i: &mut In, tid: u32) -> Result<Arc<ThreadIdent>> {
        let tgid = i.u32()?;
        let uid = i.u32()?;
        let pidns = i.u32()?;
        let cgroup_id = i.uv()?;
        let kthread = i.u8()? != 0;
        let user = self.str_ref(i)?;
        let comm = self.str_ref(i)?;
        let cgroup = self.str_ref(i)?;
        let pid = i.uv()? as usize;
        let process = self
            .processes
            .get(pid)
            .cloned()
            .ok_or_else(|| anyhow!("process id {pid} not defined"))?;
        let ident = ThreadIdent {
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
        };
        if let Some(known) = self.idents.get(&ident) {
            return Ok(known.clone());
        }
        let ident = Arc::new(ident);
        self.idents.insert(ident.clone());
        Ok(ident)
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
