//! Command-level tests: report vs direct aggregation, exports, the record loop.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use clap::Parser;

use super::cmd::{Dims, RecordingCommand, Selection};
use super::tests::{varied, TempDir};
use super::*;
use crate::aggregation::{aggregate, Filter};
use crate::dimensions::parse_list;
use crate::model::fixture::{busy_snapshot, T0_NS};
use crate::output::{self, Format};

#[derive(Parser)]
struct TestCli {
    #[command(subcommand)]
    cmd: RecordingCommand,
}

fn parse(args: &[&str]) -> RecordingCommand {
    TestCli::try_parse_from([&["xtop"], args].concat()).unwrap().cmd
}

fn sel(files: Vec<PathBuf>, filters: &[&str], from: Option<&str>, to: Option<&str>) -> Selection {
    Selection {
        files,
        filters: filters.iter().map(|f| Filter::parse(f).unwrap()).collect(),
        from: from.map(str::to_string),
        to: to.map(str::to_string),
    }
}

fn recorded(d: &TempDir, snaps: &[Snapshot]) -> PathBuf {
    let p = d.join("r.xtop");
    write_file(&p, &synth::session(Duration::from_secs(1)), snaps).unwrap();
    p
}

#[test]
fn command_lines_parse() {
    match parse(&[
        "report",
        "a",
        "b",
        "-g",
        "state,comm",
        "-w",
        "comm~pg",
        "-w",
        "state=DISK",
        "--from",
        "10m",
    ]) {
        RecordingCommand::Report(r) => {
            assert_eq!(r.sel.files.len(), 2);
            assert_eq!(r.group_by.0.len(), 2);
            assert_eq!(r.sel.filters.len(), 2);
            assert_eq!(r.format, Format::Table);
        }
        _ => panic!("not a report"),
    }
    match parse(&[
        "record", "-o", "f", "-d", "1h", "-i", "500ms", "-a", "-p", "1,2", "--rotate", "10m",
    ]) {
        RecordingCommand::Record(r) => {
            let o = r.sampling.options();
            assert_eq!(
                (r.duration, o.interval),
                (Some(Duration::from_secs(3600)), Duration::from_millis(500))
            );
            assert_eq!(
                (o.all, o.pids, r.rotate),
                (true, vec![1, 2], Some(Duration::from_secs(600)))
            );
        }
        _ => panic!("not a record"),
    }
    assert!(matches!(
        parse(&["export", "f", "--format", "xcapture-csv", "-o", "d"]),
        RecordingCommand::Export(_)
    ));
    assert!(matches!(parse(&["replay", "f"]), RecordingCommand::Replay(_)));
    assert!(TestCli::try_parse_from(["xtop", "report", "f", "-g", "nosuch"]).is_err());
    assert!(TestCli::try_parse_from(["xtop", "report", "f", "-w", "bad"]).is_err());
    assert!(TestCli::try_parse_from(["xtop", "report"]).is_err());
}

fn table_lines(text: &str) -> Vec<&str> {
    text.lines().filter(|l| !l.starts_with('#')).collect()
}

