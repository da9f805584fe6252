//! The unwinder against real stack windows: this test process captures its
//! own registers and copies its own stack, as the kernel does for a thread
//! off CPU. The test binary keeps frame pointers (.cargo/config.toml), but the
//! distro glibc under it has none, so only CFI reaches the thread's root.

use std::hint::black_box;
use std::sync::Arc;

#[cfg(target_arch = "x86_64")]
use super::capture::{capture, Captured};
use super::cfi::{Cfi, CfiTables};
use super::*;

/// The executable file mappings of this process, as the sampler gets them.
fn own_mappings() -> Vec<Mapping> {
    crate::symbols::UserSymbols::new().unwind_mappings(std::process::id(), 0)
}

// Each caller does work after its call, so none of them is a tail call that
// would (correctly) be missing from the stack.
#[cfg(target_arch = "x86_64")]
#[inline(never)]
fn caller_two(x: u64) -> (Captured, u64) {
    let c = capture();
    (c, black_box(x).wrapping_mul(3))
}

#[cfg(target_arch = "x86_64")]
#[inline(never)]
fn caller_one(x: u64) -> (Captured, u64) {
    let (c, y) = caller_two(black_box(x) + 1);
    (c, black_box(y) ^ 5)
}

/// Function names of `addrs` (return addresses looked up inside their call).
fn names(addrs: &[u64]) -> Vec<String> {
    use blazesym::symbolize::source::{Process, Source};
    use blazesym::symbolize::{Input, Symbolizer};
    let lookup: Vec<u64> = addrs
        .iter()
        .enumerate()
        .map(|(i, &a)| if i == 0 { a } else { a - 1 })
        .collect();
    let src = Source::Process(Process::new(blazesym::Pid::Slf));
    Symbolizer::new()
        .symbolize(&src, Input::AbsAddr(&lookup))
        .unwrap()
        .into_iter()
        .map(|s| s.as_sym().map_or_else(|| "?".to_string(), |s| s.name.to_string()))
        .collect()
}

fn position(names: &[String], part: &str) -> usize {
    names
        .iter()
        .position(|n| n.contains(part))
        .unwrap_or_else(|| panic!("no {part} in {names:#?}"))
}

#[cfg(target_arch = "x86_64")]
#[test]
fn a_thread_without_frame_pointers_unwinds_to_its_root_in_order() {
    let (c, _) = std::thread::spawn(|| caller_one(7)).join().unwrap();
    let mut u = Unwinder::new();
    let proc = u.process(&own_mappings());
    assert!(proc.modules() >= 2, "this binary and libc have CFI");
    let got = u.unwind(&proc, &c.regs, c.window(usize::MAX));
    let n = names(&got.addrs);
    assert_eq!(got.end, End::Root, "{n:#?}");
    let chain = ["capture", "caller_two", "caller_one", "start_thread"];
    let at: Vec<usize> = chain.iter().map(|f| position(&n, f)).collect();
    assert!(
        at.windows(2).all(|w| w[0] < w[1]),
        "{chain:?} out of order: {n:#?}"
    );
    assert_eq!(at[0], 0, "the leaf is the instruction pointer's function");
    assert!(
        n.last().unwrap().contains("clone"),
        "a thread's root is clone3: {n:#?}"
    );
}

#[cfg(target_arch = "x86_64")]
#[test]
fn a_short_window_says_so_and_keeps_the_frames_it_covered() {
    let (c, _) = std::thread::spawn(|| caller_one(1)).join().unwrap();
    let mut u = Unwinder::new();
    let proc = u.process(&own_mappings());
    let whole = u.unwind(&proc, &c.regs, c.window(usize::MAX));
    let short = u.unwind(&proc, &c.regs, c.window(256));
    assert_eq!(short.end, End::Window);
    assert!(short.truncated());
    assert!(short.addrs.len() < whole.addrs.len(), "{short:?}");
    assert_eq!(short.addrs[..], whole.addrs[..short.addrs.len()]);
    // The same cut at the real end of the stack is a broken unwind, not a window.
    let mut at_end = c.window(256);
    at_end.to_end = true;
    assert_eq!(u.unwind(&proc, &c.regs, at_end).end, End::Lost);
}

