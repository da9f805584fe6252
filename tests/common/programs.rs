//! Test programs built at test time: C without frame pointers, default-built
//! Rust, and code run from anonymous memory as a JIT's would be. Each ends by
//! itself after a minute; `Kid` ends it sooner.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::kid::{run_ok, Kid};

pub fn tmp() -> &'static Path {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
}

/// Builds `source` with `cmd` + `args` into the test's temp dir, once per name.
pub fn build(name: &str, ext: &str, source: &str, cmd: &str, args: &[&str]) -> PathBuf {
    let src = tmp().join(format!("{name}.{ext}"));
    let exe = tmp().join(name);
    std::fs::write(&src, source).unwrap();
    run_ok(Command::new(cmd).args(args).arg("-o").arg(&exe).arg(&src), cmd);
    exe
}

/// Builds C `source` with `-O2 -fomit-frame-pointer` and starts it.
pub fn spawn_c_nofp(name: &str, source: &str) -> Kid {
    let exe = build(
        name,
        "c",
        source,
        "cc",
        &["-O2", "-g0", "-fomit-frame-pointer", "-pthread"],
    );
    Kid::spawn(&mut Command::new(&exe))
}

/// One thread spinning in user code three calls deep; the process ends by itself.
pub const C_SPIN_SOURCE: &str = r#"
#define _GNU_SOURCE
#include <pthread.h>
#include <unistd.h>
#if defined(__clang__)
#define KEEP __attribute__((noinline))
#else
#define KEEP __attribute__((noinline, noipa))
#endif
volatile unsigned long sink;
KEEP unsigned long xt_spin_leaf(unsigned long x) {
    for (;;) {
        for (int i = 0; i < 1000; i++)
            x = x * 6364136223846793005UL + 1442695040888963407UL;
        sink = x;
    }
    return x;
}
KEEP unsigned long xt_spin_mid(unsigned long x) { return xt_spin_leaf(x * 3) * 5; }
KEEP unsigned long xt_spin_top(unsigned long x) { return xt_spin_mid(x + 7) ^ 9; }
static void *run(void *a) {
    pthread_setname_np(pthread_self(), "xt_spin_c");
    return (void *)xt_spin_top((unsigned long)a);
}
int main(void) {
    pthread_t t;
    pthread_create(&t, 0, run, 0);
    sleep(60);
    return 0;
}
"#;

pub const RUST_SPIN_SOURCE: &str = r#"
#[inline(never)]
#[no_mangle]
pub extern "C" fn xt_rs_spin_leaf(mut x: u64) -> u64 {
    loop {
        for _ in 0..1000 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}
#[inline(never)]
#[no_mangle]
pub extern "C" fn xt_rs_spin_mid(x: u64) -> u64 {
    std::hint::black_box(xt_rs_spin_leaf(x * 3)) * 5
}
#[inline(never)]
#[no_mangle]
pub extern "C" fn xt_rs_spin_top(x: u64) -> u64 {
    std::hint::black_box(xt_rs_spin_mid(x + 7)) ^ 9
}
fn main() {
    let t = std::thread::Builder::new().name("xt_spin_rs".into());
    t.spawn(|| xt_rs_spin_top(std::hint::black_box(1))).unwrap();
    std::thread::sleep(std::time::Duration::from_secs(60));
}
"#;

/// Builds `RUST_SPIN_SOURCE` with rustc's defaults (no frame pointers) and starts it.
pub fn spawn_rust_spin() -> Kid {
    let exe = build(
        "cfi-spin-rs",
        "rs",
        RUST_SPIN_SOURCE,
        "rustc",
        &["-O", "--edition", "2021"],
    );
    Kid::spawn(&mut Command::new(&exe))
}

/// A thread (`xt_jit`) spinning in code it copied to anonymous executable
/// memory, as a JIT compiler's code runs: no file, so no CFI and no symbols;
/// the code keeps no frame pointer. Nothing can unwind it (a perf map would
/// name the function, not find its caller).
pub const JIT_SPIN_SOURCE: &str = r#"
#define _GNU_SOURCE
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>
static void *run(void *a) {
    pthread_setname_np(pthread_self(), "xt_jit");
    unsigned char *code = mmap(0, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (code == MAP_FAILED)
        return a;
    /* pause; jmp back to it: a spin loop that keeps the CPU busy. */
    unsigned char loop[] = {0xf3, 0x90, 0xeb, 0xfc};
    for (unsigned i = 0; i < sizeof loop; i++)
        code[i] = loop[i];
    ((void (*)(void))code)();
    return a;
}
int main(void) {
    pthread_t t;
    pthread_create(&t, 0, run, 0);
    sleep(60);
    return 0;
}
"#;