#[test]
fn report_equals_direct_aggregation() {
    let d = TempDir::new("report");
    let snaps: Vec<_> = (0..60).map(busy_snapshot).collect();
    let p = recorded(&d, &snaps);
    let rec = read_files(std::slice::from_ref(&p)).unwrap();
    let dims = Dims(parse_list("state,syscall,comm").unwrap());
    let filters = ["comm~gres"];
    let cases = [(None, None, 0..60), (Some("10s"), Some("20s"), 10..20)];
    for (from, to, range) in cases {
        let s = sel(vec![p.clone()], &filters, from, to);
        let mut got = Vec::new();
        report::write_report(&mut got, &rec, &s, &dims, Format::Table).unwrap();
        let agg = aggregate(&snaps[range.clone()], &dims.0, &s.filters);
        let mut want = Vec::new();
        output::write_table(&mut want, &agg, &dims.0).unwrap();
        let got = String::from_utf8(got).unwrap();
        assert_eq!(
            table_lines(&got),
            table_lines(&String::from_utf8(want).unwrap()),
            "{from:?}"
        );
        assert!(got.contains(&format!("{} snapshots", range.len())), "{got}");
        // Under the header: how far the selected samples' user stacks reach.
        let selected = snaps[range.clone()].iter().flat_map(|snap| {
            snap.samples
                .iter()
                .filter(|t| crate::aggregation::matches_all(&s.filters, snap, t))
        });
        let reach = crate::model::Reach::of(selected).summary().expect("user stacks");
        assert!(got.contains(&format!("\n# {reach}\n")), "{got}");
    }
    // Absolute local times select the same as offsets.
    let at = |n: u64| crate::value::format_local_time(T0_NS + n * 1_000_000_000);
    let s = sel(vec![p.clone()], &[], Some(&at(10)), Some(&at(20)));
    assert_eq!(report::selected(&rec, &s).unwrap().len(), 10);
    // csv: one row per matching sample.
    let mut csv = Vec::new();
    let s = sel(vec![p], &["state=DISK"], None, None);
    report::write_report(&mut csv, &rec, &s, &dims, Format::Csv).unwrap();
    let disk: usize = snaps
        .iter()
        .map(|s| s.samples.iter().filter(|t| t.state.name() == "DISK").count())
        .sum();
    assert_eq!(String::from_utf8(csv).unwrap().lines().count(), 1 + disk);
}

const XCAPTURE_HEADER: &str = "TIMESTAMP,WEIGHT_US,TID,TGID,PIDNS,CGROUP_ID,STATE,USERNAME,EXE,COMM,SYSCALL,\
SYSCALL_ACTIVE,SYSC_ENTRY_TIME,SYSC_NS_SO_FAR,SYSC_SEQ_NUM,IORQ_SEQ_NUM,SYSC_ARG1,SYSC_ARG2,SYSC_ARG3,SYSC_ARG4,\
SYSC_ARG5,SYSC_ARG6,FILENAME,CONNECTION,CONN_STATE,EXTRA_INFO,KSTACK_HASH,USTACK_HASH";

