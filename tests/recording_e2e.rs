//! End to end: `xtop record` on the live known-state workload, stopped by
//! SIGTERM, then `report` and `export` read back what was recorded. Needs root.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::kid::run_ok;
use common::observe::*;
use xtop::aggregation::aggregate;
use xtop::dimensions::parse_list;
use xtop::output::write_table;

fn xtop(args: &[&str]) -> String {
    let out = run_ok(
        Command::new(env!("CARGO_BIN_EXE_xtop")).args(args),
        &format!("xtop {args:?}"),
    );
    String::from_utf8(out.stdout).unwrap()
}

fn fresh_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Records at least a dozen passes and stops the recorder with SIGTERM.
fn record_until_sigterm(file: &Path) {
    let count = || xtop::recording::read_files(&[file.to_path_buf()]).map_or(0, |r| r.snapshots.len());
    let want = count() + 12;
    let mut child = on_cpu0(|| {
        Command::new(env!("CARGO_BIN_EXE_xtop"))
            .args(["record", "-o", file.to_str().unwrap(), "-i", "100ms", "-a"])
            .spawn()
            .unwrap()
    });
    // Until enough passes are on disk (each frame is written as it is made).
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while count() < want {
        assert!(std::time::Instant::now() < deadline, "recorder wrote too little");
        std::thread::sleep(Duration::from_millis(200));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(status.success(), "record after SIGTERM: {status}");
}

#[test]
fn record_then_report_and_export_the_live_workload() {
    let Some(_live) = live_workload() else { return };
    let dir = fresh_dir("record-e2e");
    let file = dir.join("live.xtop");
    record_until_sigterm(&file);

    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "recordings can hold secrets (cmdlines)");
    let rec = xtop::recording::read_files(std::slice::from_ref(&file)).unwrap();
    assert!(rec.warnings.is_empty(), "{:?}", rec.warnings);
    assert!(
        rec.snapshots.len() >= 10,
        "only {} snapshots",
        rec.snapshots.len()
    );

    // What was recorded says what the threads were doing.
    let by = parse_csv(&xtop(&["report", file.to_str().unwrap(), "--format", "csv"]));
    assert_known_states(&by, true);

    // The report's figures are those of a direct aggregation of the same snapshots.
    let report = xtop(&["report", file.to_str().unwrap(), "-g", "state,comm"]);
    let dims = parse_list("state,comm").unwrap();
    let mut want = Vec::new();
    write_table(&mut want, &aggregate(&rec.snapshots, &dims, &[]), &dims).unwrap();
    assert!(report.contains(&String::from_utf8(want).unwrap()), "{report}");

    // xcapture-compatible export: hourly samples files with xcapture's header.
    let out = dir.join("xcapture");
    xtop(&[
        "export",
        file.to_str().unwrap(),
        "--format",
        "xcapture-csv",
        "-o",
        out.to_str().unwrap(),
    ]);
    let samples: Vec<PathBuf> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("xcapture_samples_")
        })
        .collect();
    assert!(!samples.is_empty());
    let text = std::fs::read_to_string(&samples[0]).unwrap();
    assert!(text.starts_with("TIMESTAMP,WEIGHT_US,TID,TGID,PIDNS,CGROUP_ID,STATE,USERNAME,EXE,COMM,"));
    assert!(text.contains("'xt_runq'"), "workload threads exported");

    // Folded stacks parse back: every line is `frames count`, counts add up to
    // the samples that have a kernel or a user stack.
    let folded = xtop(&["export", file.to_str().unwrap(), "--format", "folded", "-o", "-"]);
    let total: u64 = folded
        .lines()
        .map(|l| {
            l.rsplit_once(' ')
                .expect("frames count")
                .1
                .parse::<u64>()
                .expect("count")
        })
        .sum();
    let with_stack = rec
        .snapshots
        .iter()
        .flat_map(|s| &s.samples)
        .filter(|s| s.kstack.is_some() || s.ustack.is_some())
        .count();
    assert_eq!(total, with_stack as u64);
}

#[test]
fn appending_after_sigterm_keeps_every_snapshot_readable() {
    let Some(_serial) = live_bpf() else { return };
    let file = fresh_dir("record-append").join("twice.xtop");
    record_until_sigterm(&file);
    let first = xtop::recording::read_files(std::slice::from_ref(&file))
        .unwrap()
        .snapshots
        .len();
    record_until_sigterm(&file);
    let rec = xtop::recording::read_files(std::slice::from_ref(&file)).unwrap();
    assert!(rec.warnings.is_empty(), "{:?}", rec.warnings);
    assert!(
        rec.snapshots.len() > first,
        "{} then {}",
        first,
        rec.snapshots.len()
    );
    assert!(
        rec.snapshots.windows(2).all(|w| w[0].time_ns < w[1].time_ns),
        "time ordered"
    );
}

#[test]
fn a_second_live_recorder_is_refused_at_once_and_the_first_stays_readable() {
    let Some(_serial) = live_bpf() else { return };
    let file = fresh_dir("record-twice").join("same.xtop");
    let count = || xtop::recording::read_files(&[file.to_path_buf()]).map_or(0, |r| r.snapshots.len());
    let mut first = on_cpu0(|| {
        Command::new(env!("CARGO_BIN_EXE_xtop"))
            .args(["record", "-o", file.to_str().unwrap(), "-i", "100ms"])
            .spawn()
            .unwrap()
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while count() < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "the first recorder wrote nothing"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The second fails before loading BPF: at once, one line, naming the first.
    let t = std::time::Instant::now();
    let second = Command::new(env!("CARGO_BIN_EXE_xtop"))
        .args(["record", "-o", file.to_str().unwrap(), "-i", "100ms"])
        .output()
        .unwrap();
    let took = t.elapsed();
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "{err}");
    assert_eq!(
        err,
        format!(
            "xtop: {} is being recorded by PID {}; refusing to write to it too\n",
            file.display(),
            first.id()
        )
    );
    assert!(took < Duration::from_secs(1), "refused after {took:?}");
    let before = count();
    while count() < before + 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "the first recorder stopped writing"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(first.id() as i32, libc::SIGTERM) };
    assert!(first.wait().unwrap().success());
    let rec = xtop::recording::read_files(std::slice::from_ref(&file)).unwrap();
    assert!(rec.warnings.is_empty(), "{:?}", rec.warnings);
    assert!(rec.snapshots.len() >= before + 3);
}