#[cfg(target_arch = "x86_64")]
#[test]
fn reach_is_the_window_a_stack_needs() {
    let (c, _) = std::thread::spawn(|| caller_one(2)).join().unwrap();
    let mut u = Unwinder::new();
    let proc = u.process(&own_mappings());
    let whole = u.unwind(&proc, &c.regs, c.window(usize::MAX));
    assert_eq!(whole.end, End::Root);
    let reach = whole.reach as usize;
    assert!(
        reach > 0 && reach <= c.stack.len(),
        "{reach} of {}",
        c.stack.len()
    );
    // Exactly that much of the stack gives the same whole stack; a word less does not.
    let just = u.unwind(&proc, &c.regs, c.window(reach));
    assert_eq!((just.end, &just.addrs), (End::Root, &whole.addrs));
    assert_eq!(u.unwind(&proc, &c.regs, c.window(reach - 8)).end, End::Window);
}

#[test]
fn code_without_cfi_is_walked_by_frame_pointer() {
    // Two frame records {caller's fp, return address}; the outer one's fp is 0.
    let start = 0x7000_0000u64;
    let mut words = [0u64; 8];
    words[2] = start + 48; // record at start+16 -> record at start+48
    words[3] = 0x2222;
    words[6] = 0;
    words[7] = 0x3333;
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let regs = Regs {
        ip: 0x1111,
        sp: start,
        fp: start + 16,
        lr: 0,
    };
    let mut u = Unwinder::new();
    let proc = u.process(&[]);
    let w = Window {
        start,
        bytes: &bytes,
        to_end: true,
    };
    let got = u.unwind(&proc, &regs, w);
    assert_eq!(got.addrs, vec![0x1111, 0x2222, 0x3333]);
    assert_eq!(got.end, End::Root);
}

#[test]
fn a_loop_in_the_stack_stops_at_the_depth_limit_or_as_lost() {
    // A frame record that points at itself: never a root, never endless.
    let start = 0x7000_0000u64;
    let bytes: Vec<u8> = [start, 0x4444].iter().flat_map(|w| w.to_le_bytes()).collect();
    let regs = Regs {
        ip: 0x1111,
        sp: start,
        fp: start,
        lr: 0,
    };
    let mut u = Unwinder::new();
    let proc = u.process(&[]);
    let got = u.unwind(
        &proc,
        &regs,
        Window {
            start,
            bytes: &bytes,
            to_end: true,
        },
    );
    assert!(got.truncated() && got.addrs.len() <= MAX_FRAMES, "{got:?}");
}

/// The load address and path of the binary holding `f`, as the dynamic linker reports them.
fn loaded_at(f: *const libc::c_void) -> (u64, String) {
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the address and fills `info`.
    let ok = unsafe { libc::dladdr(f, &mut info) };
    assert_ne!(ok, 0);
    // SAFETY: dladdr set dli_fname to a NUL-terminated path.
    let path = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
    (info.dli_fbase as u64, path.to_string_lossy().into_owned())
}

fn libc_base() -> (u64, String) {
    loaded_at(libc::getpid as *const libc::c_void)
}

#[test]
fn a_mappings_bias_is_where_the_loader_put_the_binary() {
    // libc (GNU ld: file offsets equal addresses) and this test binary (lld:
    // its code segment's address is a page past its file offset).
    let exe = std::env::current_exe().unwrap();
    let (exe_base, _) = loaded_at(own_mappings as *const libc::c_void);
    let (libc_base, libc_path) = libc_base();
    for (path, base) in [(exe, exe_base), (libc_path.into(), libc_base)] {
        let path: std::path::PathBuf = path;
        let same = |p: &std::path::Path| std::fs::canonicalize(p).ok() == std::fs::canonicalize(&path).ok();
        let m = own_mappings()
            .into_iter()
            .find(|m| m.source.path().is_some_and(same))
            .unwrap_or_else(|| panic!("{path:?} mapped executable"));
        let cfi = Cfi::read(m.source.path().unwrap()).expect("CFI");
        assert!(cfi.eh_frame.is_some() && cfi.eh_frame_hdr.is_some());
        assert_eq!(cfi.bias(m.start, m.offset), Some(base), "{path:?}");
    }
}

