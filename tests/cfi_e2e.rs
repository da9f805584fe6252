//! End to end: user stacks of code built without frame pointers reach their
//! thread's root through CFI. The programs are built at test time (C with
//! `cc -O2 -fomit-frame-pointer`, Rust with `rustc -O` and no frame pointers)
//! or are the distro's own (`dd`, `python3`), and run as child processes that
//! the test kills. Needs root; CI runs it as root.
#![cfg(target_arch = "x86_64")]

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::kid::Kid;
use common::observe::*;
use common::programs::*;
use xtop::model::AppFrame;
use xtop::sampler::{SamplerOptions, Unwind};

const C_SOURCE: &str = r#"
#define _GNU_SOURCE
#include <pthread.h>
#include <time.h>
/* Each function works after its call: no tail calls, every frame stays. */
#if defined(__clang__)
#define KEEP __attribute__((noinline))
#else
#define KEEP __attribute__((noinline, noipa))
#endif
volatile int stop;
KEEP int xt_c_leaf(int x) {
    struct timespec ts = {3600, 0};
    while (!stop)
        nanosleep(&ts, 0); /* through glibc's wrapper, which has no frame pointer */
    return x + 1;
}
KEEP int xt_c_mid(int x) { return xt_c_leaf(x * 3) * 5; }
KEEP int xt_c_top(int x) { return xt_c_mid(x + 7) ^ 9; }
static void *run(void *a) {
    pthread_setname_np(pthread_self(), "xt_cfi_c");
    return (void *)(long)xt_c_top((int)(long)a);
}
int main(void) {
    pthread_t t;
    pthread_create(&t, 0, run, 0);
    pthread_join(t, 0);
    return 0;
}
"#;

const RUST_SOURCE: &str = r#"
use std::io::Read;
#[inline(never)]
#[no_mangle]
pub extern "C" fn xt_rs_leaf(x: u64) -> u64 {
    let mut b = [0u8; 1];
    let n = std::io::stdin().read(&mut b).unwrap_or(0) as u64;
    std::hint::black_box(x) + n
}
#[inline(never)]
#[no_mangle]
pub extern "C" fn xt_rs_mid(x: u64) -> u64 {
    std::hint::black_box(xt_rs_leaf(x * 3)) * 5
}
#[inline(never)]
#[no_mangle]
pub extern "C" fn xt_rs_top(x: u64) -> u64 {
    std::hint::black_box(xt_rs_mid(x + 7)) ^ 9
}
fn main() {
    let t = std::thread::Builder::new().name("xt_cfi_rs".into());
    let h = t.spawn(|| xt_rs_top(std::hint::black_box(1))).unwrap();
    std::process::exit(h.join().unwrap() as i32);
}
"#;

/// Threads reading the clock in a loop, more of them than CPUs: some always
/// wait in the run queue, preempted as often as not inside the vDSO.
const VDSO_SOURCE: &str = r#"
#define _GNU_SOURCE
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#define KEEP __attribute__((noinline))
KEEP long xt_v_leaf(long x) {
    struct timespec ts;
    for (int i = 0; i < 1000; i++) {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        x += ts.tv_nsec;
    }
    return x;
}
KEEP long xt_v_mid(long x) {
    for (;;)
        x = xt_v_leaf(x) ^ 3;
    return x;
}
static void *run(void *a) {
    pthread_setname_np(pthread_self(), "xt_vdso");
    return (void *)xt_v_mid((long)a);
}
int main(void) {
    pthread_t t;
    for (int i = 0; i < 4; i++)
        pthread_create(&t, 0, run, 0);
    sleep(60); /* ends by itself, spinners and all */
    return 0;
}
"#;

fn sampler_opts(pid: u32, unwind: Unwind) -> SamplerOptions {
    SamplerOptions {
        pids: vec![pid],
        unwind,
        ..opts(true)
    }
}

/// The user stacks of thread `comm` over `passes` passes.
fn stacks_of(pid: u32, comm: &str, unwind: Unwind, passes: usize) -> Vec<StackObs> {
    let by = sample_stacks(sampler_opts(pid, unwind), passes);
    by.get(comm).cloned().unwrap_or_default()
}

fn show(obs: &[StackObs]) -> String {
    obs.iter()
        .map(|o| format!("{} u={:?}\n", o.state, o.uframes()))
        .collect()
}

/// `chain` (leaf first) appears in order in every stack, which reaches its
/// root (named `root`: the root of a stripped binary has no name).
fn assert_chain_to_root(obs: &[StackObs], chain: &[&str], root: &str) {
    assert!(!obs.is_empty(), "thread not reported");
    assert!(
        obs.iter().all(|o| o.whole_through(chain, root)),
        "{chain:?} in order, whole, to {root}: {}",
        show(obs)
    );
}

