use std::hint::black_box;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use super::*;
use crate::model::{SIGNAL, UNKNOWN};

#[inline(never)]
fn xtop_symtest_leaf(x: u64) -> u64 {
    black_box(x).wrapping_mul(3)
}

#[inline(never)]
fn xtop_symtest_caller(x: u64) -> u64 {
    xtop_symtest_leaf(black_box(x)) + 1
}

fn own() -> u32 {
    std::process::id()
}

#[test]
fn names_functions_of_this_binary_demangled() {
    let mut u = UserSymbols::new();
    let leaf = xtop_symtest_leaf as *const () as u64;
    // A return address just past the caller's first byte: looked up inside it.
    let caller = xtop_symtest_caller as *const () as u64 + 1;
    let s = u.stack(own(), 1, &[leaf, caller], End::Root);
    assert_eq!(s.top, 0);
    assert_eq!(s.frames.len(), 2, "{:?}", s.frames);
    assert!(s.frames[0].ends_with("::xtop_symtest_leaf"), "{:?}", s.frames);
    assert!(s.frames[1].ends_with("::xtop_symtest_caller"), "{:?}", s.frames);
    assert!(
        !s.frames[0].contains("_ZN") && !s.frames[0].contains("::h"),
        "demangled: {:?}",
        s.frames
    );
    assert!(
        Arc::ptr_eq(&s, &u.stack(own(), 1, &[leaf, caller], End::Root)),
        "cached"
    );
    // Another process (here: start time) running the same code shares the stack.
    let other = u.stack(own(), 2, &[leaf, caller], End::Root);
    assert!(Arc::ptr_eq(&s, &other));
    let t = u.stack(own(), 1, &[leaf, caller], End::Lost);
    assert_ne!(t.hash, s.hash);
    assert_eq!(t.frames.last().map(|f| &**f), Some(TRUNCATED));
    assert_eq!(t.frames.len(), 3);
    assert!(t.truncated() && t.cut_short());
    // Past the window or the frame limit: a gap of another kind, told apart.
    for end in [End::Window, End::Depth] {
        let d = u.stack(own(), 1, &[leaf, caller], end);
        assert_eq!(d.frames.last().map(|f| &**f), Some(DEEPER));
        assert!(!d.truncated() && d.cut_short());
        assert!(d.hash != s.hash && d.hash != t.hash);
    }
}

#[test]
fn a_signal_frame_is_named_and_keeps_the_frames_around_it() {
    let mut u = UserSymbols::new();
    let leaf = xtop_symtest_leaf as *const () as u64;
    let caller = xtop_symtest_caller as *const () as u64 + 1;
    let s = u.stack(own(), 1, &[leaf, SIGNAL_FRAME, caller], End::Root);
    assert_eq!(s.frames.len(), 3, "{:?}", s.frames);
    assert_eq!(&*s.frames[1], SIGNAL);
    assert!(s.frames[0].ends_with("::xtop_symtest_leaf"), "{:?}", s.frames);
    assert!(s.frames[2].ends_with("::xtop_symtest_caller"), "{:?}", s.frames);
    let plain = u.stack(own(), 1, &[leaf, caller], End::Root);
    assert_ne!(s.hash, plain.hash);
}

#[test]
fn garbage_addresses_are_unknown() {
    let mut u = UserSymbols::new();
    let s = u.stack(own(), 3, &[0x10, 0xdead_beef_0000, u64::MAX - 1], End::Root);
    assert_eq!(s.frames.len(), 4);
    assert!(s.frames[..3].iter().all(|f| &**f == UNKNOWN), "{:?}", s.frames);
    // A walk that ran out of frames at an address mapped nowhere found no
    // root, whatever the walker said.
    assert!(s.truncated(), "{:?}", s.frames);
}

struct Sleeper(Child);

impl Sleeper {
    fn spawn(program: &str) -> Self {
        Sleeper(Command::new(program).arg("30").spawn().expect("spawn sleeper"))
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }

    /// The instruction pointer of the sleeping child (inside libc's nanosleep).
    fn ip(&self) -> u64 {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let text = std::fs::read_to_string(format!("/proc/{}/syscall", self.pid())).unwrap_or_default();
            let f: Vec<&str> = text.split_whitespace().collect();
            // "nr args(6) sp pc" once it sleeps in a syscall.
            let sleeping = [libc::SYS_clock_nanosleep, libc::SYS_nanosleep].map(|n| n.to_string());
            if f.len() == 9 && sleeping.iter().any(|n| n == f[0]) {
                if let Ok(pc) = u64::from_str_radix(f[8].trim_start_matches("0x"), 16) {
                    return pc;
                }
            }
            assert!(Instant::now() < deadline, "child never slept: {text:?}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn reap(mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn exited_process_still_resolves_and_layout_does_not_matter() {
    let mut u = UserSymbols::new();
    let (a, b) = (Sleeper::spawn("/bin/sleep"), Sleeper::spawn("/bin/sleep"));
    let (pid_a, ip_a, ip_b) = (a.pid(), a.ip(), b.ip());
    let sa = u.stack(pid_a, 10, &[ip_a], End::Root);
    assert!(sa.frames[0].contains("nanosleep"), "{:?}", sa.frames);
    let sb = u.stack(b.pid(), 11, &[ip_b], End::Root);
    assert!(
        Arc::ptr_eq(&sa, &sb),
        "same code, same stack whatever the addresses"
    );
    a.reap();
    b.reap();
    assert!(
        std::fs::metadata(format!("/proc/{pid_a}/maps")).is_err(),
        "reaped"
    );
    // A stack never seen before, of the exited process: normalized with the
    // maps read while it lived, named from the file on disk.
    let after = u.stack(pid_a, 10, &[ip_a, ip_a + 1, 0x10], End::Lost);
    assert_eq!(after.frames.len(), 4, "{:?}", after.frames);
    assert_eq!(after.frames[0], sa.frames[0]);
    assert!(after.frames[1].contains("nanosleep"), "{:?}", after.frames);
    assert_eq!(&*after.frames[2], UNKNOWN);
    assert_eq!(&*after.frames[3], TRUNCATED);
}

#[test]
fn jit_addresses_resolve_through_the_perf_map() {
    const LEN: usize = 0x2000;
    // SAFETY: a fresh private anonymous mapping, unmapped below; never executed.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            LEN,
            libc::PROT_READ | libc::PROT_EXEC,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(base, libc::MAP_FAILED);
    let start = base as u64;
    let path = format!("/tmp/perf-{}.map", own());
    std::fs::write(&path, format!("{start:x} 100 xtop_jitted_fn\n")).expect("write perf map");
    let mut u = UserSymbols::new();
    let s = u.stack(own(), 4, &[start + 0x10, start + 0x1001], End::Root);
    let _ = std::fs::remove_file(&path);
    // SAFETY: the mapping made above, no longer used.
    unsafe { libc::munmap(base, LEN) };
    assert_eq!(&*s.frames[0], "xtop_jitted_fn");
    assert_eq!(
        &*s.frames[1], UNKNOWN,
        "past the JIT function is not that function"
    );
    // However the walk ended there, no thread starts in JIT code.
    assert!(s.truncated(), "{:?}", s.frames);
}

#[test]
fn a_root_is_past_the_leaf_in_a_file() {
    let mut u = UserSymbols::new();
    let leaf = xtop_symtest_leaf as *const () as u64;
    let caller = xtop_symtest_caller as *const () as u64 + 1;
    assert!(!u.stack(own(), 6, &[leaf, caller], End::Root).cut_short());
    // A frame-pointer walk that found 0 in the register at the leaf.
    let alone = u.stack(own(), 6, &[leaf], End::Root);
    assert_eq!(alone.frames.len(), 2, "{:?}", alone.frames);
    assert!(alone.truncated(), "{:?}", alone.frames);
    // Ran out of frames at an address mapped nowhere.
    assert!(u.stack(own(), 6, &[leaf, 0x10], End::Root).truncated());
    // The other ends are kept as the walk said.
    assert!(u.stack(own(), 6, &[leaf], End::Window).cut_short());
    assert!(!u.stack(own(), 6, &[leaf], End::Window).truncated());
}

#[test]
fn vdso_frames_are_named() {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("own maps");
    let Some(vdso) = super::super::maps::parse(&maps)
        .into_iter()
        .find(|m| m.kind == super::super::maps::MapKind::Vdso)
    else {
        return; // No vDSO on this system: nothing to name.
    };
    let addrs: Vec<u64> = (vdso.start..vdso.end).step_by(64).collect();
    let mut u = UserSymbols::new();
    let s = u.stack(own(), 5, &addrs, End::Root);
    assert!(s.frames.iter().all(|f| &**f != UNKNOWN), "{:?}", s.frames);
    assert!(s.frames.iter().any(|f| f.contains("gettime")), "{:?}", s.frames);
}