#[test]
fn tables_are_read_once_per_binary_and_held_within_budget() {
    let (_, libc_path) = libc_base();
    let exe = std::env::current_exe().unwrap();
    let libc_size = Cfi::read(libc_path.as_ref()).unwrap().size();
    let mut t = CfiTables::new(libc_size + 1);
    let mut reads = 0;
    let mut get = |t: &mut CfiTables, key, path: &std::path::Path| {
        t.get(key, || {
            reads += 1;
            Cfi::read(path)
        })
    };
    let a = get(&mut t, 1, libc_path.as_ref()).unwrap();
    assert!(Arc::ptr_eq(&a, &get(&mut t, 1, libc_path.as_ref()).unwrap()));
    assert!(get(&mut t, 2, "/dev/null".as_ref()).is_none(), "not an ELF file");
    assert!(get(&mut t, 2, "/dev/null".as_ref()).is_none());
    assert!(t.bytes() <= libc_size + 1);
    // Over budget: libc (least recently used) goes, the newest stays.
    let exe_size = Cfi::read(&exe).unwrap().size();
    assert!(get(&mut t, 3, &exe).is_some());
    assert_eq!(t.bytes(), exe_size, "libc still held");
    assert!(
        get(&mut t, 1, libc_path.as_ref()).is_some(),
        "read again when needed"
    );
    assert_eq!(reads, 4, "each binary read once, libc again after eviction");
}

#[test]
fn the_c_librarys_signal_trampoline_is_found_and_no_other_code_is_one() {
    let (_, libc_path) = libc_base();
    let libc = Cfi::read(libc_path.as_ref()).unwrap();
    assert_eq!(libc.sigreturn.len(), 1, "glibc has one: __restore_rt");
    let exe = Cfi::read(&std::env::current_exe().unwrap()).unwrap();
    assert!(exe.sigreturn.is_empty(), "{:?}", exe.sigreturn);
}

#[cfg(target_arch = "x86_64")]
mod signal {
    use std::sync::Mutex;

    use super::*;

    static CAUGHT: Mutex<Option<Captured>> = Mutex::new(None);

    #[inline(never)]
    extern "C" fn xt_on_signal(_: libc::c_int) {
        // Not async-signal-safe in general, but the signal interrupts only the
        // pthread_kill below, which holds no lock.
        let c = capture();
        *CAUGHT.lock().unwrap() = Some(c);
    }

    #[inline(never)]
    fn xt_interrupted(sig: libc::c_int) -> u64 {
        // SAFETY: a signal to this very thread, whose handler is installed.
        let rc = unsafe { libc::pthread_kill(libc::pthread_self(), sig) };
        black_box(rc as u64) + 1
    }

    #[test]
    fn a_signal_frame_leads_to_the_interrupted_code_and_on_to_the_root() {
        // A real-time signal nothing else in the test process uses.
        let sig = libc::SIGRTMIN() + 7;
        let c = std::thread::spawn(move || {
            // SAFETY: installs a plain handler (glibc adds its trampoline).
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = xt_on_signal as *const () as usize;
                assert_eq!(libc::sigaction(sig, &sa, std::ptr::null_mut()), 0);
            }
            xt_interrupted(sig);
            CAUGHT.lock().unwrap().take().expect("the handler ran")
        })
        .join()
        .unwrap();
        let mut u = Unwinder::new();
        let proc = u.process(&own_mappings());
        let got = u.unwind(&proc, &c.regs, c.window(c.stack.len()));
        assert_eq!(got.end, End::Root, "{got:?}");
        let at = got
            .addrs
            .iter()
            .position(|&a| a == SIGNAL_FRAME)
            .expect("a signal frame");
        let n = names(&got.addrs);
        assert!(position(&n, "xt_on_signal") < at, "{n:#?}");
        assert!(at < position(&n, "xt_interrupted"), "{n:#?}");
        assert!(
            position(&n, "xt_interrupted") < position(&n, "start_thread"),
            "{n:#?}"
        );
        // One signal, one signal frame.
        assert_eq!(got.addrs.iter().filter(|&&a| a == SIGNAL_FRAME).count(), 1);
    }
}