/// No stack has a frame named like `caller`: a frame-pointer walk stops
/// before it.
fn assert_never_reaches(obs: &[StackObs], caller: &str) {
    assert!(
        !obs.iter().any(|o| o.uframes().iter().any(|f| f.contains(caller))),
        "a frame-pointer walk should not reach {caller}: {}",
        show(obs)
    );
}

/// Every stack's `ustack_app` (the program's own innermost frame) is `name`.
fn assert_app_frame(obs: &[StackObs], name: &str) {
    assert!(
        obs.iter().all(|o| o
            .ustack
            .as_ref()
            .is_some_and(|u| matches!(u.app_frame(), AppFrame::Frame(f) if &**f == name))),
        "ustack_app should be {name}: {}",
        show(obs)
    );
}

#[test]
fn c_without_frame_pointers_blocked_in_glibc_has_its_whole_chain() {
    let Some(_serial) = live_bpf() else { return };
    let chain = ["nanosleep", "xt_c_leaf", "xt_c_mid", "xt_c_top", "start_thread"];
    for (name, fp) in [
        ("cfi-c-nofp", "-fomit-frame-pointer"),
        ("cfi-c-fp", "-fno-omit-frame-pointer"),
    ] {
        let exe = build(name, "c", C_SOURCE, "cc", &["-O2", "-g0", fp, "-pthread"]);
        let kid = Kid::spawn(&mut Command::new(&exe));
        kid.wait_sleeping("xt_cfi_c");
        let obs = stacks_of(kid.pid(), "xt_cfi_c", Unwind::Cfi, 3);
        assert_chain_to_root(&obs, &chain, "clone");
        // The program's own frame is the caller of glibc's nanosleep.
        assert_app_frame(&obs, "xt_c_leaf");
        if fp == "-fomit-frame-pointer" {
            // Frame pointers alone lose this stack: the CFI above is what found it.
            let fp_only = stacks_of(kid.pid(), "xt_cfi_c", Unwind::Fp, 3);
            assert!(!fp_only.is_empty());
            assert!(
                fp_only
                    .iter()
                    .all(|o| o.ustack.as_ref().is_none_or(|s| s.cut_short())),
                "{}",
                show(&fp_only)
            );
            assert_never_reaches(&fp_only, "xt_c_top");
        }
    }
}

#[test]
fn rust_without_frame_pointers_blocked_in_a_read_has_its_whole_chain() {
    let Some(_serial) = live_bpf() else { return };
    let exe = build(
        "cfi-rs-nofp",
        "rs",
        RUST_SOURCE,
        "rustc",
        &["-O", "-C", "force-frame-pointers=no", "--edition", "2021"],
    );
    let kid = Kid::spawn(&mut Command::new(&exe));
    kid.wait_sleeping("xt_cfi_rs");
    let obs = stacks_of(kid.pid(), "xt_cfi_rs", Unwind::Cfi, 3);
    assert_chain_to_root(
        &obs,
        &["read", "xt_rs_leaf", "xt_rs_mid", "xt_rs_top", "start_thread"],
        "clone",
    );
    // Past glibc's read and std's wrappers around it.
    assert_app_frame(&obs, "xt_rs_leaf");
}

#[test]
fn distro_python3_sleeping_reaches_its_root() {
    let Some(_serial) = live_bpf() else { return };
    let kid = Kid::spawn(Command::new("/usr/bin/python3").args(["-c", "import time; time.sleep(3600)"]));
    kid.wait_sleeping("python3");
    let obs = stacks_of(kid.pid(), "python3", Unwind::Cfi, 3);
    // Debian's python3 is stripped to its exported symbols: static functions
    // (time_sleep, pymain_*) show as [unknown], but every frame is there.
    assert_chain_to_root(
        &obs,
        &[
            "clock_nanosleep",
            "_PyEval_EvalFrameDefault",
            "Py_BytesMain",
            "__libc_start_main",
        ],
        "_start",
    );
}

#[test]
fn distro_dd_in_direct_reads_reaches_its_root() {
    let Some(_serial) = live_bpf() else { return };
    // A file of our own, written once; dd reads it in 1 MiB O_DIRECT reads, over
    // and over. (A 4 KiB read often ends within the µs the stack copy takes:
    // that sample then keeps its kernel stack only, never a mixed user stack.)
    let data = tmp().join(format!("cfi-dd-{}.bin", std::process::id()));
    std::fs::write(&data, vec![0x5au8; 32 << 20]).unwrap();
    let script = format!(
        "for i in $(seq 300); do dd if={} of=/dev/null iflag=direct bs=1M status=none; done",
        data.display()
    );
    let kid = Kid::spawn(Command::new("/bin/sh").args(["-c", &script]));
    let mut disk: Vec<StackObs> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    // dd is a new process every few seconds: no pid filter, its comm tells it.
    let sampler = start_sampler(opts(false));
    while disk.len() < 5 && Instant::now() < deadline {
        let by = read_stacks(&sampler, 5);
        let obs = by.get("dd").cloned().unwrap_or_default();
        // In its reads: a dd caught in DISK while still exec'ing (paging its
        // binary in) has the old program's registers and is no read at all.
        disk.extend(
            obs.into_iter()
                .filter(|o| o.state == "DISK" && o.uframes().first().is_some_and(|f| &**f == "read")),
        );
    }
    sampler.stop().unwrap();
    drop(kid);
    let _ = std::fs::remove_file(&data);
    assert!(
        disk.len() >= 5,
        "dd seen in DISK with a stack {} times",
        disk.len()
    );
    // dd is stripped: main and _start have no names, but the stack is whole.
    assert_chain_to_root(
        &disk,
        &["read", "__libc_start_call_main", "__libc_start_main"],
        "dd+0x",
    );
}

