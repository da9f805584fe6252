//! End to end: the real BPF sampler (library and `xtop -b`) against threads in
//! known states. Needs root; CI runs it as root.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use common::workload::{self as w, can_run_bpf, Workload};
use xtop::dimensions;
use xtop::sampler::{Sampler, SamplerOptions};

/// The workload saturates the CPUs: one test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// What xtop said about one thread in one pass, as text (the registry's own rendering).
#[derive(Debug, Clone)]
struct Obs {
    comm: String,
    tgid: String,
    state: String,
    syscall: String,
    so_far: String,
    /// The human rendering: '-' for no syscall, '?' for unknown.
    shown: String,
    runq_wait: String,
}

type ByComm = HashMap<String, Vec<Obs>>;

/// Runs xtop on CPU 0 with the RUNQ spinners: sampling from the spinner's CPU
/// would preempt it at every pass, and it would (rightly) show as RUNQ.
fn on_cpu0<T>(f: impl FnOnce() -> T + Send) -> T
where
    T: Send,
{
    std::thread::scope(|s| {
        s.spawn(|| {
            w::pin_to_cpu(0);
            f()
        })
        .join()
        .unwrap()
    })
}

fn sample_live(opts: SamplerOptions, passes: usize) -> ByComm {
    let sampler = on_cpu0(|| Sampler::start(opts)).expect("BPF sampler must load (run as root)");
    let get = |name: &str| dimensions::find(name).unwrap();
    let mut by_comm = ByComm::new();
    for _ in 0..passes {
        let snap = sampler
            .receiver()
            .recv_timeout(Duration::from_secs(5))
            .expect("a snapshot");
        for s in &snap.samples {
            let v = |n: &str| get(n).value(&snap, s).plain();
            let o = Obs {
                comm: v("comm"),
                tgid: v("tgid"),
                state: v("state"),
                syscall: v("syscall"),
                so_far: v("sysc_ns_so_far"),
                shown: get("syscall").value(&snap, s).to_string(),
                runq_wait: v("runq_wait_ns"),
            };
            by_comm.entry(o.comm.clone()).or_default().push(o);
        }
    }
    sampler.stop().unwrap();
    by_comm
}

fn sample_cli(args: &[&str]) -> ByComm {
    let out = on_cpu0(|| {
        Command::new(env!("CARGO_BIN_EXE_xtop"))
            .args(args)
            .output()
            .unwrap()
    });
    assert!(
        out.status.success(),
        "xtop {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("CSV header").split(',').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("no column {name}"))
    };
    let (comm, tgid, state, syscall, so_far) = (
        col("COMM"),
        col("TGID"),
        col("STATE"),
        col("SYSCALL"),
        col("SYSC_NS_SO_FAR"),
    );
    let mut by_comm = ByComm::new();
    for line in lines {
        // Our workload's fields hold no commas or quotes; others may (cmdlines): keep it simple
        // by only looking at rows whose leading columns parse.
        let f: Vec<&str> = line.split(',').collect();
        if f.len() < header.len() {
            continue;
        }
        let o = Obs {
            comm: f[comm].into(),
            tgid: f[tgid].into(),
            state: f[state].into(),
            syscall: f[syscall].into(),
            so_far: f[so_far].into(),
            shown: String::new(),
            runq_wait: f[col("RUNQ_WAIT_NS")].into(),
        };
        by_comm.entry(o.comm.clone()).or_default().push(o);
    }
    by_comm
}

fn states(by: &ByComm, comm: &str) -> BTreeSet<String> {
    by.get(comm)
        .into_iter()
        .flatten()
        .map(|o| o.state.clone())
        .collect()
}

fn assert_only(by: &ByComm, comm: &str, allowed: &[&str]) {
    let seen = states(by, comm);
    assert!(
        !seen.is_empty(),
        "{comm} never reported; saw {:?}",
        by.keys().collect::<Vec<_>>()
    );
    assert!(
        seen.iter().all(|s| allowed.contains(&s.as_str())),
        "{comm}: states {seen:?}, allowed {allowed:?}"
    );
}

