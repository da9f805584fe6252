//! User stack symbolization. Addresses are normalized while the process lives
//! (binary + file offset, from maps captured per process and kept after it
//! exits), then named per (binary, offset) from the files themselves: a
//! process that exited before its stack was seen still resolves, libc is
//! parsed once for all processes, and a stack's hash is the same in every
//! process running the same code, whatever the address layout.

use std::sync::Arc;

use super::binary::Binaries;
use super::cache::Bounded;
use super::names::Names;
use super::plumbing;
use super::process::{Loc, Process};
use super::{stack_hash, MAX_CACHED};
use crate::model::{Stack, DEEPER, TRUNCATED};
use crate::unwind::{End, Regs, Unwinder, Window, SIGNAL_FRAME};

/// Processes whose maps are kept, alive or exited.
const MAX_PROCESSES: usize = 4096;

pub struct UserSymbols {
    procs: Bounded<(u32, u64), Process>,
    binaries: Binaries,
    names: Names,
    /// By (pid, start_ns, hash of the raw addresses, how the unwind ended).
    stacks: Bounded<(u32, u64, u64, End), Arc<Stack>>,
    /// By `Stack::hash`: processes with the same stack share one `Stack`.
    by_hash: Bounded<u64, Arc<Stack>>,
    /// CFI of every binary seen, for stacks that come as windows.
    unwinder: Unwinder,
    /// Counts sampling passes: a process's maps are checked once per pass.
    pass: u64,
}

impl UserSymbols {
    pub fn new() -> Self {
        UserSymbols {
            procs: Bounded::new(MAX_PROCESSES),
            binaries: Binaries::new(),
            names: Names::new(),
            stacks: Bounded::new(MAX_CACHED),
            by_hash: Bounded::new(MAX_CACHED),
            unwinder: Unwinder::new(),
            pass: 1,
        }
    }

    /// Starts a sampling pass: every stack of one pass sees one moment, so a
    /// process's maps (an exec, a dlopen) need only be checked once per pass.
    pub fn begin_pass(&mut self) {
        self.pass += 1;
    }

    /// The symbolized stack of a thread of process `pid` whose registers and
    /// stack window were copied: unwound with CFI, then named as `stack` does.
    pub fn unwound(&mut self, pid: u32, start_ns: u64, regs: &Regs, window: Window) -> Arc<Stack> {
        let p = process(&mut self.procs, &mut self.binaries, pid, start_ns);
        let u = p.unwind(&mut self.binaries, &mut self.unwinder, regs, window, self.pass);
        self.stack(pid, start_ns, &u.addrs, u.end)
    }

    /// The symbolized user stack of process `pid` (started at `start_ns`, which
    /// tells a reused pid apart). `addrs` are leaf first: the instruction
    /// pointer, then return addresses (or `SIGNAL_FRAME`). `end`: how the
    /// unwind ended.
    pub fn stack(&mut self, pid: u32, start_ns: u64, addrs: &[u64], end: End) -> Arc<Stack> {
        let key = (pid, start_ns, raw_hash(addrs), end);
        if let Some(s) = self.stacks.get(&key) {
            return s;
        }
        let locs = self.normalize(pid, start_ns, addrs);
        let end = honest_end(end, &locs);
        let hash = identity(pid, start_ns, &locs, end);
        let stack = match self.by_hash.get(&hash) {
            Some(s) => s,
            None => {
                let mut frames: Vec<Arc<str>> = Vec::with_capacity(locs.len() + 1);
                // The program's own innermost frame (ustack_app); if every
                // frame is plumbing, the marker of a cut-short stack (the
                // app frame is then unknown) or past the end (there is none).
                let mut top = None;
                for (loc, names) in locs.iter().zip(self.names.frames(&locs)) {
                    for name in names.iter() {
                        if top.is_none() && !plumbing::is_plumbing(loc, name) {
                            top = Some(frames.len());
                        }
                        frames.push(name.clone());
                    }
                }
                let top = top.unwrap_or(frames.len());
                match end {
                    End::Root => {}
                    End::Lost => frames.push(TRUNCATED.into()),
                    End::Window | End::Depth => frames.push(DEEPER.into()),
                }
                let s = Arc::new(Stack { hash, frames, top });
                self.by_hash.insert(hash, s.clone());
                s
            }
        };
        self.stacks.insert(key, stack.clone());
        stack
    }

