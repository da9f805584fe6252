//! End to end: batch mode says how many user stacks reached their root, and
//! `ustack_end` which did, over a workload of several binaries: C and Rust
//! built without frame pointers, the distro's `python3` and `sleep`, all of
//! which unwind through CFI, and a thread spinning in anonymous memory (a
//! JIT's code without frame pointers), which nothing can unwind. Needs root;
//! CI runs it as root.
#![cfg(target_arch = "x86_64")]

mod common;

use std::collections::BTreeMap;
use std::process::{Command, Stdio};

use common::kid::Kid;
use common::observe::{live_bpf, on_cpu0};
use common::programs::*;

/// Samples by (comm, ustack_end) in the tables, and the headings' reach
/// figures summed: (root, with a user stack, truncated).
#[derive(Debug, Default)]
struct Seen {
    rows: BTreeMap<(String, String), u64>,
    heading: (u64, u64, u64),
}

impl Seen {
    fn of(&self, comm: &str) -> BTreeMap<&str, u64> {
        self.rows
            .iter()
            .filter(|((c, _), _)| c == comm)
            .map(|((_, end), &n)| (end.as_str(), n))
            .collect()
    }
}

/// `ustacks to root R/T (P%; N truncated, M deeper)` → (R, T, N).
fn reach_of(heading: &str) -> Option<(u64, u64, u64)> {
    let rest = heading.split("ustacks to root ").nth(1)?;
    let (frac, gaps) = rest.split_once(' ')?;
    let (root, total) = frac.split_once('/')?;
    let truncated = gaps
        .trim_end_matches(')')
        .split([';', ','])
        .find_map(|g| g.trim().strip_suffix(" truncated"))
        .map_or(Ok(0), str::parse)
        .ok()?;
    Some((root.parse().ok()?, total.parse().ok()?, truncated))
}

/// `xtop -b -a -g comm,ustack_end` over `pids` for `passes` passes.
fn batch(pids: &[u32], passes: u32) -> Seen {
    let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
    let out = on_cpu0(|| {
        Command::new(env!("CARGO_BIN_EXE_xtop"))
            .args(["-b", "-a", "-g", "comm,ustack_end", "-n", &passes.to_string()])
            .args(["-p", &pids.join(",")])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .expect("run xtop")
    });
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "xtop: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut seen = Seen::default();
    for line in text.lines() {
        if line.contains("  threads ") {
            let (r, t, n) = reach_of(line).unwrap_or_else(|| panic!("no reach in {line:?}\n{text}"));
            seen.heading = (seen.heading.0 + r, seen.heading.1 + t, seen.heading.2 + n);
            continue;
        }
        // samples  avg_threads  %  comm  ustack_end
        let f: Vec<&str> = line.split_whitespace().collect();
        if let [n, _, _, comm, end] = f[..] {
            if let Ok(n) = n.parse::<u64>() {
                *seen.rows.entry((comm.into(), end.into())).or_default() += n;
            }
        }
    }
    seen
}

#[test]
fn batch_reports_how_many_stacks_of_several_binaries_reach_their_root() {
    let Some(_serial) = live_bpf() else { return };
    let kids = [
        spawn_c_nofp("cfi-spin-c", C_SPIN_SOURCE),
        spawn_rust_spin(),
        spawn_c_nofp("reach-jit", JIT_SPIN_SOURCE),
        Kid::spawn(Command::new("/usr/bin/python3").args(["-c", "while True: pass"])),
        Kid::spawn(Command::new("/bin/sleep").arg("60")),
    ];
    let pids: Vec<u32> = kids.iter().map(Kid::pid).collect();
    // A first pass lets every thread start and name itself.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let seen = batch(&pids, 8);
    let show = format!("{seen:#?}");

    // The headings count exactly the samples the tables show with a user stack.
    let samples = |end: fn(&str) -> bool| -> u64 {
        seen.rows
            .iter()
            .filter(|((_, e), _)| end(e))
            .map(|(_, n)| n)
            .sum()
    };
    let with_stack = samples(|e| e != "-");
    let root = samples(|e| e == "root");
    let truncated = samples(|e| e == "truncated");
    assert_eq!(seen.heading, (root, with_stack, truncated), "{show}");

    // The JIT thread's stacks never reach a root...
    let jit = seen.of("xt_jit");
    assert!(jit.get("truncated").is_some_and(|&n| n >= 4), "{show}");
    assert!(
        jit.keys().all(|&e| e == "truncated" || e == "-"),
        "xt_jit: a root or a gap other than a failed unwind: {show}"
    );
    // ...while each program unwound by CFI mostly does (a running thread
    // caught early in a pass on a crowded CPU may have only the profile's
    // frame-pointer walk left, which is truncated and says so).
    for comm in [
        "xt_spin_c",
        "xt_spin_rs",
        "python3",
        "sleep",
        "cfi-spin-c",
        "reach-jit",
    ] {
        let ends = seen.of(comm);
        let all: u64 = ends.values().sum();
        let root = ends.get("root").copied().unwrap_or(0);
        assert!(all >= 4 && root * 10 >= all * 8, "{comm}: {ends:?}\n{show}");
    }
}
