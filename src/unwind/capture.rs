//! This thread's own registers and stack, captured as the kernel captures an
//! off-CPU thread's: real stack windows for tests and benchmarks, unwound
//! without BPF.

use super::{Regs, Window};

/// Registers and a copy of the stack above them, as one sample.
#[derive(Clone, Debug)]
pub struct Captured {
    pub regs: Regs,
    pub stack: Vec<u8>,
}

impl Captured {
    /// The first `len` bytes of the copy, as a window.
    pub fn window(&self, len: usize) -> Window<'_> {
        Window {
            start: self.regs.sp,
            bytes: &self.stack[..len.min(self.stack.len())],
            to_end: len >= self.stack.len(),
        }
    }
}

/// The end of the mapping holding `addr` (the top of a stack).
fn mapping_end(addr: u64) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/maps").ok()?;
    text.lines()
        .filter_map(|l| {
            let (a, b) = l.split_whitespace().next()?.split_once('-')?;
            Some((u64::from_str_radix(a, 16).ok()?, u64::from_str_radix(b, 16).ok()?))
        })
        .find(|&(a, b)| a <= addr && addr < b)
        .map(|(_, b)| b)
}

/// The caller's stack as seen from inside this function: its registers and
/// everything from its stack pointer to the top of the stack's mapping.
#[cfg(target_arch = "x86_64")]
#[inline(never)]
pub fn capture() -> Captured {
    let (ip, sp, fp): (u64, u64, u64);
    // SAFETY: reads three registers; nothing is written but the outputs.
    unsafe {
        std::arch::asm!(
            "lea {ip}, [rip]",
            "mov {sp}, rsp",
            "mov {fp}, rbp",
            ip = out(reg) ip,
            sp = out(reg) sp,
            fp = out(reg) fp,
            options(nomem, nostack, preserves_flags),
        );
    }
    // Everything from sp up is the callers' frames, which stay put while this
    // function runs (its own calls grow the stack below sp).
    let len = mapping_end(sp).map_or(0, |end| end - sp) as usize;
    // SAFETY: [sp, end of its mapping) is this thread's mapped, live stack.
    let stack = unsafe { std::slice::from_raw_parts(sp as *const u8, len) }.to_vec();
    Captured {
        regs: Regs { ip, sp, fp, lr: 0 },
        stack,
    }
}