fn assert_syscall(by: &ByComm, comm: &str, state: &str, syscall: &str) {
    let obs: Vec<&Obs> = by[comm].iter().filter(|o| o.state == state).collect();
    assert!(!obs.is_empty(), "{comm} never in {state}");
    assert!(
        obs.iter().all(|o| o.syscall == syscall),
        "{comm} in {state}: {obs:?}, want {syscall}"
    );
}

/// The assertions shared by library and CLI runs.
fn assert_known_states(by: &ByComm, with_sleepers: bool) {
    assert_only(by, w::SPIN, &["RUN", "RUNQ"]);
    assert!(states(by, w::SPIN).contains("RUN"), "spinner never seen on CPU");
    assert_only(by, w::RUNQ, &["RUN", "RUNQ"]);
    assert!(
        states(by, w::RUNQ).contains("RUNQ"),
        "3 threads pinned to one CPU never seen waiting"
    );
    // Waiting for the CPU is timed from the scheduler's own sched_info, below one second
    // (CFS gives each of three spinners a slice of a few ms).
    for o in by[w::RUNQ].iter().filter(|o| o.state == "RUNQ") {
        let wait: u64 = o
            .runq_wait
            .parse()
            .unwrap_or_else(|_| panic!("RUNQ without a wait time: {o:?}"));
        assert!(wait < 1_000_000_000, "{o:?}");
    }
    assert_only(by, w::DIO, &["DISK", "RUN", "RUNQ"]);
    assert_syscall(by, w::DIO, "DISK", "pread64");
    assert_only(by, w::STOPPED, &["STOPPED"]);
    assert_only(by, w::ZOMBIE, &["ZOMBIE"]);
    assert!(
        by[w::ZOMBIE].iter().all(|o| o.syscall.is_empty()),
        "zombies are in no syscall"
    );
    if with_sleepers {
        assert_only(by, w::SLEEP, &["SLEEP"]);
        assert_syscall(by, w::SLEEP, "SLEEP", "clock_nanosleep");
        assert_only(by, w::PIPE, &["SLEEP"]);
        assert_syscall(by, w::PIPE, "SLEEP", "read");
    } else {
        assert!(
            !by.contains_key(w::SLEEP) && !by.contains_key(w::PIPE),
            "sleepers reported without --all"
        );
    }
}

fn workload() -> Workload {
    Workload::start(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")))
}

fn opts(all: bool) -> SamplerOptions {
    SamplerOptions {
        interval: Duration::from_millis(100),
        all,
        ..Default::default()
    }
}

#[test]
fn library_reports_known_states_with_all() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_run_bpf() {
        return;
    }
    let _w = workload();
    let by = sample_live(opts(true), 20);
    assert_known_states(&by, true);
}

#[test]
fn library_active_only_by_default() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_run_bpf() {
        return;
    }
    let _w = workload();
    let by = sample_live(opts(false), 20);
    assert_known_states(&by, false);
    // Every reported thread is active.
    for o in by.values().flatten() {
        assert!(!["SLEEP", "IDLE", "PARKED"].contains(&o.state.as_str()), "{o:?}");
    }
}

#[test]
fn without_syscall_hooks_registers_still_name_the_syscall() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_run_bpf() {
        return;
    }
    let _w = workload();
    let by = sample_live(
        SamplerOptions {
            track_syscalls: false,
            ..opts(true)
        },
        10,
    );
    assert_syscall(&by, w::SLEEP, "SLEEP", "clock_nanosleep");
    assert_syscall(&by, w::PIPE, "SLEEP", "read");
    // Entry time is not observed without the hooks: unknown, never a made-up number.
    assert!(by[w::SLEEP].iter().all(|o| o.so_far.is_empty()));
    // A thread on a CPU cannot be told apart: unknown, not "no syscall".
    let spinning: Vec<&Obs> = by[w::SPIN].iter().filter(|o| o.state == "RUN").collect();
    assert!(!spinning.is_empty());
    assert!(spinning.iter().all(|o| o.shown == "?"), "{spinning:?}");
}

