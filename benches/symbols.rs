//! User stack symbolization cost: `cargo bench --bench symbols` (as root, for
//! /proc/PID/map_files). What the sampler pays, synchronously, per stack:
//!
//! 1. a new stack of a new process whose binaries were never seen (maps read,
//!    build-ids read, ELF and debug info parsed);
//! 2. a new process running already-known binaries (maps read, nothing parsed);
//! 3. a new stack in an already-parsed binary;
//! 4. a stack seen before (the steady state).

use std::hint::black_box;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use xtop::symbols::UserSymbols;
use xtop::unwind::End;

macro_rules! funcs {
    ($($name:ident = $k:literal),*) => {
        $(
            // Distinct bodies: identical ones would be folded into one symbol.
            #[inline(never)]
            fn $name(x: u64) -> u64 {
                black_box(x).rotate_left($k) ^ ($k * 0x5bd1_e995)
            }
        )*
        const FUNCS: &[fn(u64) -> u64] = &[$($name),*];
    };
}
funcs!(
    bench_f0 = 1,
    bench_f1 = 2,
    bench_f2 = 3,
    bench_f3 = 4,
    bench_f4 = 5,
    bench_f5 = 6,
    bench_f6 = 7,
    bench_f7 = 9
);

const DEPTH: usize = 8;

/// A distinct stack of `DEPTH` frames in this binary for each `i`.
fn stack_in_this_binary(i: usize) -> Vec<u64> {
    (0..DEPTH)
        .map(|d| {
            let f = FUNCS[(i + d) % FUNCS.len()] as *const () as u64;
            // Return addresses point past a call: never the function's first byte.
            f + (i / FUNCS.len()) as u64 % 16 + u64::from(d > 0)
        })
        .collect()
}

fn sleeper() -> Child {
    Command::new("/bin/sleep")
        .arg("30")
        .spawn()
        .expect("spawn /bin/sleep")
}

/// The child's instruction pointer once it sleeps (inside libc).
fn sleeping_ip(c: &Child) -> u64 {
    let sleeping = [libc::SYS_clock_nanosleep, libc::SYS_nanosleep].map(|n| n.to_string());
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let text = std::fs::read_to_string(format!("/proc/{}/syscall", c.id())).unwrap_or_default();
        let f: Vec<&str> = text.split_whitespace().collect();
        if f.len() == 9 && sleeping.iter().any(|n| n == f[0]) {
            if let Ok(ip) = u64::from_str_radix(f[8].trim_start_matches("0x"), 16) {
                return ip;
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("child never slept")
}

/// This binary's executable mapping.
fn own_text() -> (u64, u64) {
    let exe = std::fs::read_link("/proc/self/exe").expect("own exe");
    let maps = std::fs::read_to_string("/proc/self/maps").expect("own maps");
    maps.lines()
        .filter(|l| l.ends_with(&*exe.to_string_lossy()) && l.split_whitespace().nth(1) == Some("r-xp"))
        .find_map(|l| {
            let (s, e) = l.split_whitespace().next()?.split_once('-')?;
            Some((u64::from_str_radix(s, 16).ok()?, u64::from_str_radix(e, 16).ok()?))
        })
        .expect("own text mapping")
}

fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_nanos() as f64 / 1e3)
}

fn main() {
    let own = std::process::id();

    // 1. First stack ever, of this process: its binary's debug info parsed.
    let mut u = UserSymbols::new();
    let t = Instant::now();
    let s = u.stack(own, 1, &stack_in_this_binary(0), End::Root);
    let first_own = t.elapsed();
    assert!(s.frames[0].contains("bench_f0"), "{:?}", s.frames);

    // 1b. First stack of a new process whose libc was never parsed.
    let (mut a, mut b) = (sleeper(), sleeper());
    let (ip_a, ip_b) = (sleeping_ip(&a), sleeping_ip(&b));
    let mut fresh = UserSymbols::new();
    let t = Instant::now();
    let s = fresh.stack(a.id(), 1, &[ip_a], End::Root);
    let first_libc = t.elapsed();
    assert!(s.frames[0].contains("nanosleep"), "{:?}", s.frames);

    // 2. A new process, binaries known.
    let t = Instant::now();
    let s = fresh.stack(b.id(), 1, &[ip_b], End::Root);
    let new_process = t.elapsed();
    assert!(s.frames[0].contains("nanosleep"), "{:?}", s.frames);
    for c in [&mut a, &mut b] {
        let _ = c.kill();
        let _ = c.wait();
    }

    // 3a. New stacks in a parsed binary, frames already named (other stacks had them).
    let n = 2000;
    for i in 0..FUNCS.len() * 16 {
        black_box(u.stack(own, 1, &stack_in_this_binary(i)[..1], End::Root));
    }
    let stacks: Vec<Vec<u64>> = (1..=n).map(stack_in_this_binary).collect();
    let t = Instant::now();
    for st in &stacks {
        black_box(u.stack(own, 1, st, End::Root));
    }
    let new_stack = t.elapsed() / n as u32;

    // 3b. New stacks of never-named addresses spread over this binary's code.
    let (start, end) = own_text();
    let spread: Vec<Vec<u64>> = (0..n as u64)
        .map(|i| {
            (0..DEPTH as u64)
                .map(|d| start + ((i * DEPTH as u64 + d) * 7919) % (end - start))
                .collect()
        })
        .collect();
    let t = Instant::now();
    for st in &spread {
        black_box(u.stack(own, 1, st, End::Root));
    }
    let new_frames = t.elapsed() / n as u32;

    // 4. Stacks seen before.
    let rounds = 200;
    let t = Instant::now();
    for _ in 0..rounds {
        for st in &stacks {
            black_box(u.stack(own, 1, st, End::Root));
        }
    }
    let cached = t.elapsed().as_nanos() / (rounds * n) as u128;

    println!("user stack symbolization ({DEPTH} frames unless noted):");
    println!(
        "  first stack, new process, this binary never parsed: {}",
        us(first_own)
    );
    println!(
        "  first stack, new process, libc never parsed (1 frame): {}",
        us(first_libc)
    );
    println!(
        "  first stack, new process, binaries known (1 frame): {}",
        us(new_process)
    );
    println!(
        "  new stack, binary known, frames named before: {} per stack",
        us(new_stack)
    );
    println!(
        "  new stack, binary known, {DEPTH} frames never named: {} per stack",
        us(new_frames)
    );
    println!("  cached stack: {cached} ns per stack");
}
