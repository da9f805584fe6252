//! CFI unwinding cost: `cargo bench --bench unwind` (as root, for
//! /proc/PID/map_files). What the sampler pays in userspace per stack, on
//! real stack windows of this process (a release build without frame pointers
//! over the distro glibc):
//!
//! 1. a stack whose rules are cached (the steady state), 10 and 100 frames deep;
//! 2. a process seen for the first time, its binaries known (module list built);
//! 3. a binary never seen: its CFI read (first-stack latency), and the bytes
//!    held for it (the tables' memory); the same for the vDSO;
//! 4. the tables of a PostgreSQL server: postgres and every library it links.

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use xtop::symbols::UserSymbols;
use xtop::unwind::capture::{capture, Captured};
use xtop::unwind::cfi::Cfi;
use xtop::unwind::{vdso, End, Unwinder};

/// The stack `depth` frames below here, captured at the bottom.
#[inline(never)]
fn deep(depth: u32) -> (Captured, u32) {
    if depth == 0 {
        return (capture(), 0);
    }
    let (c, n) = deep(black_box(depth - 1));
    // Work after the call: not a tail call, so every level keeps its frame.
    (c, black_box(n) + 1)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Median of `rounds` timings of `f` run `per` times, per run.
fn time_per(rounds: usize, per: u32, mut f: impl FnMut()) -> Duration {
    median(
        (0..rounds)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..per {
                    f();
                }
                t.elapsed() / per
            })
            .collect(),
    )
}

fn main() {
    let pid = std::process::id();
    let mut syms = UserSymbols::new();
    let mappings = syms.unwind_mappings(pid, 0);
    let mut u = Unwinder::new();
    let proc = u.process(&mappings);
    println!(
        "CFI unwinding ({} modules with CFI in this process):",
        proc.modules()
    );
    for depth in [10, 100] {
        let (c, _) = std::thread::spawn(move || deep(depth)).join().unwrap();
        let got = u.unwind(&proc, &c.regs, c.window(usize::MAX));
        assert_eq!(got.end, End::Root, "{depth}: {got:?}");
        let t = time_per(25, 2_000, || {
            black_box(u.unwind(&proc, &c.regs, c.window(usize::MAX)));
        });
        println!(
            "  cached rules, {} frames ({} stack bytes): {:.2} µs per stack",
            got.addrs.len(),
            c.stack.len(),
            t.as_nanos() as f64 / 1000.0
        );
    }

    let t = time_per(9, 20, || {
        black_box(u.process(&mappings));
    });
    println!(
        "  new process, binaries known: {:.1} µs to build its modules",
        t.as_nanos() as f64 / 1000.0
    );
    let t = time_per(9, 5, || {
        black_box(UserSymbols::new().unwind_mappings(pid, 0));
    });
    println!(
        "  (its maps and binaries read: {:.2} ms)",
        t.as_nanos() as f64 / 1e6
    );

    let libc = mappings
        .iter()
        .filter_map(|m| m.source.path())
        .find(|p| p.to_string_lossy().contains("libc.so"))
        .map(Path::to_path_buf);
    let postgres = std::fs::read_dir("/usr/lib/postgresql")
        .ok()
        .and_then(|mut d| d.next())
        .and_then(|e| e.ok())
        .map(|e| e.path().join("bin/postgres"));
    let exe = std::env::current_exe().ok();
    let python = Some(Path::new("/usr/bin/python3").to_path_buf());
    println!("  a binary never seen: its CFI read, and held:");
    for (name, path) in [
        ("libc", libc),
        ("python3", python),
        ("postgres", postgres),
        ("this bench", exe),
    ] {
        let Some(path) = path.filter(|p| p.exists()) else {
            println!("    {name}: not here");
            continue;
        };
        let Some(cfi) = Cfi::read(&path) else {
            println!("    {name}: no CFI");
            continue;
        };
        let t = time_per(9, 3, || {
            black_box(Cfi::read(&path));
        });
        println!(
            "    {name}: {:.2} ms, {} KiB",
            t.as_nanos() as f64 / 1e6,
            cfi.size() / 1024
        );
    }
    match vdso::own_cfi() {
        Some(cfi) => {
            let t = time_per(9, 3, || {
                black_box(vdso::own_cfi());
            });
            let kib = cfi.size() as f64 / 1024.0;
            println!(
                "    the vDSO (from memory): {:.3} ms, {kib:.1} KiB",
                t.as_nanos() as f64 / 1e6
            );
        }
        None => println!("    the vDSO: none, or no CFI"),
    }

    if let Some(pg) = std::fs::read_dir("/usr/lib/postgresql")
        .ok()
        .and_then(|mut d| d.next())
        .and_then(|e| e.ok())
        .map(|e| e.path().join("bin/postgres"))
        .filter(|p| p.exists())
    {
        let out = std::process::Command::new("ldd").arg(&pg).output().expect("ldd");
        let libs: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                l.split("=>")
                    .nth(1)?
                    .split_whitespace()
                    .next()
                    .map(str::to_string)
            })
            .collect();
        let mut u = Unwinder::new();
        let t = Instant::now();
        for (i, path) in std::iter::once(pg.display().to_string())
            .chain(libs.iter().cloned())
            .enumerate()
        {
            u.tables.get(i as u64, || Cfi::read(Path::new(&path)));
        }
        println!(
            "  PostgreSQL (postgres and its {} libraries): {} KiB of CFI, read in {:.1} ms",
            libs.len(),
            u.tables.bytes() / 1024,
            t.elapsed().as_secs_f64() * 1e3
        );
    }
}