#[test]
fn xcapture_export_layout() {
    let d = TempDir::new("xcap");
    // Two snapshots in one hour, one in the next.
    let mut snaps: Vec<_> = (0..3).map(busy_snapshot).collect();
    snaps[1].time_ns = T0_NS + 30 * 60 * 1_000_000_000;
    snaps[2].time_ns = T0_NS + 60 * 60 * 1_000_000_000;
    snaps[1].samples[1].target = Some(std::sync::Arc::new(crate::model::Target::Socket {
        file: "socket:[77]".into(),
        connection: Some("TCP 10.0.0.1:5432->10.0.0.2:39856".into()),
        state: Some("ESTABLISHED".into()),
    }));
    let p = recorded(&d, &snaps);
    let out = d.join("out");
    parse(&[
        "export",
        p.to_str().unwrap(),
        "--format",
        "xcapture-csv",
        "-o",
        out.to_str().unwrap(),
    ])
    .run()
    .unwrap();
    let h0 = timefmt::hour(T0_NS);
    let h1 = timefmt::hour(snaps[2].time_ns);
    let mut names: Vec<String> = fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let mut want: Vec<String> = ["cgroups", "kstacks", "samples", "ustacks"]
        .iter()
        .flat_map(|k| [format!("xcapture_{k}_{h0}.csv"), format!("xcapture_{k}_{h1}.csv")])
        .collect();
    want.sort();
    assert_eq!(names, want);
    assert!(h0.len() == 13 && h0.as_bytes()[10] == b'.', "{h0}");

    let read = |k: &str, h: &str| fs::read_to_string(out.join(format!("xcapture_{k}_{h}.csv"))).unwrap();
    let samples = read("samples", &h0);
    let mut lines = samples.lines();
    assert_eq!(lines.next().unwrap(), XCAPTURE_HEADER);
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), snaps[0].samples.len() + snaps[1].samples.len());
    let disk = &rows[1]; // postgres tid 101 in pread64
    assert_eq!(disk.len(), 28);
    assert_eq!(disk[0], crate::value::format_local_time(T0_NS));
    assert_eq!(&disk[1..4], ["1000000", "101", "100"]);
    assert_eq!(
        &disk[6..12],
        [
            "DISK",
            "'alice'",
            "'/usr/bin/postgres'",
            "'postgres'",
            "pread64",
            "1"
        ]
    );
    // Entered 1.5 ms before the pass: xcapture's SYSC_ENTRY_TIME.
    assert_eq!((disk[13], disk[14], disk[15]), ("1500000", "42", ""));
    assert_eq!(disk[12], crate::value::format_local_time(T0_NS - 1_500_000));
    assert_eq!(&disk[16..19], ["0x3", "0x7ffd0000", "0x1000"]);
    // FILENAME from the registry's `filename`, quoted like all free text.
    assert_eq!(
        &disk[22..28],
        [
            "'/var/lib/postgres/base/16384/2619'",
            "",
            "",
            "",
            "0xfeed",
            "0xbeef"
        ]
    );
    // CONNECTION and CONN_STATE from the registry's dimensions.
    let sock = &rows[snaps[0].samples.len() + 1];
    assert_eq!(
        &sock[22..25],
        [
            "'socket:[77]'",
            "'TCP 10.0.0.1:5432->10.0.0.2:39856'",
            "ESTABLISHED"
        ]
    );
    assert_eq!(
        &rows[0][26..28],
        ["", ""],
        "the fixture's running thread has no stacks"
    );
    assert!(
        rows[0][10].is_empty() && rows[0][16].is_empty(),
        "user-space thread has no syscall"
    );
    assert_eq!(
        read("kstacks", &h0),
        "KSTACK_HASH,KSTACK_SYMS\n0xfeed,'vfs_read;pipe_read;schedule;__schedule'\n"
    );
    // Each hour's dictionary names the stacks its samples use.
    for h in [&h0, &h1] {
        assert_eq!(
            read("ustacks", h),
            "USTACK_HASH,USTACK_SYMS\n0xbeef,'main;read_block;__libc_read'\n"
        );
    }
    assert_eq!(
        read("cgroups", &h1),
        "CGROUP_ID,CGROUP_PATH\n1234,'/user.slice'\n"
    );
    assert_eq!(read("samples", &h1).lines().count(), 1 + snaps[2].samples.len());
    let mode = fs::metadata(out.join(format!("xcapture_samples_{h0}.csv")))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn csv_json_and_folded_exports() {
    let d = TempDir::new("exp");
    let snaps = varied();
    let p = recorded(&d, &snaps);
    let run = |fmt: &str, extra: &[&str]| {
        let out = d.join(fmt);
        let mut args = vec![
            "export",
            p.to_str().unwrap(),
            "--format",
            fmt,
            "-o",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        parse(&args).run().unwrap();
        fs::read_to_string(out).unwrap()
    };
    let n: usize = snaps.iter().map(|s| s.samples.len()).sum();
    let csv = run("csv", &[]);
    assert_eq!(csv.lines().count(), 1 + n);
    assert!(csv.starts_with("TIMESTAMP,TID,TGID,"));
    let json = run("json", &["-w", "comm=java"]);
    let java: usize = snaps
        .iter()
        .map(|s| s.samples.iter().filter(|t| &*t.ident.comm == "java").count())
        .sum();
    assert_eq!(json.lines().count(), java);
    assert!(json
        .lines()
        .all(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["comm"] == "java"));
    // Folded lines parse back (`stack count`, split at the last space) to
    // exactly the per-stack counts of the `stack` dimension.
    let folded = run("folded", &[]);
    let mut got: BTreeMap<String, u64> = BTreeMap::new();
    for l in folded.lines() {
        let (stack, n) = l.rsplit_once(' ').unwrap();
        assert!(
            got.insert(stack.to_string(), n.parse().unwrap()).is_none(),
            "{stack} twice"
        );
    }
    let agg = aggregate(&snaps, &parse_list("stack").unwrap(), &[]);
    let want: BTreeMap<String, u64> = agg
        .groups
        .iter()
        .filter(|g| g.key[0].is_known())
        .map(|g| (g.key[0].plain(), g.samples))
        .collect();
    assert_eq!(got, want);
    let with_stack = snaps
        .iter()
        .flat_map(|s| &s.samples)
        .filter(|t| t.kstack.is_some() || t.ustack.is_some())
        .count();
    assert_eq!(got.values().sum::<u64>(), with_stack as u64);
    assert!(
        got.contains_key(
            "main;read_block;__libc_read;vfs_read_[k];pipe_read_[k];schedule_[k];__schedule_[k]"
        ),
        "{folded}"
    );
    assert_eq!(
        got.get("vfs_read_[k];pipe_read_[k];schedule_[k];__schedule_[k]"),
        Some(&1)
    );
    assert_eq!(got.get("[truncated];spin"), Some(&1), "user-only stack: {folded}");
}

#[test]
fn report_groups_by_user_stack() {
    let d = TempDir::new("ureport");
    let snaps: Vec<_> = (0..10).map(busy_snapshot).collect();
    let p = recorded(&d, &snaps);
    let rec = read_files(std::slice::from_ref(&p)).unwrap();
    let TestCli {
        cmd: RecordingCommand::Report(r),
    } = TestCli::try_parse_from([
        "xtop",
        "report",
        p.to_str().unwrap(),
        "-g",
        "ustack_top,ustack_hash",
    ])
    .unwrap()
    else {
        panic!("not a report");
    };
    let mut out = Vec::new();
    report::write_report(&mut out, &rec, &r.sel, &r.group_by, Format::Table).unwrap();
    let out = String::from_utf8(out).unwrap();
    let total: usize = snaps.iter().map(|s| s.samples.len()).sum();
    let off_cpu = snaps
        .iter()
        .flat_map(|s| &s.samples)
        .filter(|t| t.state != crate::model::State::Run)
        .count();
    let rows: Vec<Vec<&str>> = table_lines(&out)
        .iter()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    let (n, run) = (off_cpu.to_string(), (total - off_cpu).to_string());
    assert_eq!(rows[0][3..], ["__libc_read", "0xbeef"], "{out}");
    assert_eq!(rows[0][0], n, "{out}");
    assert_eq!(
        rows[1][3..],
        ["-", "-"],
        "running threads have no user stack here: {out}"
    );
    assert_eq!(rows[1][0], run, "{out}");
    assert_eq!(rows.len(), 2, "{out}");
}

#[test]
fn record_loop_writes_everything_taken_and_counts_drops() {
    let d = TempDir::new("loop");
    let out = d.join("live.xtop");
    let session = synth::session(Duration::from_secs(1));
    let (tx, rx) = crossbeam_channel::unbounded();
    let mut snaps: Vec<_> = (0..5).map(busy_snapshot).collect();
    snaps[3].dropped = 2;
    snaps[4].dropped = 2;
    snaps.iter().for_each(|s| tx.send(s.clone()).unwrap());
    // A stop request still writes the passes already taken.
    let reserve = || Rotating::reserve(&out, None, 0).unwrap();
    let stats = record_loop(reserve(), None, &session, &rx, &Vec::new, &AtomicBool::new(true)).unwrap();
    assert_eq!((stats.snapshots, stats.samples, stats.dropped), (5, 28, 2));
    assert_eq!(fs::metadata(&out).unwrap().permissions().mode() & 0o777, 0o600);
    // Recording again appends; the deadline stops it.
    tx.send(busy_snapshot(5)).unwrap();
    let stats = record_loop(
        reserve(),
        Some(Duration::from_millis(50)),
        &session,
        &rx,
        &Vec::new,
        &AtomicBool::new(false),
    );
    assert_eq!(stats.unwrap().snapshots, 1);
    let rec = read_files(std::slice::from_ref(&out)).unwrap();
    assert_eq!(rec.snapshots.len(), 6);
    assert_eq!(rec.snapshots[..5], snaps);
    assert!(
        rec.warnings.iter().any(|w| w.contains("dropped 2 snapshots")),
        "{:?}",
        rec.warnings
    );
    // A sampler that ends closes the channel: reported, and what it produced is kept.
    tx.send(busy_snapshot(6)).unwrap();
    drop(tx);
    let stats = record_loop(reserve(), None, &session, &rx, &Vec::new, &AtomicBool::new(false)).unwrap();
    assert!(stats.sampler_ended && stats.snapshots == 1);
    assert_eq!(read_files(&[out]).unwrap().snapshots.len(), 7);
    // A bad path fails when the files are reserved, before any sampling.
    let bad = Rotating::reserve(&d.join("missing/dir/x.xtop"), None, 0);
    assert!(format!("{:#}", bad.err().unwrap()).starts_with("cannot create"));
}