#[test]
fn syscall_hooks_time_the_current_syscall() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_run_bpf() {
        return;
    }
    let _w = workload();
    let by = sample_live(
        SamplerOptions {
            track_syscalls: true,
            ..opts(true)
        },
        15,
    );
    // The sleeper re-enters clock_nanosleep every 200 ms, so the hooks see it
    // and time it: always below the 200 ms sleep plus slack.
    let timed: Vec<u64> = by[w::SLEEP]
        .iter()
        .filter_map(|o| o.so_far.parse().ok())
        .collect();
    assert!(!timed.is_empty(), "sleeper never timed: {:?}", by[w::SLEEP]);
    assert!(timed.iter().all(|&ns| ns < 400_000_000), "{timed:?}");
}

#[test]
fn batch_csv_reports_known_states() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_run_bpf() {
        return;
    }
    let _w = workload();
    let by = sample_cli(&["-b", "--format", "csv", "-n", "20", "-i", "100ms", "-a"]);
    assert_known_states(&by, true);
    let by = sample_cli(&[
        "-b",
        "--format",
        "csv",
        "-n",
        "20",
        "-i",
        "100ms",
        "-a",
        "--track-syscalls",
    ]);
    assert_known_states(&by, true);
}

#[test]
fn pid_filter_keeps_only_that_process() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_run_bpf() {
        return;
    }
    let _w = workload();
    let me = std::process::id();
    let by = sample_cli(&[
        "-b",
        "--format",
        "csv",
        "-n",
        "3",
        "-i",
        "100ms",
        "-a",
        "-p",
        &me.to_string(),
    ]);
    let tgids: BTreeSet<&str> = by.values().flatten().map(|o| o.tgid.as_str()).collect();
    assert_eq!(tgids, BTreeSet::from([me.to_string().as_str()]));
    assert!(by.contains_key(w::SLEEP));
}

#[test]
fn thread_churn_frees_per_thread_state() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_run_bpf() {
        return;
    }
    let sampler = Sampler::start(opts(true)).expect("BPF sampler must load");
    let _ = sampler.receiver().recv_timeout(Duration::from_secs(5)).unwrap();
    let live = |s: &Sampler| {
        let (created, freed) = s.thread_states();
        created - freed
    };
    std::thread::sleep(Duration::from_millis(300));
    let before = live(&sampler);
    for _ in 0..50 {
        let hs: Vec<_> = (0..100)
            .map(|_| std::thread::spawn(|| std::hint::black_box(unsafe { libc::getppid() })))
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        while sampler.receiver().try_recv().is_ok() {}
    }
    std::thread::sleep(Duration::from_millis(300));
    let (created, _) = sampler.thread_states();
    let after = live(&sampler);
    assert!(created >= 5000, "churned threads got state: {created}");
    assert!(
        after <= before + 100,
        "per-thread state grew from {before} to {after} after 5000 exits"
    );
    sampler.stop().unwrap();
}

#[test]
fn unprivileged_run_prints_one_line() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if unsafe { libc::geteuid() } != 0 {
        // Already unprivileged: run as ourselves.
        return check_privilege_error(Command::new(env!("CARGO_BIN_EXE_xtop")));
    }
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_xtop"));
    cmd.uid(65534).gid(65534).env("RUST_BACKTRACE", "1");
    check_privilege_error(cmd);
}

fn check_privilege_error(mut cmd: Command) {
    let out = cmd.args(["-b", "-n", "1"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(
        err.starts_with("xtop: ") && err.contains("sudo xtop") && err.contains("CAP_BPF"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}
