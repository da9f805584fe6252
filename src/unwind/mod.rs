//! User stacks unwound with call frame information (CFI), so code built
//! without frame pointers — distro C libraries and servers, default-built
//! Rust — still gives a stack that reaches its thread's root.
//!
//! The kernel side copies a window of the thread's user stack (from its stack
//! pointer upward) and its saved registers; the unwinding happens here, with
//! framehop (the unwinder of the samply profiler): per frame it finds the
//! mapping the address is in, that binary's CFI rule for it, and applies the
//! rule to the registers and the window. Code without CFI (JIT code, some
//! hand-written assembly) falls back to the frame-pointer rule.
//!
//! CFI is read once per binary (by build-id) into `CfiTables`, bounded in
//! bytes, and shared by every process mapping that binary.

#[cfg(target_arch = "x86_64")]
pub mod capture;
pub mod cfi;
#[cfg(test)]
mod tests;
pub mod vdso;

use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use framehop::{Error, ExplicitModuleSectionInfo, FrameAddress, Module, Unwinder as _};

use cfi::{Bytes, Cfi, CfiTables};

#[cfg(target_arch = "x86_64")]
mod arch {
    pub use framehop::x86_64::{
        CacheX86_64 as Cache, UnwindRegsX86_64 as UnwindRegs, UnwinderX86_64 as Native,
    };
    pub fn regs(r: &super::Regs) -> UnwindRegs {
        UnwindRegs::new(r.ip, r.sp, r.fp)
    }

    /// Steps over a signal frame: a handler returned into the trampoline with
    /// `sp` at the kernel's `ucontext` (its `pretcode` popped), whose machine
    /// context holds the interrupted code's registers (`struct sigcontext`:
    /// r8..r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip). Returns the
    /// interrupted instruction pointer, or the address that could not be read.
    pub fn sigreturn(
        regs: &mut UnwindRegs,
        read: &mut impl FnMut(u64) -> Result<u64, ()>,
    ) -> Result<u64, u64> {
        const MCONTEXT: u64 = 40; // uc_flags, uc_link, uc_stack
        let [bp, sp, ip] = [10u64, 15, 16].map(|reg| {
            let at = regs.sp().wrapping_add(MCONTEXT + reg * 8);
            read(at).map_err(|_| at)
        });
        let (bp, sp, ip) = (bp?, sp?, ip?);
        regs.set_bp(bp);
        regs.set_sp(sp);
        regs.set_ip(ip);
        Ok(ip)
    }
}
#[cfg(target_arch = "aarch64")]
mod arch {
    pub use framehop::aarch64::{
        CacheAarch64 as Cache, UnwindRegsAarch64 as UnwindRegs, UnwinderAarch64 as Native,
    };
    pub fn regs(r: &super::Regs) -> UnwindRegs {
        UnwindRegs::new(r.lr, r.sp, r.fp)
    }

    /// The aarch64 trampoline lives in the vDSO; its signal frame is not
    /// read yet, so the unwind stops there (as lost).
    pub fn sigreturn(_: &mut UnwindRegs, _: &mut impl FnMut(u64) -> Result<u64, ()>) -> Result<u64, u64> {
        Err(0)
    }
}

/// Frames kept at most (the instruction pointer and return addresses).
pub const MAX_FRAMES: usize = 128;

/// Stands in the unwound addresses for a signal trampoline: the frames above
/// it ran in a signal handler, the ones below were interrupted by the signal.
/// No user address is this high.
pub const SIGNAL_FRAME: u64 = u64::MAX;

/// CFI held for all binaries at most, before the least recently used go.
pub const CFI_BUDGET: usize = 256 << 20;

/// The user registers saved when the thread entered the kernel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Regs {
    pub ip: u64,
    pub sp: u64,
    /// Frame pointer (rbp, x29).
    pub fp: u64,
    /// Link register (aarch64 only).
    pub lr: u64,
}

/// A copy of a thread's user stack, `bytes` from address `start` (its stack
/// pointer) upward.
#[derive(Clone, Copy, Debug)]
pub struct Window<'a> {
    pub start: u64,
    pub bytes: &'a [u8],
    /// The copy reaches the end of the stack's mapping: nothing lies beyond
    /// it, so a read past it is a broken unwind, not a short window.
    pub to_end: bool,
}

/// How an unwind ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum End {
    /// At the thread's root (`_start`, `clone3`...): the stack is whole.
    Root,
    /// The stack goes on past the copied window.
    Window,
    /// `MAX_FRAMES` reached.
    Depth,
    /// No rule led further: no CFI and no frame pointer, or a corrupt stack.
    Lost,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unwound {
    /// Leaf first: the instruction pointer, then return addresses.
    pub addrs: Vec<u64>,
    pub end: End,
    /// Bytes of the window, from its start, that the unwind read: at the root,
    /// how much stack this thread's chain takes (what a window must hold).
    pub reach: u64,
}

impl Unwound {
    /// Whether the stack stops short of its root.
    pub fn truncated(&self) -> bool {
        self.end != End::Root
    }
}

/// One executable file mapping of a process.
#[derive(Clone, Debug)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    /// File offset of `start`.
    pub offset: u64,
    /// The binary's identity (`Binary::key`, `vdso::KEY`): CFI is read once per key.
    pub key: u64,
    pub source: Source,
}

/// Where a mapping's CFI is read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A file: a path, or a `map_files` link.
    File(PathBuf),
    /// The vDSO, read from xtop's own.
    Vdso,
}

impl Source {
    /// The file, if it is one.
    pub fn path(&self) -> Option<&std::path::Path> {
        match self {
            Source::File(path) => Some(path),
            Source::Vdso => None,
        }
    }