#[test]
fn threads_preempted_in_the_vdso_reach_their_root() {
    let Some(_serial) = live_bpf() else { return };
    let kid = spawn_c_nofp("cfi-vdso", VDSO_SOURCE);
    let obs: Vec<StackObs> = stacks_of(kid.pid(), "xt_vdso", Unwind::Cfi, 20)
        .into_iter()
        // A thread that got a CPU while its stack was copied has none this
        // pass (rather than a mixed one).
        .filter(|o| o.state == "RUNQ" && o.ustack.is_some())
        .collect();
    drop(kid);
    assert_chain_to_root(&obs, &["xt_v_leaf", "xt_v_mid", "start_thread"], "clone");
    // A leaf in the vDSO shows as its clock_gettime called from the C library's.
    let in_vdso = |o: &&StackObs| {
        o.uframes()
            .iter()
            .take_while(|f| &***f == "clock_gettime")
            .count()
            == 2
    };
    assert!(
        obs.iter().any(|o| in_vdso(&o)),
        "no thread caught in the vDSO: {}",
        show(&obs)
    );
}

// On-CPU stacks: the profile copies a running thread's stack window and the
// same CFI unwinder walks it.

/// Running samples of thread `comm` that have a user stack, over `passes`
/// passes: at least `min` of them (a spinner is on its CPU at nearly every
/// pass, and the profile catches it there).
fn running_stacks(pid: u32, comm: &str, unwind: Unwind, passes: usize, min: usize) -> Vec<StackObs> {
    let obs: Vec<StackObs> = stacks_of(pid, comm, unwind, passes)
        .into_iter()
        .filter(|o| o.state == "RUN" && o.ustack.is_some())
        .collect();
    assert!(
        obs.len() >= min,
        "{comm} running with a stack {} times: {}",
        obs.len(),
        show(&obs)
    );
    obs
}

#[test]
fn c_without_frame_pointers_spinning_has_its_whole_chain() {
    let Some(_serial) = live_bpf() else { return };
    let kid = spawn_c_nofp("cfi-spin-c", C_SPIN_SOURCE);
    let obs = running_stacks(kid.pid(), "xt_spin_c", Unwind::Cfi, 20, 5);
    let chain = ["xt_spin_leaf", "xt_spin_mid", "xt_spin_top", "start_thread"];
    assert_chain_to_root(&obs, &chain, "clone");
    // The leaf is the spinning function itself, not a caller.
    assert!(
        obs.iter().all(|o| &*o.uframes()[0] == "xt_spin_leaf"),
        "{}",
        show(&obs)
    );
    assert_app_frame(&obs, "xt_spin_leaf");
    // Frame pointers alone stop at the leaf (where rbp holds no frame
    // pointer; when it holds 0 the walk would take the leaf for the root,
    // which xtop calls truncated): the CFI above is what found the rest.
    let fp_only = running_stacks(kid.pid(), "xt_spin_c", Unwind::Fp, 10, 1);
    assert_never_reaches(&fp_only, "xt_spin_mid");
}

#[test]
fn default_built_rust_spinning_has_its_whole_chain() {
    let Some(_serial) = live_bpf() else { return };
    let kid = spawn_rust_spin();
    let obs = running_stacks(kid.pid(), "xt_spin_rs", Unwind::Cfi, 20, 5);
    assert_chain_to_root(
        &obs,
        &[
            "xt_rs_spin_leaf",
            "xt_rs_spin_mid",
            "xt_rs_spin_top",
            "start_thread",
        ],
        "clone",
    );
}

#[test]
fn distro_python3_spinning_reaches_its_root() {
    let Some(_serial) = live_bpf() else { return };
    let script = "import time\nend = time.monotonic() + 60\nwhile time.monotonic() < end:\n    pass\n";
    let kid = Kid::spawn(Command::new("/usr/bin/python3").args(["-c", script]));
    let obs = running_stacks(kid.pid(), "python3", Unwind::Cfi, 20, 5);
    assert_chain_to_root(
        &obs,
        &["_PyEval_EvalFrameDefault", "Py_BytesMain", "__libc_start_main"],
        "_start",
    );
}
