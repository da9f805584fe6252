//! End to end: the real BPF sampler (library and `xtop -b`) against threads in
//! known states. Needs root; CI runs it as root.

mod common;

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use common::observe::*;
use common::workload as w;
use xtop::sampler::{Sampler, SamplerOptions};

#[test]
fn library_reports_known_states_with_all() {
    let Some(_live) = live_workload() else { return };
    let by = sample_live(opts(true), 20);
    assert_known_states(&by, true);
}

#[test]
fn library_active_only_by_default() {
    let Some(_live) = live_workload() else { return };
    let by = sample_live(opts(false), 20);
    assert_known_states(&by, false);
    // Every reported thread is active.
    for o in by.values().flatten() {
        assert!(!["SLEEP", "IDLE", "PARKED"].contains(&o.state.as_str()), "{o:?}");
    }
}

#[test]
fn without_syscall_hooks_registers_still_name_the_syscall() {
    let Some(_live) = live_workload() else { return };
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
    let Some(_live) = live_workload() else { return };
    let by = sample_live(
        SamplerOptions {
            track_syscalls: true,
            ..opts(true)
        },
        15,
    );
    // The napper re-enters clock_nanosleep every 200 ms, so the hooks see it
    // and time it: always below the 200 ms sleep plus slack.
    let timed: Vec<u64> = by[w::NAP].iter().filter_map(|o| o.so_far.parse().ok()).collect();
    assert!(!timed.is_empty(), "napper never timed: {:?}", by[w::NAP]);
    assert!(timed.iter().all(|&ns| ns < 400_000_000), "{timed:?}");
}

#[test]
fn batch_csv_reports_known_states() {
    let Some(_live) = live_workload() else { return };
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
    let Some(_live) = live_workload() else { return };
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
    let Some(_serial) = live_bpf() else { return };
    let sampler = Sampler::start(opts(true)).expect("BPF sampler must load");
    let _ = sampler.receiver().recv_timeout(Duration::from_secs(30)).unwrap();
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

#[test]
fn a_hook_that_cannot_attach_is_named_and_its_columns_are_unknown() {
    let Some(_live) = live_workload() else { return };
    let out = Command::new(env!("CARGO_BIN_EXE_xtop"))
        .args(["-b", "--format", "csv", "-n", "3", "-i", "100ms", "-a"])
        .env("XTOP_DISABLE_HOOKS", "sched_switch,sched_wakeup,perf_event")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("warning: cannot attach sched_switch"), "{err}");
    assert!(err.contains("warning: cannot attach sched_wakeup ("), "{err}");
    // Alone, sched_wakeup_new would leave creators standing as last wakers.
    assert!(err.contains("warning: not using sched_wakeup_new"), "{err}");
    assert!(
        err.contains("warning: cannot attach perf_event") && err.contains("without stacks"),
        "{err}"
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |n: &str| header.iter().position(|h| *h == n).unwrap();
    let (offcpu, switch, waker, state) = (
        col("SINCE_OFFCPU_NS"),
        col("SWITCH"),
        col("WAKER_TID"),
        col("STATE"),
    );
    let mut rows = 0;
    for line in lines {
        let f = common::observe::split_csv(line);
        assert_eq!(f.len(), header.len(), "{line}");
        rows += 1;
        assert_eq!(
            (f[offcpu].as_str(), f[switch].as_str(), f[waker].as_str()),
            ("", "", ""),
            "fed by the missing hooks: {line}"
        );
        assert!(!f[state].is_empty(), "the rest still works: {line}");
    }
    assert!(rows > 0);
}

#[test]
fn a_cmdline_with_newlines_stays_one_row() {
    let Some(_serial) = live_bpf() else { return };
    // What CI's own harness looks like: a shell script with newlines as argv.
    let mut sh = Command::new("sh")
        .args(["-c", "read x\n# xt_newline\tend"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = sh.id().to_string();
    std::thread::sleep(Duration::from_millis(200)); // reach `read`
    let json_escaped = r"read x\\n# xt_newline\\tend";
    for (format, group, shown) in [
        ("csv", "tid", r"read x\n# xt_newline\tend"),
        ("json", "tid", json_escaped),
        ("table", "cmdline", r"read x\n# xt_newline\tend"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_xtop"))
            .args(["-b", "--format", format, "-n", "1", "-a", "-p", &pid, "-g", group])
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let rows: Vec<&str> = text.lines().filter(|l| l.contains("xt_newline")).collect();
        assert_eq!(rows.len(), 1, "{format}: one row for the one thread:\n{text}");
        assert!(rows[0].contains(shown), "{format}: {text}");
    }
    sh.kill().unwrap();
    sh.wait().unwrap();
}