    fn read(&self) -> Option<Cfi> {
        match self {
            Source::File(path) => Cfi::read(path),
            Source::Vdso => vdso::own_cfi(),
        }
    }
}

/// The modules of one process: which CFI covers which address.
pub struct ProcessUnwinder {
    native: arch::Native<Bytes>,
    modules: usize,
    /// Where this process has signal trampolines (see `Cfi::sigreturn`).
    sigreturn: Vec<Range<u64>>,
}

impl ProcessUnwinder {
    /// Mappings whose binary has no CFI are left out: their code is walked by
    /// frame pointer.
    pub fn new(mappings: &[Mapping], tables: &mut CfiTables) -> Self {
        let mut native = arch::Native::new();
        let mut modules = 0;
        let mut sigreturn = Vec::new();
        for m in mappings {
            let Some(cfi) = tables.get(m.key, || m.source.read()) else {
                continue;
            };
            let Some(bias) = cfi.bias(m.start, m.offset) else {
                continue;
            };
            native.add_module(module(&cfi, m, bias));
            modules += 1;
            sigreturn.extend(
                cfi.sigreturn
                    .iter()
                    .map(|r| r.start.wrapping_add(bias)..r.end.wrapping_add(bias)),
            );
        }
        ProcessUnwinder {
            native,
            modules,
            sigreturn,
        }
    }

    /// How many mappings have CFI.
    pub fn modules(&self) -> usize {
        self.modules
    }

    fn is_sigreturn(&self, addr: u64) -> bool {
        self.sigreturn.iter().any(|r| r.contains(&addr))
    }
}

fn module(cfi: &Arc<Cfi>, m: &Mapping, bias: u64) -> Module<Bytes> {
    let (eh_frame_svma, eh_frame) = cfi.eh_frame.clone().unzip();
    let (eh_frame_hdr_svma, eh_frame_hdr) = cfi.eh_frame_hdr.clone().unzip();
    let info = ExplicitModuleSectionInfo {
        base_svma: 0,
        text_svma: cfi.text.clone(),
        got_svma: cfi.got.clone(),
        eh_frame_svma,
        eh_frame,
        eh_frame_hdr_svma,
        eh_frame_hdr,
        debug_frame: cfi.debug_frame.clone(),
        ..Default::default()
    };
    let name = m
        .source
        .path()
        .map_or("[vdso]".into(), |p| p.display().to_string());
    Module::new(name, m.start..m.end, bias, info)
}

/// Unwinds stacks of any process; owns the CFI of every binary seen.
pub struct Unwinder {
    pub tables: CfiTables,
    /// Rules already worked out, by address (and module set): one cache serves
    /// every process, as framehop keys it by each unwinder's generation.
    cache: arch::Cache,
}

impl Default for Unwinder {
    fn default() -> Self {
        Self::new()
    }
}

impl Unwinder {
    pub fn new() -> Self {
        Unwinder {
            tables: CfiTables::new(CFI_BUDGET),
            cache: arch::Cache::new(),
        }
    }

    pub fn process(&mut self, mappings: &[Mapping]) -> ProcessUnwinder {
        ProcessUnwinder::new(mappings, &mut self.tables)
    }

    /// The stack of a thread of `proc` stopped at `regs`, read from `window`.
    pub fn unwind(&mut self, proc: &ProcessUnwinder, regs: &Regs, window: Window) -> Unwound {
        let end_of_window = window.start.saturating_add(window.bytes.len() as u64);
        let mut reach = 0usize;
        let mut read = |addr: u64| -> Result<u64, ()> {
            let off = usize::try_from(addr.checked_sub(window.start).ok_or(())?).map_err(|_| ())?;
            let word = window.bytes.get(off..off.checked_add(8).ok_or(())?).ok_or(())?;
            reach = reach.max(off + 8);
            Ok(u64::from_le_bytes(word.try_into().map_err(|_| ())?))
        };
        let mut regs = arch::regs(regs);
        let mut address = FrameAddress::from_instruction_pointer(regs.ip());
        let mut addrs = Vec::with_capacity(32);
        addrs.push(regs.ip());
        // framehop's own iterator, plus signal frames: their CFI is an
        // expression framehop does not evaluate (it would fall back to the
        // frame pointer and end the stack, wrongly, at the trampoline).
        let end = loop {
            if addrs.len() == MAX_FRAMES {
                break End::Depth;
            }
            let next = match address {
                FrameAddress::ReturnAddress(ra) if proc.is_sigreturn(ra.get()) => {
                    match arch::sigreturn(&mut regs, &mut read) {
                        Ok(ip) => {
                            *addrs.last_mut().expect("the leaf is first") = SIGNAL_FRAME;
                            addrs.push(ip);
                            address = FrameAddress::from_instruction_pointer(ip);
                            continue;
                        }
                        Err(at) => Err(Error::CouldNotReadStack(at)),
                    }
                }
                _ => proc
                    .native
                    .unwind_frame(address, &mut regs, &mut self.cache, &mut read),
            };
            match next {
                Ok(Some(ra)) => match FrameAddress::from_return_address(ra) {
                    Some(a) => {
                        addrs.push(ra);
                        address = a;
                    }
                    None => break End::Lost,
                },
                Ok(None) => break End::Root,
                Err(Error::CouldNotReadStack(at))
                    if !window.to_end && at >= window.start && at.saturating_add(8) > end_of_window =>
                {
                    break End::Window
                }
                Err(_) => break End::Lost,
            }
        };
        Unwound {
            addrs,
            end,
            reach: reach as u64,
        }
    }
}