/// The vDSO function `name`'s first instruction, in this process.
#[cfg(target_arch = "x86_64")]
fn vdso_entry(name: &str) -> u64 {
    use object::{Object, ObjectSymbol};
    let image = vdso::own_image().expect("the kernel maps a vDSO");
    let elf = object::File::parse(&image[..]).expect("the vDSO is an ELF image");
    let sym = elf
        .dynamic_symbols()
        .find(|s| s.name() == Ok(name))
        .unwrap_or_else(|| panic!("{name} in the vDSO"));
    // The vDSO is linked at 0 and mapped whole from its start.
    crate::symbols::own_vdso().unwrap().start + sym.address()
}

/// A thread preempted at the first instruction of a vDSO function (a clock
/// read, in a busy server): its return address is at the stack pointer, and
/// the frame pointer is still its caller's.
#[cfg(target_arch = "x86_64")]
fn preempted_entering_the_vdso(c: &Captured) -> (Regs, Vec<u8>) {
    let regs = Regs {
        ip: vdso_entry("__vdso_clock_gettime"),
        sp: c.regs.sp - 8,
        ..c.regs
    };
    // The caller is `capture`, at the point where it took its registers.
    let mut stack = c.regs.ip.to_le_bytes().to_vec();
    stack.extend_from_slice(&c.stack);
    (regs, stack)
}

#[cfg(target_arch = "x86_64")]
#[test]
fn a_thread_in_the_vdso_unwinds_through_its_cfi_to_its_caller() {
    let (c, _) = std::thread::spawn(|| caller_one(3)).join().unwrap();
    let (regs, stack) = preempted_entering_the_vdso(&c);
    let window = Window {
        start: regs.sp,
        bytes: &stack,
        to_end: true,
    };
    let mut u = Unwinder::new();
    let mappings = own_mappings();
    let vdso = mappings
        .iter()
        .find(|m| m.source == Source::Vdso)
        .expect("the vDSO is among the unwinder's mappings");
    assert_eq!(vdso.key, vdso::KEY);
    let proc = u.process(&mappings);
    let got = u.unwind(&proc, &regs, window);
    let caller = u.unwind(&proc, &c.regs, c.window(usize::MAX));
    assert_eq!(caller.end, End::Root);
    // The vDSO frame, then exactly the caller's own stack.
    assert_eq!(got.end, End::Root, "{:#?}", names(&got.addrs));
    assert_eq!(got.addrs[0], regs.ip);
    assert_eq!(got.addrs[1..], caller.addrs[..]);
    // Without the vDSO's CFI the frame-pointer rule skips the caller.
    let without: Vec<Mapping> = mappings
        .iter()
        .filter(|m| m.source != Source::Vdso)
        .cloned()
        .collect();
    let proc = u.process(&without);
    let blind = u.unwind(&proc, &regs, window);
    assert!(!blind.addrs.contains(&c.regs.ip), "{:#?}", names(&blind.addrs));
}

#[test]
fn a_process_with_another_vdso_image_gets_no_vdso_cfi() {
    let own = crate::symbols::own_vdso().expect("the kernel maps a vDSO");
    let len = own.end - own.start;
    let m = vdso::mapping(0x7f00_0000_0000, 0x7f00_0000_0000 + len).expect("the same image");
    assert_eq!((m.offset, m.key, m.source), (0, vdso::KEY, Source::Vdso));
    // A 32-bit process's vDSO is another image, of another size.
    assert!(vdso::mapping(0xf7f0_0000, 0xf7f0_0000 + len + 0x1000).is_none());
    let cfi = vdso::own_cfi().expect("the vDSO has CFI");
    assert!(cfi.eh_frame.is_some() && cfi.eh_frame_hdr.is_some());
    assert_eq!(cfi.bias(own.start, 0), Some(own.start), "linked at 0");
}
