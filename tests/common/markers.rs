//! Workload functions with distinctive, unmangled names that end-to-end tests
//! look for in user stacks. They issue their blocking syscalls with inline
//! `syscall` instructions: glibc has no frame pointers, so a thread blocked
//! inside a libc wrapper would lose its caller in a frame-pointer walk.

use std::sync::atomic::{AtomicBool, Ordering};

/// Spins until `stop`: the instruction pointer stays in this function.
#[inline(never)]
#[no_mangle]
pub extern "C" fn xt_spin_marker(stop: &AtomicBool) {
    let mut x = 0u64;
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..10_000 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}

/// clock_nanosleep(CLOCK_MONOTONIC) for an hour at a time, forever.
#[inline(never)]
#[no_mangle]
pub extern "C" fn xt_sleep_marker() {
    let ts = libc::timespec {
        tv_sec: 3600,
        tv_nsec: 0,
    };
    loop {
        // SAFETY: the kernel reads `ts`, which outlives the call.
        unsafe {
            sys4(
                libc::SYS_clock_nanosleep,
                libc::CLOCK_MONOTONIC as u64,
                0,
                &ts as *const _ as u64,
                0,
            )
        };
    }
}

/// Like `xt_sleep_marker`, with a garbage frame pointer while asleep: no
/// unwinder can get past this frame.
#[inline(never)]
#[no_mangle]
pub extern "C" fn xt_badfp_marker() {
    let ts = libc::timespec {
        tv_sec: 3600,
        tv_nsec: 0,
    };
    loop {
        // SAFETY: rbp is saved and restored around the syscall; the kernel reads `ts`.
        #[cfg(target_arch = "x86_64")]
        unsafe {
            std::arch::asm!(
                "push rbp",
                "mov rbp, 0x1000",
                "syscall",
                "pop rbp",
                inlateout("rax") libc::SYS_clock_nanosleep as u64 => _,
                in("rdi") libc::CLOCK_MONOTONIC as u64,
                in("rsi") 0u64,
                in("rdx") &ts as *const libc::timespec,
                in("r10") 0u64,
                lateout("rcx") _,
                lateout("r11") _,
            )
        };
        #[cfg(not(target_arch = "x86_64"))]
        unsafe {
            libc::clock_nanosleep(libc::CLOCK_MONOTONIC, 0, &ts, std::ptr::null_mut())
        };
    }
}

/// pread64 issued from this function.
#[inline(never)]
#[no_mangle]
pub extern "C" fn xt_dio_marker(fd: i32, buf: *mut u8, len: usize, off: u64) -> i64 {
    // SAFETY: the caller passes a buffer of `len` writable bytes.
    unsafe { sys4(libc::SYS_pread64, fd as u64, buf as u64, len as u64, off) }
}

/// A raw four-argument syscall, inlined into the caller.
#[inline(always)]
unsafe fn sys4(nr: i64, a: u64, b: u64, c: u64, d: u64) -> i64 {
    #[cfg(target_arch = "x86_64")]
    {
        let ret: i64;
        std::arch::asm!(
            "syscall",
            inlateout("rax") nr => ret,
            in("rdi") a,
            in("rsi") b,
            in("rdx") c,
            in("r10") d,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
        ret
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        libc::syscall(nr, a, b, c, d)
    }
}