    /// The executable file mappings of process `pid` (started at `start_ns`),
    /// read now if it was never seen: what the unwinder needs of it.
    pub fn unwind_mappings(&mut self, pid: u32, start_ns: u64) -> Vec<crate::unwind::Mapping> {
        process(&mut self.procs, &mut self.binaries, pid, start_ns).unwind_mappings()
    }

    /// Each address's location. Return addresses are looked up one byte back,
    /// inside the call: a call ending a function must not name the next one.
    fn normalize(&mut self, pid: u32, start_ns: u64, addrs: &[u64]) -> Vec<Loc> {
        let (binaries, pass) = (&mut self.binaries, self.pass);
        let proc = process(&mut self.procs, binaries, pid, start_ns);
        proc.begin_use(binaries, pass);
        let lookup = |i: usize, a: u64| if i == 0 { a } else { a.saturating_sub(1) };
        addrs
            .iter()
            .enumerate()
            .map(|(i, &a)| {
                if a == SIGNAL_FRAME {
                    return Loc::Signal;
                }
                let a = lookup(i, a);
                proc.locate(a)
                    .or_else(|| {
                        proc.reread_for_unmapped(binaries, pass)
                            .then(|| proc.locate(a))
                            .flatten()
                    })
                    .unwrap_or(Loc::Unmapped(a))
            })
            .collect()
    }
}

/// How the unwind really ended. Threads start in a file's code (`_start`,
/// the C library's thread start, `clone3`) and call on from there, so a walk
/// that ran out of frames anywhere else did not find a root: it stopped in
/// code it knew nothing about (JIT code without frame pointers, whose zero or
/// stray frame pointer reads as the end of the chain) or at an address mapped
/// nowhere. Nor did one that ran out at the leaf: a frame-pointer walk from
/// code that keeps no frame pointer, where the register happens to hold 0
/// (only a thread's first instructions have no caller, and nothing is lost
/// by calling those few samples short). Both sources of user stacks, the CFI
/// unwinder and the kernel's frame-pointer walk, pass through here.
fn honest_end(end: End, locs: &[Loc]) -> End {
    match (end, locs) {
        (End::Root, [_]) => End::Lost,
        (End::Root, [.., Loc::Jit(..) | Loc::Unmapped(_) | Loc::Vdso(_) | Loc::Signal]) => End::Lost,
        (end, _) => end,
    }
}

/// Process `pid` (started at `start_ns`), its maps read the first time it is asked for.
fn process<'a>(
    procs: &'a mut Bounded<(u32, u64), Process>,
    binaries: &mut Binaries,
    pid: u32,
    start_ns: u64,
) -> &'a mut Process {
    if procs.get_mut(&(pid, start_ns)).is_none() {
        procs.insert((pid, start_ns), Process::new(pid, binaries));
    }
    procs.get_mut(&(pid, start_ns)).expect("inserted just above")
}

/// Key of raw addresses (the cached path): mixed a word at a time, eight times
/// fewer multiplies than the byte-wise `stack_hash`.
fn raw_hash(addrs: &[u64]) -> u64 {
    let mut h = addrs.len() as u64;
    for &a in addrs {
        h = (h ^ a).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        h ^= h >> 32;
    }
    h
}

/// A stack's identity: what code it is, not where it was mapped. JIT and
/// unmapped addresses only mean something within their process.
fn identity(pid: u32, start_ns: u64, locs: &[Loc], end: End) -> u64 {
    let mut words = Vec::with_capacity(locs.len() * 3 + 1);
    for loc in locs {
        match loc {
            Loc::File { bin, offset, .. } => words.extend([1, bin.key, *offset]),
            Loc::Vdso(off) => words.extend([2, *off]),
            Loc::Jit(addr, _) => words.extend([3, u64::from(pid), start_ns, *addr]),
            Loc::Unmapped(addr) => words.extend([4, u64::from(pid), start_ns, *addr]),
            Loc::Signal => words.push(8),
        }
    }
    // Whole and truncated stacks keep the identities they had before `DEEPER`.
    words.push(match end {
        End::Root => 5,
        End::Lost => 6,
        End::Window | End::Depth => 7,
    });
    stack_hash(&words)
}

impl Default for UserSymbols {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
#[path = "user_tests.rs"]
mod tests;
