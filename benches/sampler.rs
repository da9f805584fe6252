//! Sampler cost benchmark (needs root): `cargo bench --bench sampler`.
//!
//! 1. Cost of a sampling pass with 100, 2,000 and 10,000 extra sleeping
//!    threads: kernel walk and userspace decode, per pass and per thread, in
//!    the default active-only mode and with --all.
//! 2. Added cost per syscall of the syscall hooks: a tight getppid loop
//!    without xtop, with xtop, and with xtop --no-track-syscalls.
//! 3. Added cost per context switch of the sched hooks: a pipe ping-pong.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use xtop::sampler::{Sampler, SamplerOptions};

fn threads_on_system() -> usize {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read_dir(e.path().join("task")).ok())
        .map(|t| t.count())
        .sum()
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

/// Threads blocked until the end, like the idle threads of real servers.
struct Sleepers {
    gate: Arc<(Mutex<bool>, Condvar)>,
    handles: Vec<std::thread::JoinHandle<()>>,
}

fn sleepers(n: usize) -> Sleepers {
    let gate = Arc::new((Mutex::new(false), Condvar::new()));
    let handles = (0..n)
        .map(|_| {
            let gate = gate.clone();
            std::thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn(move || {
                    let (done, cv) = &*gate;
                    let mut d = done.lock().unwrap();
                    while !*d {
                        d = cv.wait(d).unwrap();
                    }
                })
                .expect("spawn sleeper")
        })
        .collect();
    Sleepers { gate, handles }
}

impl Drop for Sleepers {
    fn drop(&mut self) {
        let (done, cv) = &*self.gate;
        *done.lock().unwrap() = true;
        cv.notify_all();
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

fn pass_cost(all: bool) -> (u64, u64, usize) {
    let opts = SamplerOptions {
        interval: Duration::from_millis(100),
        all,
        ..Default::default()
    };
    let s = Sampler::start(opts).expect("BPF must load: run as root");
    let snaps: Vec<_> = (0..25).map(|_| s.receiver().recv().unwrap()).skip(5).collect();
    s.stop().unwrap();
    let walk = median(snaps.iter().map(|x| x.cost.walk_ns).collect());
    let decode = median(snaps.iter().map(|x| x.cost.decode_ns).collect());
    let emitted = snaps.iter().map(|x| x.samples.len()).max().unwrap_or(0);
    (walk, decode, emitted)
}

fn getppid_ns(calls: u64) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..calls {
            // SAFETY: getppid has no preconditions.
            std::hint::black_box(unsafe { libc::syscall(libc::SYS_getppid) });
        }
        best = best.min(t.elapsed().as_nanos() as f64 / calls as f64);
    }
    best
}

fn pin_to_cpu0() {
    // SAFETY: cpu_set_t is plain data; pins the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// ns per one-way message between two threads on one CPU: one context switch each.
fn pingpong_ns(rounds: u64) -> f64 {
    let (mut a, mut b) = UnixStream::pair().unwrap();
    pin_to_cpu0();
    let h = std::thread::spawn(move || {
        let mut buf = [0u8; 1];
        for _ in 0..rounds {
            b.read_exact(&mut buf).unwrap();
            b.write_all(&buf).unwrap();
        }
    });
    let mut buf = [0u8; 1];
    let t = Instant::now();
    for _ in 0..rounds {
        a.write_all(&buf).unwrap();
        a.read_exact(&mut buf).unwrap();
    }
    let ns = t.elapsed().as_nanos() as f64 / (rounds * 2) as f64;
    h.join().unwrap();
    ns
}

fn with_xtop<T>(track_syscalls: bool, f: impl FnOnce() -> T) -> T {
    let opts = SamplerOptions {
        track_syscalls,
        ..Default::default()
    };
    let s = Sampler::start(opts).expect("BPF must load: run as root");
    let r = f();
    s.stop().unwrap();
    r
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // cargo test --benches asks for a listing
    }
    println!("## Sampling pass cost (median of 20 passes)");
    println!(
        "| extra sleeping threads | threads on box | mode | emitted | walk µs | decode µs | µs per thread |"
    );
    println!("|---:|---:|---|---:|---:|---:|---:|");
    for n in [100, 2_000, 10_000] {
        let _s = sleepers(n);
        std::thread::sleep(Duration::from_millis(300));
        let total = threads_on_system();
        for all in [false, true] {
            let (walk, decode, emitted) = pass_cost(all);
            let per = (walk + decode) as f64 / 1000.0 / total as f64;
            let mode = if all { "--all" } else { "active" };
            println!(
                "| {n} | {total} | {mode} | {emitted} | {:.0} | {:.0} | {per:.3} |",
                walk as f64 / 1000.0,
                decode as f64 / 1000.0
            );
        }
    }

    println!("\n## Added cost per syscall (getppid loop, best of 5 × 2M calls)");
    let calls = 2_000_000;
    let base = getppid_ns(calls);
    let untracked = with_xtop(false, || getppid_ns(calls));
    let tracked = with_xtop(true, || getppid_ns(calls));
    println!("| setup | ns per getppid | added ns |");
    println!("|---|---:|---:|");
    println!("| no xtop | {base:.1} | - |");
    println!(
        "| xtop (default: no syscall hooks) | {untracked:.1} | {:.1} |",
        untracked - base
    );
    println!("| xtop --track-syscalls | {tracked:.1} | {:.1} |", tracked - base);

    println!("\n## Added cost per context switch (ping-pong on one CPU, best of 4, alternating)");
    let rounds = 200_000;
    let base = (0..3).map(|_| pingpong_ns(rounds)).fold(f64::MAX, f64::min);
    let hooked = with_xtop(false, || {
        (0..3).map(|_| pingpong_ns(rounds)).fold(f64::MAX, f64::min)
    });
    println!("| setup | ns per message | added ns |");
    println!("|---|---:|---:|");
    println!("| no xtop | {base:.0} | - |");
    println!("| xtop (sched hooks) | {hooked:.0} | {:.0} |", hooked - base);
}
